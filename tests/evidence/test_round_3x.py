"""Focused tests for the rules round 3x added (docs/evidence.md, "Round 3x"), tuned on the check set 3w: two producers'
format strings and one more heading of a change document laid out as problem then fix.

and the current releases of vLLM (0.32.0, the real-engine tier's) and SGLang (0.5.23), read for the
lines a pod's log shows when the engine dies, hangs, runs out of KV cache or computes NaNs.

Producers:
- vLLM v1/engine/core_client.py: logger.warning_once("[shutdown] MPClient: engine core exited unexpectedly; starting
  cleanup"); v1/engine/async_llm.py: logger.exception("AsyncLLM output_handler failed."); v1/worker/utils.py:
  RuntimeError(f"NaNs detected in logits: {corrupted_requests}"); v1/metrics/loggers.py: "Corrupted: %d reqs"
- SGLang entrypoints/engine.py ("Rank {i} scheduler is dead", "… died during initialization"), utils/watchdog.py
  ("Subprocess {name} (pid={pid}) crashed with exit code {code}"), managers (f"DetokenizerManager hit an exception"),
  entrypoints/http_server.py ("Health check failed. Server couldn't get a response from detokenizer for last {n}
  seconds"), managers/schedule_batch.py ("Out of memory even after retracting all other requests in the decode
  batch"), model_executor/runner/prefill_cuda_graph_runner.py (f"Capture prefill CUDA graph failed: {e}")
- NVIDIA open-gpu-kernel-modules kern_fsp.c: NV_PRINTF(LEVEL_ERROR, "FSP command timed out\\n"), and "FSP boot cmds
  failed. RM cannot boot.", behind the driver's "NVRM: <function>: " prefix
- shark-ai shortfin base_attention_cache.py: CacheAllocationFailure, logged FATAL with the page counts

Lines are rendered from those formats with made-up values; texts are written for the tests. Each rule has a
look-alike. The signatures' own must-match / must-not-match examples run in test_signatures.py.
"""

from __future__ import annotations

from tests.evidence.rounds import category as _cat
from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence.classify import classify_text


def test_a_gpu_whose_firmware_does_not_answer_is_a_hardware_fault() -> None:
    dmesg = ("[    9.125785] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  550.127.05  Release Build\n"
             "[  195.083145] NVRM: kgspCheckGspRmCcCleanup_GH100: CC secret cleanup successful!\n"
             "[  267.045903] NVRM: kfspPollForResponse_IMPL: FSP command timed out\n"
             "[  267.045908] NVRM: kfspSendBootCommands_GH100: Sent following content to FSP:\n")
    f = classify_text(dmesg, "dmesg.txt")
    assert (f.kind, f.category, f.lines) == ("gpu_firmware_unresponsive", "gpu-hardware", (3,))
    assert _cat("NVRM: kfspSendBootCommands_GH100: FSP boot cmds failed. RM cannot boot.\n", "dmesg.txt") \
        == "gpu-hardware"


def test_the_driver_source_and_a_table_quoting_it_are_not() -> None:
    assert _quiet('        NV_PRINTF(LEVEL_ERROR, "FSP command timed out\\n");\n', "kern_fsp.c")
    assert _quiet("| COT send/response | `FSP command timed out` | timeout |\n")


def test_shortfin_page_pool_exhaustion_is_kv_pressure() -> None:
    log = ("[2025-07-28 15:21:47.180] [info] [service.py:88] Processing request of 4000 tokens\n"
           "[2025-07-28 15:21:47.187] [error] [base_attention_cache.py:182] FATAL CacheAllocationFailure: Failed to "
           "allocate 6 pages from `PagePool`.\n"
           "Required pages: 6, Available pages: 2, Total pages: 2\n")
    f = classify_text(log, "server.log")
    assert (f.kind, f.category) == ("kv_cache_pages_exhausted", "kv-pressure")
    assert 2 in f.lines


def test_the_exception_class_is_not_an_event() -> None:
    assert _quiet("class CacheAllocationFailure(Exception):\n    pass\n", "base_attention_cache.py")


_PR = """## Why

Serving a TP=8 model on the node failed at engine init:

```
RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
```

## What changed

The setup note gains the environment variable that avoids it.
"""


