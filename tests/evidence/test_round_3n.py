"""Focused tests for the general rules round 3n added (docs/evidence.md), from the wordings round 3m's check set
showed: failures told in prose (a crash with its exception, a memory leak, a GPU OOM, a GPU lost to the software, a
pod OOMKilled or in CrashLoopBackOff, a hang "as below" / on the second request, an answer that repeats the prompt,
repetition told in Chinese); producers' lines the catalogue lacked (SGLang's "Scheduler hit an exception", a worker's
traceback logged by its executor, Ray Serve's "Request failed", amdgpu's "Fatal error during GPU init", repeated EDAC
corrected errors, Ascend's fftsplus / NPU function errors explaining the HCCL watchdog, a capture function in a
traceback, an Xid a GPU reported); faulthandler frames without their header; and documents that quote errors (a fix
PR's problem section, a forge's commit page, a manual with numbered sections). Each rule has a look-alike. The
signatures' own must-match / must-not-match examples run in test_signatures.py.
"""

from __future__ import annotations

import pytest
from tests.evidence.rounds import category as _cat
from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence.classify import classify_text

# ---- failures told in prose --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "### Describe the bug\nWith two replicas the router occasionally crashes with a `KeyError: 'session'` in "
    "dispatch().\n",
    "### Describe the bug\nAfter the upgrade the model server crashed with RuntimeError on the first long prompt.\n",
])
def test_crash_with_exception_in_prose_is_other_failure(text: str) -> None:
    assert _cat(text) == "other-failure"


@pytest.mark.parametrize("text", [
    "This PR fixes the case where the router crashes with a KeyError on abort.\n",
    "Without the guard the worker could crash with an IndexError on empty batches.\n",
    "Does the server crash with a ValueError when the prompt is empty?\n",
])
def test_crash_fix_hypothesis_or_question_is_quiet(text: str) -> None:
    assert _quiet(text)


def test_memory_leak_in_prose_is_other_failure() -> None:
    text = ("### Describe the bug\nWhen clients cancel streamed requests, the pinned host buffers are not released, "
            "so the process RSS stays high and grows with every cycle.\n")
    assert _cat(text) == "other-failure"


@pytest.mark.parametrize("text", [
    "This PR fixes a memory leak where cancelled requests' buffers were never freed.\n",
    "GPU memory stays high after start-up because the engine preallocates its KV cache by design.\n",
    "The admin UI, which now appears to have a memory leak, is restarted every night.\n",
])
def test_memory_leak_look_alikes_are_quiet(text: str) -> None:
    assert _quiet(text)


@pytest.mark.parametrize("text", [
    "We serve several diffusion models per pod and see frequent GPU OOM errors as soon as a new model is loaded.\n",
    "# Summary\nThe GPTQ model loads, but then fails allocation of memory during the warm-up pass.\n",
])
def test_gpu_oom_in_prose_is_other_failure(text: str) -> None:
    assert _cat(text) == "other-failure"


@pytest.mark.parametrize("text", [
    "If you get CUDA OOM errors at start-up, lower the memory fraction.\n",
    "This PR fixes a GPU OOM error in the warm-up of GPTQ models.\n",
])
def test_gpu_oom_advice_or_fix_is_quiet(text: str) -> None:
    assert _quiet(text)


@pytest.mark.parametrize("text", [
    "#### Describe the bug\nSometimes the worker nodes lose access to the GPU after the container runtime restarts.\n",
    "The server's GPU detection fails with the new driver, so all layers run on the CPU.\n",
])
def test_gpu_lost_to_the_software_is_other_failure(text: str) -> None:
    assert _cat(text) == "other-failure"


def test_gpu_detection_fix_is_quiet() -> None:
    assert _quiet("This PR fixes GPU detection failing on hosts without the NVML library.\n")


def test_pod_oomkilled_reason_in_prose_is_other_failure() -> None:
    text = ("The predictor restarts on every request. In its description there is an error reason called "
            "`OOMKilled`, how do I fix it?\n")
    assert _cat(text) == "other-failure"


