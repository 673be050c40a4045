"""Round 3zi (docs/evidence.md, "Round 3zi"): two producers' formats, written before check set 3zi was read, each
with its look-alikes."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported
from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize("line", [
    "RuntimeError: Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run. "
    "Stack trace: File \"bug.py\", line 7, in my_model",
    "RuntimeError: Detected 6 tensor(s) in the cudagraph pool not tracked as outputs. All live allocations must be "
    "tracked for correctness.",
    "RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA graph capture",
])
def test_an_exception_that_names_cuda_graphs_is_cuda_graph(line: str) -> None:
    text = "Traceback (most recent call last):\n  File \"run.py\", line 3, in <module>\n" + line + "\n"
    f = classify_text(text, "trace.txt")
    assert (f.kind, f.category) == ("cuda_graph_error", "cuda-graph")


def test_out_of_memory_and_code_comments_that_name_cuda_graphs_are_not() -> None:
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 42.00 MiB. GPU 0 has a total capacity of "
           "23.49 GiB of which 55.38 MiB is free. Of the allocated memory 22.00 MiB allocated in private pools "
           "(e.g., CUDA Graphs).\n")
    assert classify_text(oom, "oom.txt").kind == "cuda_oom"
    comment = ("# a buffer first allocated in a warm-up run trips \"tensor(s) in the cudagraph pool not tracked as "
               "outputs\"; a per-call temporary is capture-safe\n")
    assert classify_text(comment, "ops.py").category != "cuda-graph"


def _waits(n: int) -> str:
    return "".join(f"DEBUG 07-27 10:{13 + i // 6:02d}:{(i % 6) * 10:02d} [utils.py:741] Waiting for 1 local, 0 remote "
                   "core engine proc(s) to start.\n" for i in range(n))


def test_a_minute_of_engine_start_waits_is_a_start_up_hang() -> None:
    f = classify_text(_waits(8), "vllm.log")
    assert (f.kind, f.category, f.incident_hint) == ("engine_start_wait", "hang", "engine-hang")
    old = "".join(f"DEBUG 05-16 13:12:{i:02d} [core_client.py:425] Waiting for 1 core engine proc(s) to start: {{0}}\n"
                  for i in range(6))
    assert classify_text(old, "vllm.log").kind == "engine_start_wait"


def test_a_few_waits_or_waits_before_the_start_are_no_hang() -> None:
    assert classify_text(_waits(3), "vllm.log").kind != "engine_start_wait"
    started = _waits(8) + "INFO:     Application startup complete.\n"
    assert classify_text(started, "vllm.log").kind != "engine_start_wait"


# Read from check set 3zi's misses after it was measured (docs/evidence.md, "Check set 3zi, and round 3zi").

def test_the_cuda_check_idioms_out_of_memory_is_an_oom() -> None:
    line = r"CUDA error 2 at C:\Temp\llama-cpp-python\vendor\llama.cpp\ggml-cuda.cu:1752: out of memory"
    f = classify_text(line + "\n", "crash.txt")
    assert (f.kind, f.category) == ("cuda_oom", "other-failure")
    other = "CUDA error 700 at kernel.cu:88: an illegal memory access was encountered\n"
    assert classify_text(other, "crash.txt").kind != "cuda_oom"


def test_llamacpp_refusing_a_request_its_slot_cannot_hold_is_kv_pressure() -> None:
    log = ("slot update_slots: id  0 | task 2017 | new prompt, n_ctx_slot = 2048, n_keep = 0, n_prompt_tokens = 2059\n"
           "srv    send_error: task id = 2017, error: the request exceeds the available context size. try increasing "
           "the context size or enable context shift\n")
    f = classify_text(log, "server.log")
    assert (f.kind, f.category, f.lines) == ("kv_context_exceeded", "kv-pressure", (2,))
    # the error body shown as an example in a change document, and the message in source, are no event
    example = ('Added a new error type `exceed_context_size_error`\n\n```json\n{"error": {"code": 500,\n'
               '    "message": "the request exceeds the available context size. try increasing the context size or '
               'enable context shift",\n    "type": "exceed_context_size_error"}}\n```\n')
    assert classify_text(example, "pr.md").category != "kv-pressure"
    code = ('            send_error(slot, "the request exceeds the available context size, try increasing it", '
            "ERROR_TYPE_EXCEED_CONTEXT_SIZE);\n")
    assert classify_text(code, "server.cpp").category != "kv-pressure"


def test_the_kv_cache_too_small_message_retyped_in_lower_case() -> None:
    text = "I ran train.sh on four 3090s and received the error no available memory for the cache blocks.\n"
    assert classify_text(text, "issue.md").kind == "kv_cache_too_small"


@pytest.mark.parametrize(("line", "kind"), [
    ("(Worker_TP2 pid=255) ERROR 07-28 04:23:42 [multiproc_executor.py:962] EZ9999[PID: 255] 2026-07-28-04:23:42 "
     "(EZ9999):  The error from device(2), serial number is 3, there is an error of aicore, core id is 0",
     "npu_device_error"),
    ("RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64", "hccl_error"),
    ("[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:3) ERR02200 DIST call hccl api failed.", "hccl_error"),
])
def test_ascends_device_errors_and_hccl_failures_are_failures(line: str, kind: str) -> None:
    f = classify_text(line + "\n", "npu.log")
    assert (f.kind, f.category) == (kind, "other-failure")
    code = "    HCCL_CHECK_ERROR(HcclCommInitRootInfo(size, &id, rank, &comm));\n"
    assert classify_text(code, "pg.cpp").kind != "hccl_error"


@pytest.mark.parametrize("sentence", [
    "It runs normal for three hours and then hanged.",
    "`jax.distributed.initialize()` hangs and eventually times out on TPU v6e-16 multislice.",
])
def test_a_hang_told_with_hanged_or_a_code_span_subject(sentence: str) -> None:
    """The failure-report reader hears both (its lexicon, catalog/failure_report.yaml), and its class cues name a
    hang; a condition about a code span is still no report."""
    assert reported.line_reports(sentence) == "event_verb"
    rep = reported.read(sentence + "\n")
    assert reported.cue_class(sentence + "\n", rep, ("gpu-hardware", "hang")) == "hang"
    assert reported.line_reports("If `foo()` hangs, restart the worker.") is None
