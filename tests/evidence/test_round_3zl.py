"""Round 3zl (docs/evidence.md, "Check set 3zl, and round 3zl"): read from check set 3zl's misses after it was
measured, each a producer's format or a report's wording with its look-alikes."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported
from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize(("text", "kind", "category"), [
    # a kernel fault placed at a captured graph's replay or launch is the graphs' fault
    ("The kernel runs cleanly in eager mode, completes CUDA-graph capture, and then hits an illegal memory access at "
     "graph replay.\n\nRuntimeError: CUDA error: an illegal memory access was encountered",
     "cuda_graph_fault", "cuda-graph"),
    ("TornadoBailoutRuntimeException: Bailout is disabled.\nReason: cuGraphLaunch failed. CUresult=700",
     "cuda_graph_fault", "cuda-graph"),
    # the CANN runtime's timeout codes are a task that never finished
    ("[rank0]:[W610 17:20:44.224261525 NPUStream.cpp:647] Warning: NPU warning, error code is 507034[Error]:",
     "npu_task_timeout", "hang"),
    ("EE1002: Stream synchronize timeout. rtDeviceSynchronize execute failed, reason=[stream sync timeout]",
     "npu_task_timeout", "hang"),
    ("       wait for compute device to finish failed, runtime result = 507054.[FUNC:ReportCallError]",
     "npu_memory_error", "gpu-memory"),
    # a device error that is neither stays the device's failure
    ("       wait for compute device to finish failed, runtime result = 507013.[FUNC:ReportCallError]",
     "npu_device_error", "other-failure"),
    # the engines' words for a model that did not load, and DeepEP's host assertion
    ('Jan 07 09:55:05 ERROR Failed to load model modelID="qwen3" error=failed to load model with internal loader: '
     'backend not found: llama-cpp', "model_load_failed", "other-failure"),
    ("RuntimeError: Failed: Assertion error /workspace/DeepEP/csrc/kernels/internode.cu:1713 'num_max_nvl_chunked_"
     "recv_tokens / num_rdma_ranks > 0'", "crash_reported", "other-failure"),
])
def test_the_producers_formats_of_round_3zl(text: str, kind: str, category: str) -> None:
    f = classify_text(text + "\n", "paste.txt")
    assert (f.kind, f.category) == (kind, category)


def test_a_fault_with_no_word_of_graph_replay_stays_a_kernel_fault() -> None:
    text = ("The replay buffer of the agent is full after 2 hours.\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert classify_text(text, "paste.txt").category == "other-failure"


@pytest.mark.parametrize("text", [
    "#define  ACL_ERROR_RT_STREAM_SYNC_TIMEOUT        507046 // stream sync time out",
    "Error code 507046 means the stream sync timed out; see the CANN error code table.",
    "#define  ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR    507054 // hbm Multi-bit ECC error",
    '        LLAMA_LOG_ERROR("%s: error loading model: %s\\n", __func__, err.what());',
    "This PR fixes the failed to load model error when the path has spaces.",
    "cuGraphLaunch(exec, stream) returned CUDA_SUCCESS",
])
def test_their_look_alikes_are_not(text: str) -> None:
    assert classify_text(text + "\n", "paste.txt").kind not in (
        "npu_task_timeout", "npu_memory_error", "model_load_failed", "cuda_graph_fault")


@pytest.mark.parametrize(("line", "pattern"), [
    ("This PR https://github.com/org/repo/pull/7947 causes gibberish output when running", "bad_output_named"),
    ("the finetuned model seems to be corrupted and repeates garbage output such as 'TETETETE'", "bad_output_named"),
    ("I converted the model to fp32 and noticed it is generating garbled text.", "bad_output_named"),
])
def test_a_bad_output_named_as_what_came_out_is_a_report(line: str, pattern: str) -> None:
    assert reported.line_reports(line) == pattern


@pytest.mark.parametrize("line", [
    "How do I avoid garbage output?",
    "This PR fixes the gibberish output on Vulkan.",
    "If the weights are corrupted you can get garbled text.",
])
def test_a_question_a_fix_or_a_condition_naming_it_is_not(line: str) -> None:
    assert reported.line_reports(line) is None