def test_oom_question_with_a_negated_core_dump_is_quiet() -> None:
    text = ("What status does the server return when a pod runs out of memory?\n"
            "My worker gets killed without an OOM or core dumped message, so I cannot tell.\n")
    assert _quiet(text)


def test_a_negation_in_an_earlier_clause_does_not_cancel_a_crash() -> None:
    # The crash happened: "not" belongs to the allocation, the crash marker to the next clause.
    crash = "worker 3: could not allocate 4096 bytes; Segmentation fault\n"
    f = classify_text(crash, "worker.log", stream=True)
    assert (f.category, f.confidence) == ("unknown", 0.2)
    assert f.facts.get("first_errors") == [crash.strip()]
    # the shell's job status names the crash itself (round 3ze: process-killed-by-signal)
    dumped = classify_text(crash.replace("fault", "fault (core dumped)"), "worker.log", stream=True)
    assert (dumped.kind, dumped.category) == ("crash_reported", "other-failure")
    # every marker of the line negated: no crash
    quiet = classify_text("exited with no segmentation fault and no core dumped\n", "w.log", stream=True)
    assert quiet.confidence == 0.0


def test_pod_in_crashloopbackoff_is_other_failure() -> None:
    text = "**What happened:**\n3. Watch the predictor pod enter a CrashLoopBackOff with the error below\n"
    assert _cat(text) == "other-failure"


def test_crashloopbackoff_advice_is_quiet() -> None:
    assert _quiet("If the pod goes into CrashLoopBackOff, read the logs of the previous container.\n")


@pytest.mark.parametrize("text", [
    "Running the benchmark under mpirun with --streaming, the program hung after the generate call below.\n",
    "Then I exported the variable again and it will hang as below:\n![image](https://example.invalid/x.png)\n",
    "The first request works, but the server hangs on the second request every time.\n",
])
def test_hang_told_in_prose_is_hang(text: str) -> None:
    assert _cat(text) == "hang"


@pytest.mark.parametrize("text", [
    "If the peer dies, the program will hang until the timeout fires.\n",
    "The client blocks on the next request until a slot is free, which is expected.\n",
])
def test_hang_hypothesis_or_expected_wait_is_quiet(text: str) -> None:
    assert _quiet(text)


def test_answer_repeating_the_prompt_is_bad_output() -> None:
    assert _cat("### Describe the bug\nWith the 4-bit model the answer just repeated the prompt instead of "
                "answering it.\n") == "bad-output"


def test_a_fix_for_a_repeated_prompt_is_quiet() -> None:
    assert _quiet("This PR fixes an answer that repeats the question before the reply.\n")


@pytest.mark.parametrize("text", [
    "### Describe the bug\n转换格式以后部署，长文本场景下存在严重的重复不可用的问题\n",
    "### Describe the bug\n使用新引擎推理时会出现输出重复的情况\n",
])
def test_repetition_told_in_chinese_is_bad_output(text: str) -> None:
    assert _cat(text) == "bad-output"


@pytest.mark.parametrize("text", ["如何解决输出重复的问题？\n", "已修复长文本下出现重复的问题\n"])
def test_chinese_repetition_question_or_fix_is_quiet(text: str) -> None:
    assert _quiet(text)


# ---- producers' lines --------------------------------------------------------------------------------------------

