"""Focused tests for the general rules round 3p added (docs/evidence.md), from the wordings and producers round 3n's
check set showed: graph-mode failures from producers the catalogue lacked (vLLM-Ascend's ACL graph capture bar
followed by a worker exception, torch_npu's AclmdlRICapture* errors, CANN's capture-stream and capture-mode errors,
TensorRT-LLM's CUDA graph warm-up of a batch size that raises), graph-mode failures told in prose, vLLM V0's
"MQLLMEngine is already dead"; and look-alikes (a rendered documentation page and a runbook that quote errors, a PR's
"List of changes", syslogd's broadcast of a hardware message, a `dcgmi diag` NvLink-down warning on a system without
NVLink, a memory test that could not create a CUDA context). Texts are written for the tests, not copied from the
samples. Each rule has a look-alike. The signatures' own must-match / must-not-match examples run in
test_signatures.py.
"""

from __future__ import annotations

import pytest
from tests.evidence.rounds import category as _cat
from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence import described
from llm_oncall.evidence.classify import classify_text

# ---- graph capture: producers -----------------------------------------------------------------------------------

_ACL_BAR = ("(EngineCore_0 pid=7) INFO 03-02 11:00:01 [kv_cache_utils.py:800] GPU KV cache size: 100,000 tokens\n"
            "Capturing ACL graphs (decode, FULL):   0%|          | 0/8 [00:00<?, ?it/s]\n")


def test_worker_exception_while_acl_capture_bar_runs_is_cuda_graph() -> None:
    text = _ACL_BAR + (
        "(VllmWorker TP1 pid=90) ERROR 03-02 11:00:02 [multiproc_executor.py:600] WorkerProc hit an exception.\n"
        "(VllmWorker TP1 pid=90) ERROR 03-02 11:00:02 [multiproc_executor.py:600] Traceback (most recent call last):\n")
    assert _cat(text, "worker.log") == "cuda-graph"


def test_worker_exception_after_capture_finished_is_not_a_capture_failure() -> None:
    text = ("Capturing ACL graphs (decode, FULL): 100%|██████████| 8/8 [00:04<00:00,  1.9it/s]\n"
            "INFO 03-02 11:00:09 [model_runner.py:2100] Graph capturing finished in 5 secs\n"
            "(VllmWorker TP1 pid=90) ERROR 03-02 11:09:02 [multiproc_executor.py:600] WorkerProc hit an exception.\n")
    assert classify_text(text, "worker.log").category != "cuda-graph"


def test_torch_npu_capture_begin_error_is_cuda_graph() -> None:
    text = ("RuntimeError: NPUModelRunner init failed: capture_begin:torch_npu/csrc/core/npu/NPUGraph.cpp:120 "
            "NPU function error: c10_npu::acl::AclmdlRICaptureBegin(capture_stream_, capture_mode), error code is "
            "207001\n")
    assert _cat(text, "engine.log") == "cuda-graph"


@pytest.mark.parametrize("line", [
    "    Create capture stream failed, stream_id=40, event_id=-1, error=1.[FUNC:CaptureEventWait][FILE:api_impl.cc]",
    "[ERROR] rtMemcpy:ErrCode=107030, desc=[the current capture mode does not support this operation]",
])
def test_cann_capture_stream_and_mode_errors_are_cuda_graph(line: str) -> None:
    assert _cat(line + "\n", "plog.log") == "cuda-graph"


def test_acl_graph_error_named_in_a_fix_pr_is_quiet() -> None:
    text = ("## Changes\nThis PR fixes the aclmdlRICaptureEnd 107033 failure when the capture sizes exceed the "
            "stream limit.\n")
    assert _quiet(text)


def test_exception_in_trtllm_graph_warmup_is_cuda_graph() -> None:
    text = ("[TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=96\n"
            "Traceback (most recent call last):\n"
            "  File \"/app/run.py\", line 3, in <module>\n"
            "AssertionError: batch 96 larger than the buffer\n")
    assert _cat(text, "server.log") == "cuda-graph"


def test_trtllm_graph_warmup_without_an_exception_is_quiet() -> None:
    text = ("[TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=96\n"
            "[TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=64\n"
            "[TRT-LLM] [I] Server ready on port 8000\n")
    assert _quiet(text, "server.log")


# ---- graph mode in prose -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "### Describe the bug\nOn the 910B the server crashed during the startup graph capture with four capture sizes.\n",
    "### Describe the bug\nThe first chat request fails during ACL graph replay; the eager run answers.\n",
    "### Describe the bug\nServing the draft model fails, while adding `--enforce-eager` is ok.\n",
    "I started it with --disable-cuda-graph and it ran fine. However, with graphs enabled the server hits an error.\n",
    "### 问题描述\n开启图模式后推理服务报错，单算子模式正常。\n",
])
def test_graph_mode_failure_in_prose_is_cuda_graph(text: str) -> None:
    assert _cat(text) == "cuda-graph"


