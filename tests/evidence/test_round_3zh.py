"""Round 3zh (docs/evidence.md, "Round 3zh"): the producers' formats read from check set 3zh's misses, each with its
look-alikes."""

from __future__ import annotations

import pytest

from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize("line", [
    "Jan 14 20:59:26 host ollama[62986]: SIGABRT: abort",
    "Jan 14 20:59:26 host ollama[62986]: SIGSEGV: segmentation violation",
    "Processing Prompt [BATCH] (431 / 431 tokens)exception: access violation reading 0x0000000000000010",
    "llama-server[147820]: #2  0x0000752078d28aab in ggml_abort () from /build/bin/libggml-base.so.0",
])
def test_a_go_signal_report_a_windows_access_violation_or_an_abort_frame_is_a_crash(line: str) -> None:
    f = classify_text("server listening on 127.0.0.1:11434\n" + line + "\n", "journal.txt")
    assert (f.kind, f.category) == ("crash_reported", "other-failure")


def test_a_signal_named_in_docs_is_not_a_crash() -> None:
    for text in ("The runtime forwards SIGABRT to the child; see signal(7).\n",
                 "Handle SIGSEGV in the worker so that it exits cleanly.\n"):
        assert classify_text(text, "doc.md").kind != "crash_reported"


def test_a_cuda_graph_api_call_that_failed_is_cuda_graph() -> None:
    line = "RuntimeError: cudaGraphAddKernelNode(&node, graph_, NULL, 0, &params) failed: invalid argument\n"
    f = classify_text(line, "mlx.log")
    assert (f.kind, f.category) == ("cuda_graph_capture_error", "cuda-graph")
    code = "  CHECK_CUDA_ERROR(cudaGraphAddKernelNode(&node, graph_, NULL, 0, &params));\n"
    assert classify_text(code, "graph.cpp").category != "cuda-graph"
