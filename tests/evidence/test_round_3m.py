"""Focused tests for the general rules round 3m added (docs/evidence.md), from the wordings round 3k's check set
showed: other failures in their producers' formats (systemd core dumps, Ascend runtime and devmm errors, amdgpu VM
page faults, Kubernetes FailedScheduling / PodScheduled False, host EDAC and APEI errors, SGLang's request slots,
vLLM's negative KV-cache memory, an OOM told in Chinese); GPU hardware (an unrecovered PCIe AER completion timeout,
an initialization error that only a reboot clears); NVLink (a driver assertion in the fabric address space); CUDA
graphs (ggml's repeated "CUDA graph update failed", a crash gone with graphs disabled); KV pressure (TurboMind's
"No enough blocks", ExLlama's "Job requires N pages"); bad outputs told in prose; the output analyzer never reading
kernel, CANN or sensor-table lines as a model's output; and change documents / reference pages that quote errors.
Each rule has a look-alike. The signatures' own must-match / must-not-match examples run in test_signatures.py.
"""

from __future__ import annotations

import pytest
from tests.evidence.rounds import catalogue_category
from tests.evidence.rounds import category as _cat
from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence.classify import classify_text
from llm_oncall.evidence.outputs import parse_plain

# ---- other failures in their producers' formats -----------------------------------------------------------------

CORE_DUMP = (
    "Mar 02 10:00:01 gpu7 systemd[1]: vllm.service: Main process exited, code=dumped, status=11/SEGV\n"
    "Mar 02 10:00:01 gpu7 systemd[1]: vllm.service: Failed with result 'core-dump'.\n"
    "Mar 02 10:00:04 gpu7 systemd[1]: vllm.service: Scheduled restart job, restart counter is at 3.\n"
)


def test_systemd_core_dump_restart_loop_is_other_failure() -> None:
    assert _cat(CORE_DUMP, "journal.log") == "other-failure"


def test_systemd_clean_exit_is_not() -> None:
    text = ("Mar 02 10:00:01 gpu7 systemd[1]: vllm.service: Main process exited, code=exited, status=0/SUCCESS\n"
            "Mar 02 10:00:01 gpu7 systemd[1]: vllm.service: Deactivated successfully.\n")
    assert _cat(text, "journal.log") != "other-failure"


ASCEND = (
    "EZ9999: Inner Error!\n"
    "        rtStreamSynchronize execute failed, reason=[aicore exception][FUNC:FuncErrorReason]"
    "[FILE:error_message_manage.cc][LINE:53]\n"
    "EZ9999: [PID: 411] 2025-03-01-10:00:00.000.001 wait for compute device to finish failed, runtime result = "
    "507015.[FUNC:ReportCallError][FILE:log_inner.cpp][LINE:161]\n"
    "[W301 10:00:00.000000000 compiler_depend.ts:227] Warning: NPU warning, error code is 507015[Error]: \n"
)


def test_ascend_runtime_error_is_other_failure_not_bad_output() -> None:
    f = classify_text(ASCEND, "npu.log")
    assert f.category == "other-failure" and f.kind == "npu_device_error"


def test_ascend_lines_are_never_read_as_a_model_output() -> None:
    assert parse_plain(ASCEND + ASCEND, "npu.log") is None


def test_devmm_device_fault_is_other_failure() -> None:
    text = ("[1716848.455103] [T3084147] [ascend] [devmm] [ERROR] [devmm_chan_query_vaflgs_d2h_process 130] "
            "<kworker/1:0:30,30> Device fault error. (hostpid=2787445; va=0x12f2f4c00000)\n")
    assert _cat(text, "dmesg.txt") == "other-failure"


def test_an_error_code_table_is_not_an_npu_failure() -> None:
    assert _quiet("Error code 507013 means the DMA engine failed; see the CANN error code table.\n")


AMDGPU = "".join(
    f"[Fri Apr 17 19:56:4{i} 2026] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 "
    f"pasid:32770)\n[Fri Apr 17 19:56:4{i} 2026] amdgpu 0000:03:00.0: amdgpu:  Process python3 pid 4242 thread "
    f"python3 pid 4242\n[Fri Apr 17 19:56:4{i} 2026] amdgpu 0000:03:00.0: amdgpu:   in page starting at address "
    f"0x00007f0000{i}00000 from client 10\n" for i in range(3))


def test_amdgpu_page_fault_is_other_failure_not_bad_output() -> None:
    f = classify_text(AMDGPU, "dmesg.txt")
    assert f.category == "other-failure" and f.kind == "amdgpu_page_fault"
    assert parse_plain(AMDGPU, "dmesg.txt") is None


def test_amdgpu_reset_line_is_not_a_page_fault() -> None:
    assert _cat("amdgpu 0000:65:00.0: amdgpu: GPU reset begin!\n", "dmesg.txt") != "other-failure"