def test_sglang_scheduler_exception_is_other_failure() -> None:
    text = ("[2026-03-01 12:00:00] Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py",\n')
    assert _cat(text, "server.log") == "other-failure"


def test_worker_traceback_logged_by_its_executor_is_other_failure() -> None:
    text = "".join(
        f"(Worker_TP2 pid=91) ERROR 03-01 12:00:0{i} [multiproc_executor.py:640]   File \"/opt/app/layer{i}.py\", "
        f"line {10 + i}, in forward\n(Worker_TP2 pid=91) ERROR 03-01 12:00:0{i} [multiproc_executor.py:640]     "
        f"return self.op(x)\n" for i in range(3))
    assert _cat(text, "worker.log") == "other-failure"


def test_api_server_traceback_at_error_is_not_a_worker_crash() -> None:
    text = "".join(
        f"(APIServer pid=1) ERROR 03-01 12:00:0{i} [serving_chat.py:900]   File \"/opt/app/h{i}.py\", line 3, in f\n"
        for i in range(3))
    assert classify_text(text, "api.log").kind != "worker_exception"


def test_ray_serve_request_failed_is_other_failure() -> None:
    text = ("ERROR 2025-05-01 09:00:00,000 app_Embed x1y2 5f0c /embed replica.py:412 - Request failed:\n"
            "ray::ServeReplica:app:Embed.handle_request() (pid=77, ip=10.0.0.8)\n")
    assert _cat(text, "serve.log") == "other-failure"


def test_amdgpu_fatal_init_error_is_gpu_hardware() -> None:
    text = "[    7.200000] amdgpu 0000:c3:00.0: amdgpu: Fatal error during GPU init\n"
    assert _cat(text, "dmesg.txt") == "gpu-hardware"


def test_amdgpu_fatal_init_fix_is_quiet() -> None:
    assert _quiet("This patch fixes a Fatal error during GPU init on boards with an old VBIOS.\n")


def test_repeated_edac_corrected_errors_are_other_failure() -> None:
    text = "".join(f"[1000.{i}] EDAC MC1: 2 CE memory read error on CPU_SrcID#0_MC#1_Chan#0_DIMM#1 (channel:0 "
                   f"slot:1 page:0x0)\n" for i in range(6))
    assert _cat(text, "dmesg.txt") == "other-failure"


def test_two_edac_corrected_errors_are_quiet() -> None:
    text = "".join(f"[1000.{i}] EDAC MC1: 1 CE memory read error on CPU_SrcID#0_MC#1_Chan#0_DIMM#1 (channel:0 "
                   f"slot:1 page:0x0)\n" for i in range(2))
    assert _quiet(text)


def test_ascend_aicore_error_explains_the_hccl_watchdog() -> None:
    text = (
        "[ERROR] torch.distributed: [ERROR] Find exception when finishedNPUExecutionInternal, query:compiler_depend.ts:"
        "61 NPU function error: acl::AclQueryEventRecordedStatus(event_, &currStatus), error code is 507015\n"
        "        The error from device(chipId:1, dieId:0), serial number is 9, there is an exception of fftsplus "
        "aicore error, core id is 2, error code = 0x800000\n"
        "[rank3]:[E301 10:00:00.000000000 compiler_depend.ts:1693] [Rank 3] HCCL watchdog thread terminated with "
        "exception:\n")
    f = classify_text(text, "npu.log")
    assert f.category == "other-failure" and f.kind == "npu_device_error"


def test_a_watchdog_alone_is_still_a_hang() -> None:
    text = ("[rank3]:[E301 10:00:00.000000000 ProcessGroupNCCL.cpp:1693] [Rank 3] Process group watchdog thread "
            "terminated with exception: NCCL error: remote process exited or there was a network error\n")
    assert _cat(text, "rank3.log") == "hang"


def test_capture_function_in_a_traceback_is_cuda_graph() -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "/home/u/app/engine.py", line 140, in _create_cuda_graph\n'
            "    self.static_out = self.model(*self.static_in)\n"
            '  File "/home/u/app/model.py", line 20, in forward\n'
            "    return self.block(x)\n")
    assert _cat(text, "run.log") == "cuda-graph"


def test_a_traceback_through_a_graph_flag_is_not_cuda_graph() -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "/home/u/app/config.py", line 10, in use_cuda_graph\n'
            "    return self.flags['graph']\n"
            "KeyError: 'graph'\n")
    assert _cat(text, "run.log") != "cuda-graph"