def test_a_fix_pr_quoting_its_startup_failure_under_why_is_quiet() -> None:
    assert _quiet(_PR, "pr.md")
    assert classify_text(_PR, "pr.md").kind == "error_named_in_prose"


def test_the_same_failure_in_a_report_still_alarms() -> None:
    report = _PR.replace("## What changed\n\nThe setup note gains the environment variable that avoids it.\n",
                         "How can I get past this?\n").replace("## Why\n\n", "")
    assert not _quiet(report, "issue.md")
    # the fence quotes the failure only under a problem heading: under any other it is an event
    assert not _quiet(_PR.replace("## Why", "## Notes"), "pr.md")


_API = "(APIServer pid=1) "


def test_vllm_032_engine_death_wordings_are_a_dead_engine() -> None:
    log = (_API + "INFO 11-30 09:12:40 [loggers.py:259] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg "
           "generation throughput: 12.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%\n"
           + _API + "WARNING 11-30 09:12:44 [core_client.py:817] [shutdown] MPClient: engine core exited "
           "unexpectedly; starting cleanup\n"
           + _API + "ERROR 11-30 09:12:44 [async_llm.py:906] AsyncLLM output_handler failed.\n")
    f = classify_text(log, "pod.log", stream=True)
    assert (f.kind, f.category) == ("engine_dead", "other-failure")
    assert f.lines == (2, 3)


def test_sglang_process_deaths_are_a_dead_engine() -> None:
    for line in ("[2025-06-02 10:00:01] Rank 0 scheduler is dead. Please check if there are relevant logs.",
                 "[2026-01-05 10:00:00] Subprocess detokenizer (pid=4121) crashed with exit code 1. Triggering "
                 "SIGQUIT for cleanup...",
                 "[2026-01-05 10:00:00] TokenizerManager hit an exception: Traceback (most recent call last):"):
        assert (classify_text(line + "\n", "pod.log", stream=True).kind) == "engine_dead", line


def test_sglang_health_check_without_tokens_is_a_hang() -> None:
    line = ("[2026-01-05 10:00:00] Health check failed. Server couldn't get a response from detokenizer for last 20 "
            "seconds. tic start time: 10:00:00. last_heartbeat time: 09:58:12\n")
    f = classify_text(line, "pod.log", stream=True)
    assert (f.kind, f.category, f.facts.get("seconds")) == ("health_check_no_progress", "hang", 20)


def test_sglang_abort_after_retracting_everything_is_kv_pressure() -> None:
    line = ("[2026-01-05 10:00:00 TP0] Abort request 8f3c: Out of memory even after retracting all other requests in "
            "the decode batch. Aborting the last request.\n")
    assert _cat(line, "pod.log") == "kv-pressure"


def test_sglang_prefill_graph_capture_failure_is_a_cuda_graph_crash() -> None:
    line = "Exception: Capture prefill CUDA graph failed: CUDA error: an illegal memory access was encountered\n"
    assert _cat(line, "pod.log") == "cuda-graph"


def test_nans_in_logits_are_bad_output_and_the_source_is_not() -> None:
    f = classify_text("RuntimeError: NaNs detected in logits: {'cmpl-3f2a': 4096}\n", "pod.log", stream=True)
    assert (f.kind, f.category, f.incident_hint) == ("nan_logits", "bad-output", "bad-model-rollout")
    assert _quiet('    raise RuntimeError(f"NaNs detected in logits: {corrupted_requests}")\n', "utils.py")


def _stats(corrupted: int) -> str:
    return "".join(
        f"INFO 11-30 09:12:{40 + 10 * i} [loggers.py:259] Engine 000: Avg prompt throughput: 120.0 tokens/s, Avg "
        f"generation throughput: 300.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 31.0%, "
        f"Prefix cache hit rate: 12.0%, Corrupted: {corrupted if i == 1 else 0} reqs\n" for i in range(3))


def test_a_stats_line_counting_corrupted_requests_is_bad_output() -> None:
    f = classify_text(_stats(3), "pod.log", stream=True)
    assert (f.kind, f.category, f.lines, f.facts["corrupted_reqs"]) == ("vllm_stats_corrupted", "bad-output", (2,), 3)
    healthy = classify_text(_stats(0), "pod.log", stream=True)
    assert (healthy.kind, healthy.benign) == ("vllm_stats", True)