@pytest.mark.parametrize("text", [
    "This PR fixes a crash during CUDA graph capture when LoRA adapters are loaded.\n",
    "If the kernel synchronises with the host, it may fail during graph capture.\n",
    "--enforce-eager works fine but costs about a third of the throughput.\n",
    "请问如何在图模式下开启投机解码？\n",
])
def test_graph_mode_look_alikes_are_quiet(text: str) -> None:
    assert _quiet(text)


# ---- an engine death ---------------------------------------------------------------------------------------------

def test_mq_engine_already_dead_is_other_failure() -> None:
    text = ("INFO 02-11 08:00:00 metrics.py:351] Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: "
            "50.1 tokens/s, Running: 2 reqs\n"
            "CRITICAL 02-11 08:00:05 launcher.py:99] MQLLMEngine is already dead, terminating server process\n")
    assert _cat(text, "api.log") == "other-failure"


def test_mq_engine_dead_in_a_diff_is_quiet() -> None:
    text = ("```diff\n"
            "+            logger.fatal(\"MQLLMEngine is already dead, terminating server process\")\n"
            "```\n")
    assert _quiet(text)


# ---- look-alikes: documents ---------------------------------------------------------------------------------------

def test_rendered_docs_page_quoting_a_preemption_warning_is_quiet() -> None:
    text = ("Performance Guide#\n\nKV cache pressure#\n\n"
            "When the cache is short the scheduler preempts sequences and logs:\n\n"
            "WARNING 01-01 00:00:00 scheduler.py:1000 Sequence group 5 is preempted by PreemptionMode.RECOMPUTE mode "
            "because there is not enough KV cache space.\n\n"
            "To reduce preemptions, consider the following actions:\n\n  • Raise gpu_memory_utilization.\n")
    assert _quiet(text, "page.txt")


def test_one_permalink_heading_alone_is_no_reference_page() -> None:
    text = ("Deployment#\n\n"
            "WARNING 01-01 00:00:00 scheduler.py:1000 Sequence group 5 is preempted by PreemptionMode.RECOMPUTE mode "
            "because there is not enough KV cache space.\n")
    assert _cat(text, "page.txt") == "kv-pressure"


def test_runbook_listing_xids_as_triggers_is_quiet() -> None:
    text = ("Runbook: node drain after a GPU fault\n\nTrigger\n\n"
            "  • A fatal Xid in the kernel log: Xid 79 (GPU has fallen off the bus), Xid 48 (double-bit ECC).\n\n"
            "Pre-checks\n\n  • Record the GPU serial before any reset.\n")
    assert _quiet(text, "runbook.txt")


def test_a_sentence_opening_with_a_runbook_word_is_no_heading() -> None:
    # "Rollback ..." and "Verification ..." open a report's sentences; as headings they stand alone, after `#`, or
    # before a colon.
    assert described._reference_marks("Rollback to 0.6.3 fixed it.\nVerification passed on node 4 after that.\n") == 0
    assert described._reference_marks("## Rollback\n\nVerification:\n") == 2


def test_report_with_one_trigger_heading_still_alarms() -> None:
    text = ("Trigger\n\nWe are seeing this on node 12 since the reboot:\n"
            "[ 812.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n")
    assert _cat(text) == "gpu-hardware"


def test_pr_list_of_changes_quoting_cuda_oom_is_quiet() -> None:
    text = ("Restart the worker on `torch.cuda.OutOfMemoryError: CUDA out of memory.` so the GPU memory is freed.\n\n"
            "List of changes:\n\n1. `server.py` - restart the worker on CUDA OOM\n2. `README.md` - document it\n")
    assert _quiet(text)