def test_sensor_table_is_never_a_model_output() -> None:
    row = ("[Ok] [Type: Memory] [Name: Memory Device 1 B  {n}: Uncorrectable ECC - Deassert] [Label: Green] "
           "[Summary: Sensor is operating under normal conditions]\n")
    text = "".join(row.format(n=n) for n in range(12, 4, -1))
    assert parse_plain(text, "sensors.txt") is None
    assert _quiet(text)


def test_a_real_repetition_loop_is_still_garbage() -> None:
    assert parse_plain("the the the the the the the the the the the the the the the the the the\n", "x") is not None


def test_failed_scheduling_is_other_failure() -> None:
    text = ("Events:\n  Type     Reason            Age   From               Message\n"
            "  Warning  FailedScheduling  2m    default-scheduler  0/3 nodes are available: 3 Insufficient "
            "nvidia.com/gpu.\n")
    assert _cat(text, "describe.txt") == "other-failure"


def test_pod_scheduled_false_is_other_failure_and_scheduled_is_not() -> None:
    head = "Status:           Pending\nConditions:\n  Type           Status\n"
    assert _cat(head + "  PodScheduled   False\n", "describe.txt") == "other-failure"
    ok = ("Events:\n  Normal  Scheduled  10s  default-scheduler  Successfully assigned default/vllm-0 to node-1\n"
          "Conditions:\n  Type           Status\n  PodScheduled   True\n")
    assert _cat(ok, "describe.txt") != "other-failure"


def test_host_edac_ue_and_apei_are_other_failure_not_gpu() -> None:
    text = ("[11189.970968] EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2 slot:0)\n"
            "[11219.196524] {1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1\n")
    assert _cat(text, "dmesg.txt") == "other-failure"


def test_edac_corrected_errors_are_not() -> None:
    text = "[ 1234.5678] EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#0_DIMM#0 (channel:0 slot:0)\n"
    assert _cat(text, "dmesg.txt") != "other-failure"


def test_sglang_req_slots_exhausted_beats_its_stats() -> None:
    text = ("[2025-09-01 10:00:00] Decode batch. #running-req: 31, #token: 90000, token usage: 0.41, gen throughput "
            "(token/s): 900.00, #queue-req: 0\n"
            "RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for "
            "`--max-running-requests`. self.req_to_token_pool.available_size()=1, num_reqs=2,\n")
    assert _cat(text, "sglang.log") == "other-failure"


def test_sglang_fix_pr_naming_req_slots_is_not() -> None:
    assert _quiet("This PR fixes alloc_req_slots runs out of memory when requests are aborted.\n")


def test_negative_kv_cache_memory_is_other_failure() -> None:
    text = "- 第二个实例拉起报错：`Available KV cache memory: -1.33GB`，可用内存为负数。\n"
    assert _cat(text) == "other-failure"


def test_positive_kv_cache_memory_is_not() -> None:
    assert _cat("INFO 01-10 12:00:00 worker.py:200] Available KV cache memory: 21.33 GiB\n", "vllm.log") \
        != "other-failure"


def test_oom_told_in_chinese_is_other_failure() -> None:
    text = "在三卡2080ti 22G环境上运行如下示例代码，报OOM，似乎cache_max_entry_count=0.2没有生效。\n"
    assert _cat(text) == "other-failure"


@pytest.mark.parametrize("text", ["如何避免显存不足？\n", "如果出现 OOM，请调小 gpu_memory_utilization。\n"])
def test_chinese_oom_questions_and_advice_are_not(text: str) -> None:
    assert _cat(text) != "other-failure"


# ---- GPU hardware, NVLink ---------------------------------------------------------------------------------------

def test_unrecovered_pcie_completion_timeout_is_gpu_hardware() -> None:
    text = ("pcieport 0000:00:01.2: AER: Uncorrectable (Non-Fatal) error received from 0000:63:00.0\n"
            "  [14] CmpltTO (Completion Timeout, First)\n"
            "nvidia 0000:63:00.0: AER: can't recover (no error_detected callback)\n"
            "NVRM: Xid (PCI:0000:63:00): 31, pid=1234, name=python3, Ch 00000008, intr 00000000. MMU Fault\n")
    assert _cat(text, "dmesg.txt") == "gpu-hardware"


def test_a_corrected_aer_error_is_not() -> None:
    text = "pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0\n"
    assert _cat(text, "dmesg.txt") != "gpu-hardware"


def test_init_error_until_reboot_is_gpu_hardware() -> None:
    text = ("FAILED: node12 Failed during cudaGetDeviceCount: initialization error\n"
            "After a job finishes some nodes fail this check: no other job can use the GPUs unless the node is "
            "rebooted.\n")
    assert _cat(text) == "gpu-hardware"


def test_init_error_without_a_reboot_account_is_not_gpu_hardware() -> None:
    assert _cat("RuntimeError: CUDA error: initialization error\n", "app.log") != "gpu-hardware"