def test_xid_reported_by_a_gpu_in_prose_is_read_by_the_catalogue() -> None:
    text = ("On 2026-02-01 10:00 node a17 GPU 2 reported `Xid 79, GPU has fallen off the bus` and was moved to "
            "the reboot queue.\n")
    assert _cat(text) == "gpu-hardware"


def test_a_rule_about_reported_xids_is_quiet() -> None:
    assert _quiet("GPUs that reported Xid 79 must be drained before the next job.\n")


# ---- faulthandler frames without their header --------------------------------------------------------------------

FH_FRAMES = "".join(
    f'  File "/opt/venv/lib/python3.10/site-packages/app/{m}.py", line {n} in {fn}\n'
    for m, n, fn in (("executor", 224, "_init_cache"), ("executor", 69, "__init__"), ("engine", 119, "__init__"),
                     ("server", 157, "<module>")))


def test_headerless_faulthandler_frames_are_not_a_busy_pyspy_dump() -> None:
    f = classify_text("```\n" + FH_FRAMES + "```\n", "issue.md")
    assert not f.benign and f.category == "other-failure"


def test_a_pyspy_dump_of_a_busy_worker_stays_benign() -> None:
    text = ('Thread 77 (active): "MainThread"\n'
            "    forward (app/model.py:20)\n"
            "    step (app/engine.py:88)\n")
    assert classify_text(text, "pyspy.txt").benign


# ---- documents that quote errors ---------------------------------------------------------------------------------

FIX_PR = """## Summary
- Check the stream's capture status before setting the launch attribute

## Problem
On the new GPUs, CUDA graph capture fails during start-up:

```
RuntimeError: CUDA error: invalid resource handle
Exception: Capture cuda graph failed
```

## Fix
Skip the attribute while the stream is capturing.

## Test plan
- [ ] capture succeeds on the new runners
"""


def test_a_fix_pr_quoting_its_problem_is_quiet() -> None:
    assert _quiet(FIX_PR)


def test_a_bug_report_with_the_same_capture_error_still_alarms() -> None:
    report = FIX_PR.replace("## Summary", "### Describe the bug").replace("## Fix\n", "## Workaround\n")
    assert _cat(report) == "cuda-graph"


COMMIT_PAGE = """[Docs] Explain the preemption warning (#1234)

This commit is contained in:
A. Author
2024-05-13 23:50:44 +09:00
parent 350f9e107f
commit e7c46b9527

View File

@@ -3,6 +3,12 @@
Tuning
======
When the cache is short, the following warning is printed:
```
{warning}
```
Raise gpu_memory_utilization to give the cache more room.
"""
WARNING = ("WARNING 05-09 00:49:33 scheduler.py:1057] Sequence group 0 is preempted by PreemptionMode.RECOMPUTE mode "
           "because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
           "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
           "total_cumulative_preemption_cnt=1")
COMMIT_PAGE = COMMIT_PAGE.replace("{warning}", WARNING)


def test_a_commit_page_quoting_a_warning_in_its_hunk_is_quiet() -> None:
    assert _quiet(COMMIT_PAGE)


def test_the_same_warning_in_a_log_still_alarms() -> None:
    assert _cat((WARNING + "\n") * 3, "engine.log") == "kv-pressure"


MANUAL = """The driver retires a memory page after repeated ECC errors on it.

1. Implementation

The driver decides when a page is retired and stores the address in the InfoROM.

2. Availability

Page retirement is supported on the following products: data-centre boards with ECC.

3. Visibility

There are two Xids of page retirement:
  - XID 48: A DBE has occurred.
  - XID 63: A page has been retired.
"""


def test_a_manual_with_numbered_sections_quoting_xids_is_quiet() -> None:
    assert _quiet(MANUAL)


def test_a_report_naming_a_dbe_still_alarms() -> None:
    assert _cat("Last night we got an uncorrectable double bit error (DBE) on GPU 3 of node b7.\n") == "gpu-memory"