def test_report_of_cuda_oom_still_alarms() -> None:
    text = ("### Describe the bug\nThe worker dies at the first long prompt:\n"
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert _cat(text) == "other-failure"


# ---- look-alikes: host and diagnostics ----------------------------------------------------------------------------

def test_syslogd_broadcast_of_hardware_messages_is_no_model_output() -> None:
    block = ("Message from syslogd@node7 at Mar  3 10:00:00 ...\n"
             " kernel:[Hardware Error]: Corrected error, no action required.\n\n")
    text = "Students keep seeing this on the shared server:\n\n```\n" + block * 4 + "```\n"
    assert classify_text(text, "issue.md").category != "bad-output"


_DIAG_NVLINK_DOWN = (
    "+---------------------------+------------------------------------------------+\n"
    "| Diagnostic                | Result                                         |\n"
    "+-----  Integration  -------+------------------------------------------------+\n"
    "| PCIe                      | Fail - All                                     |\n"
    "| Warning                   | GPU 1's NvLink link 0 is currently down Run a  |\n"
    "|                           | field diagnostic on the GPU.                   |\n"
    "+---------------------------+------------------------------------------------+\n")


def test_dcgm_nvlink_down_on_a_system_without_nvlink_is_quiet() -> None:
    text = "Our L40S servers have no NVLink, yet `dcgmi diag -r 2` fails:\n\n```\n" + _DIAG_NVLINK_DOWN + "```\n"
    assert _quiet(text)


def test_dcgm_nvlink_down_without_that_statement_still_alarms() -> None:
    text = "After the move `dcgmi diag -r 2` fails on node 4:\n\n```\n" + _DIAG_NVLINK_DOWN + "```\n"
    assert not _quiet(text)


def test_dcgm_memory_test_that_cannot_create_a_context_is_gpu_hardware() -> None:
    text = ("+---------------------------+------------------------------------------------+\n"
            "| Diagnostic                | Result                                         |\n"
            "+-----  Hardware  ----------+------------------------------------------------+\n"
            "| GPU Memory                | Fail - GPU: 2                                  |\n"
            "| Warning                   | GPU 2 Unable to create CUDA context: 'CUDA-cap |\n"
            "|                           | able device(s) is/are busy or unavailable'.    |\n"
            "+---------------------------+------------------------------------------------+\n")
    assert _cat(text, "diag.txt") == "gpu-hardware"


def test_dcgm_memory_test_with_a_memory_error_stays_gpu_memory() -> None:
    text = ("+---------------------------+------------------------------------------------+\n"
            "| Diagnostic                | Result                                         |\n"
            "+-----  Hardware  ----------+------------------------------------------------+\n"
            "| GPU Memory                | Fail - GPU: 2                                  |\n"
            "| Error                     | GPU 2 has uncorrectable memory errors and row  |\n"
            "|                           | remapping failed.                              |\n"
            "+---------------------------+------------------------------------------------+\n")
    assert _cat(text, "diag.txt") == "gpu-memory"


# ---- other producers and prose ------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "terminate called after throwing an instance of 'sycl::_V1::exception'\n"
    "  what():  Native API failed. Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)\n",
    "ggml_vulkan: vk::Queue::submit: ErrorDeviceLost (VK_ERROR_DEVICE_LOST)\n",
])
def test_device_lost_is_gpu_hardware(line: str) -> None:
    assert _cat(line, "server.log") == "gpu-hardware"


def test_device_lost_constant_in_source_is_quiet() -> None:
    text = "```cpp\nswitch (res) {\n    case ZE_RESULT_ERROR_DEVICE_LOST:\n        return \"lost\";\n}\n```\n"
    assert _quiet(text)


def test_process_stopped_on_a_signal_in_prose_is_other_failure() -> None:
    assert _cat("Hi, my fine-tuning run on node 12 suddenly died with a segmentation fault at step 300.\n") == \
        "other-failure"


def test_signal_hypothesis_is_quiet() -> None:
    assert _quiet("If /dev/shm is too small the data loader can die with a bus error.\n")


def _shard_wait(n: int, ready: bool) -> str:
    rows = [f"2024-01-01T00:{i // 4:02d}:{(i % 4) * 10:02d}.0Z  INFO shard-manager: text_generation_launcher: "
            f"Waiting for shard to be ready... rank={i % 4}" for i in range(n)]
    if ready:
        rows.append("2024-01-01T00:09:00.0Z  INFO shard-manager: text_generation_launcher: Shard ready in 95.1s rank=0")
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("n, ready", [(12, True), (12, False), (4, False)])
def test_tgi_shards_waiting_are_quiet(n: int, ready: bool) -> None:
    # a run of "Waiting for shard to be ready..." is what a normal (long) load shows too: no hang without more
    # (a rule was drafted and dropped: the gated corpus holds such healthy excerpts)
    assert _quiet(_shard_wait(n, ready), "launcher.log")


@pytest.mark.parametrize("text", [
    "### Describe the bug\nWith the FP8 checkpoint the model falls into an endless repetition loop on long prompts.\n",
    "### Describe the bug\nThe output repeat and repeat when the tool parser is on.\n",
])
def test_repetition_loop_in_prose_is_bad_output(text: str) -> None:
    assert _cat(text) == "bad-output"


