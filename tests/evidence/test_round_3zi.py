"""Round 3zi (docs/evidence.md, "Round 3zi"): two producers' formats, written before check set 3zi was read, each
with its look-alikes."""

from __future__ import annotations

import pytest

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
