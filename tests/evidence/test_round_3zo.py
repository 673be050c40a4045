"""Round 3zo: the reader rule written before check set 3zo was read (docs/evidence.md, "The reader's 'same here',
written before check set 3zo": a reader of the thread who met the same malfunction reports it, from the common
wording of issue comments), and the producers' formats read from 3zo's misses after it was measured ("Check set 3zo,
and round 3zo")."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported
from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize("line", [
    "I have the same issue on torch 2.4.",
    "We are having the exact same problem with two H100s.",
    "I've had the same problem since 0.6.3",
    "Same issue here, with the 24.10 image.",
    "I had a similar crash yesterday.",
])
def test_a_reader_who_met_the_same_malfunction_reports_it(line: str) -> None:
    assert reported.line_reports(line) == "same_here"


@pytest.mark.parametrize("line", [
    "I have the same question.",
    "If I have the same issue, what should I do?",
    "Do you have the same problem on the 0.6 release?",
    "We could have the same issue on ROCm, so the guard is in both paths.",
    "I don't have the same problem on my machine.",
])
def test_the_same_words_without_a_malfunction_met_are_not(line: str) -> None:
    assert reported.line_reports(line) is None


@pytest.mark.parametrize(("text", "kind", "category"), [
    # a graph API call that failed, in tiny-cuda-nn's words, and torch_npu's graph as xLLM logs it
    ("  what():  include/tiny-cuda-nn/cuda_graph.h:124 cudaGraphExecUpdate(m_graph_instance, m_graph, &error_node, "
     "&update_result) failed with error the graph update was not performed because it included changes which "
     "violated constraints specific to instantiated graph update", "cuda_graph_capture_error", "cuda-graph"),
    ("E20260821 17:32:26.321024 84730 acl_graph_executor_impl.cpp:464] ACL graph capture_end during cleanup failed: "
     "capture_end:torch_npu/csrc/core/npu/NPUGraph.cpp:247", "cuda_graph_capture_error", "cuda-graph"),
    # ONNX Runtime refusing enable_cuda_graph
    ("onnxruntime.capi.onnxruntime_pybind11_state.Fail: [ONNXRuntimeError] : 1 : FAIL : This session cannot use the "
     "CUDA Graph feature as requested by the user as all the graph nodes have not been partitioned to the CUDA "
     "execution provider.", "cuda_graph_capture_error", "cuda-graph"),
    # a capture that recorded nothing
    ("/opt/venv/lib/python3.12/site-packages/torch/cuda/graphs.py:84: UserWarning: The CUDA Graph is empty. This "
     "usually means that the graph was attempted to be captured on wrong device or stream. (Triggered internally at "
     "/pytorch/aten/src/ATen/cuda/CUDAGraph.cpp:206.)", "cuda_graph_empty", "cuda-graph"),
    # a MIG instance that could not be created or read
    ("Unable to create a GPU instance on GPU  0 using profile 9: Insufficient Resources", "mig_instance_failed",
     "other-failure"),
    ('E1206 02:08:39.194961 1 nonblockinggrpcserver.go:127] "dra: handling request failed" err="error preparing '
     "devices for claim 1c2d: MIG device allocation failed: error creating MIG device: error creating GPU instance "
     "for '1g.10gb': Insufficient Resources\"", "mig_instance_failed", "other-failure"),
])
def test_the_producers_formats_of_round_3zo(text: str, kind: str, category: str) -> None:
    f = classify_text(text + "\n", "paste.txt")
    assert (f.kind, f.category) == (kind, category)


@pytest.mark.parametrize(("text", "kind"), [
    ("Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.40gb (ID  9)", "mig_instance_failed"),
    ("- **Status** must be `Success` (catches `Insufficient Resources`, etc.)", "mig_instance_failed"),
    ('    TORCH_WARN("The CUDA Graph is empty. This usually means that the graph was attempted to be captured on '
     'wrong device or stream.");', "cuda_graph_empty"),
    ("INFO acl_graph_executor_impl.cpp:431] after capture_begin (in capture): bucket=1", "cuda_graph_capture_error"),
])
def test_their_look_alikes_are_not(text: str, kind: str) -> None:
    assert classify_text(text + "\n", "paste.txt").kind != kind


def test_a_timeout_told_in_chinese_is_a_hang_cue() -> None:
    assert reported.cue_counts("模型训练到固定step的时候，NCCL超时")[0][0] == "hang"