def test_fabric_vaspace_assertion_is_nvlink() -> None:
    text = ("[588574.797113] NVRM: nvAssertOkFailedNoLog: Assertion failed: Requested object not found "
            "[NV_ERR_OBJECT_NOT_FOUND] (0x00000057) returned from btreeSearch(pteArray[0], &pNode, "
            "pFabricVAS->pFabricVaToGpaMap) @ fabric_vaspace.c:727\n")
    assert _cat(text, "dmesg.txt") == "nvlink"


def test_another_rm_assertion_is_not_nvlink() -> None:
    text = "[588579.265375] NVRM: nvAssertFailedNoLog: Assertion failed: !rmapiLockIsOwner() @ rmapi.c:563\n"
    assert _cat(text, "dmesg.txt") != "nvlink"


# ---- CUDA graphs, KV pressure, bad outputs ---------------------------------------------------------------------

def test_repeated_cuda_graph_update_failures_are_cuda_graph() -> None:
    text = "update_cuda_graph_executable: CUDA graph update failed\n" * 8
    assert _cat(text, "llama-server.log") == "cuda-graph"


def test_one_cuda_graph_update_failure_is_not() -> None:
    text = ("update_cuda_graph_executable: CUDA graph update failed\n"
            "srv  update_slots: all slots are idle\n")
    assert _cat(text, "llama-server.log") != "cuda-graph"


def test_crash_gone_with_graphs_disabled_is_cuda_graph() -> None:
    text = ("Under sustained load the server crashes with CUBLAS_STATUS_INVALID_VALUE after a minute.\n"
            "Disabling CUDA graphs fixes the crash for us; the crash is gone with CUDA graphs disabled.\n")
    assert _cat(text) == "cuda-graph"


def test_a_pr_that_disables_graphs_is_not() -> None:
    assert _cat("This PR fixes the crash by disabling CUDA graphs for MTP.\n") != "cuda-graph"


def test_turbomind_no_enough_blocks_is_kv_pressure() -> None:
    assert _cat("With concurrency=1 the program always fails with a No enough blocks error.\n") == "kv-pressure"


def test_exllama_job_pages_is_kv_pressure() -> None:
    text = ("ERROR: exception=AssertionError('Job requires 33 pages (only 32 available) and cannot be enqueued. "
            "Total cache allocated is 32 * 256 = 8192 tokens')>\n")
    assert _cat(text, "tabby.log") == "kv-pressure"


def test_exllama_format_string_in_code_is_not() -> None:
    text = '            f"Job requires {job.total_pages} pages (only {self.max_pages} available) and cannot "\n'
    assert _cat(text, "dynamic.py") != "kv-pressure"


@pytest.mark.parametrize("text", [
    "With tensor parallelism across two GPUs the model outputs only exclamation marks (`!`) instead of text.\n",
    "The model enters a loop, repeatedly emitting the same sentence until the max token limit is reached.\n",
])
def test_degenerate_output_in_prose_is_bad_output(text: str) -> None:
    assert _cat(text) == "bad-output"


@pytest.mark.parametrize("text", [
    "This PR fixes outputs with only exclamation marks on TP 2.\n",
    "Without a penalty a small model could repeat the same sentence until max_tokens.\n",
])
def test_degenerate_output_fix_or_hypothesis_is_not(text: str) -> None:
    assert catalogue_category(text) != "bad-output"


# ---- change documents and reference pages ----------------------------------------------------------------------

def test_a_what_changed_pr_quoting_a_capture_error_is_quiet() -> None:
    text = ("## What changed and why\n\nTelemetry surfaced a CUDA error from one device:\n\n"
            "- `CUDA error: operation would make the legacy stream depend on a capturing blocking stream`\n\n"
            "The capture now uses capture_error_mode=\"thread_local\".\n")
    assert _quiet(text)


def test_a_bug_report_with_the_same_capture_error_still_alarms() -> None:
    text = ("### Describe the bug\nI get this on every start:\n"
            "RuntimeError: CUDA error: operation would make the legacy stream depend on a capturing blocking stream\n")
    assert _cat(text) == "cuda-graph"


def test_backward_compatible_changes_mark_a_change_document() -> None:
    text = ("Fixed the worker port range in the Ray start commands. Without it Ray picks random ports, which causes "
            "intermittent `ActorUnavailableError` failures during startup.\n\nBoth changes are backward compatible\n")
    assert _quiet(text)


def test_a_log_format_page_with_an_example_xid_is_not_a_gpu_failure() -> None:
    text = ("These logs are in the following format: [gpu-health] [LEVEL] GPU-[UUID]: EVENT_TYPE: MSG\n\n"
            "A classic critical Xid error is the 'fell off the bus' report, code 79. The gpu-health event log looks "
            "like this:\n\n[gpu-health] [CRITICAL] GPU-1234: XID: NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, "
            "name=nvc:[driver], GPU has fallen off the bus.\n")
    assert _cat(text) != "gpu-hardware"


def test_a_user_pasting_an_xid_79_log_still_alarms() -> None:
    text = ("We lost a node last night, the kernel log looks like this:\n"
            "NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, name=python3, GPU has fallen off the bus.\n")
    assert _cat(text) == "gpu-hardware"