def test_repetition_loop_hypothesis_is_quiet() -> None:
    assert _quiet("Without a repetition penalty a small model may enter a repetition loop.\n")


@pytest.mark.parametrize("text", [
    "**What happened:**\nThe predictor pod starts, but the worker processes are repeatedly restarted and no request "
    "is served.\n",
    "**What happened:**\nAfter the upgrade the operator created an OOMKilled loop on every restart.\n",
])
def test_restart_and_oomkilled_loops_in_prose_are_other_failure(text: str) -> None:
    assert _cat(text) == "other-failure"


def test_restart_loop_hypothesis_is_quiet() -> None:
    assert _quiet("Without the readiness gate the workers would be repeatedly restarted by the supervisor.\n")


def test_rewritten_xid_mmu_fault_record_is_read_by_the_xid_catalogue() -> None:
    text = ("All faults from kern.log on this host:\n\n```\n"
            "02-03 04:05:06 Xid 31 GPC0 GPCCLIENT_T1_2 @ 0x7f00_40000000 FAULT_PTE ACCESS_TYPE_VIRT_WRITE\n"
            "02-03 04:07:10 Xid 31 GPC2 GPCCLIENT_T1_5 @ 0x7f00_80000000 FAULT_PDE ACCESS_TYPE_VIRT_READ\n```\n")
    f = classify_text(text, "issue.md")
    # Xid 31 is an application's MMU fault: the catalogue's reading (software, the node is fine), not nothing
    assert f.kind == "xid_app_fault" and f.facts["codes"] == [31]


def test_fault_type_without_an_xid_is_quiet() -> None:
    assert _quiet("The NVRM docs list fault types such as FAULT_PDE and ACCESS_TYPE_VIRT_READ.\n")


def test_power_cable_traced_as_the_cause_is_gpu_hardware() -> None:
    assert _cat("Reconnected the card: it turned out to be a loose power connector, no segfault since.\n") == \
        "gpu-hardware"


def test_power_cable_advice_is_quiet() -> None:
    assert _quiet("If the GPU keeps dropping, check whether a loose power cable is the cause.\n")


def test_host_crash_in_prose_is_other_failure() -> None:
    assert _cat("### Describe the bug\nStarting the 8-card job, the host crashed and had to be power-cycled.\n") == \
        "other-failure"


def test_host_crash_hypothesis_is_quiet() -> None:
    assert _quiet("A kernel bug like this could make the host crash under load.\n")


def test_gpus_that_cannot_do_p2p_are_other_failure() -> None:
    assert _cat("Since the driver update my two linked GPUs can not do p2p and tensor parallel stops.\n") == \
        "other-failure"


def test_p2p_rule_statement_is_quiet() -> None:
    assert _quiet("Consumer GPUs cannot use P2P if the driver disables it.\n")


def test_nvlink_bridge_removed_and_solved_is_nvlink() -> None:
    assert _cat("After a week of this I pulled out the NVLink bridge and the hang is gone.\n") == "nvlink"


def test_nvlink_bridge_advice_is_quiet() -> None:
    assert _quiet("Try to remove the NVLink bridge and check if the hang is gone.\n")


def test_crash_told_in_chinese_is_other_failure() -> None:
    assert _cat("换了三张大图以后服务崩溃了，两张图没问题。\n") == "other-failure"


@pytest.mark.parametrize("text", ["显存给得太满的话肯定崩。\n", "这样配置会不会崩？\n"])
def test_crash_hypothesis_or_question_in_chinese_is_quiet(text: str) -> None:
    assert _quiet(text)


def test_fatal_crash_at_the_end_of_a_chain_is_other_failure() -> None:
    text = ("### What happened?\nA network error in one worker raised an exception, which resulted in a crash of "
            "the whole serving engine.\n")
    assert _cat(text) == "other-failure"


def test_fatal_crash_hypothesis_is_quiet() -> None:
    assert _quiet("An unhandled network error there could lead to a crash of the whole engine.\n")


def test_go_runtime_crash_frames_are_other_failure() -> None:
    rows = "".join(f"        net/http/server.go:{100 + i} +0x{i + 16:x} fp=0xc0000{i}f000 sp=0xc0000{i}e000 "
                   f"pc=0x55d0000{i}a000\n" for i in range(4))
    assert _cat("goroutine 12 [IO wait]:\n" + rows, "journal.log") == "other-failure"


def test_go_stack_without_frame_registers_is_quiet() -> None:
    rows = "".join(f"net/http.(*conn).serve(0xc000{i}00)\n        net/http/server.go:{100 + i} +0x{i + 16:x}\n"
                   for i in range(4))
    assert _quiet("goroutine 12 [IO wait]:\n" + rows, "journal.log")
