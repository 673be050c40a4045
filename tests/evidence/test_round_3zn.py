"""Round 3zn (docs/evidence.md, "Check set 3zn, and round 3zn"): read from check set 3zn's misses after it was
measured, each a producer's format or a document's mark, with its look-alikes."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported
from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize(("text", "kind", "category"), [
    # nvidia-smi -q's GPU Reset Status: "Yes" means an unrecoverable error has occurred
    ("    GPU Reset Status\n        Reset Required                    : Yes\n"
     "        Drain and Reset Recommended       : No", "gpu_reset_required", "gpu-hardware"),
    ("    <gpu_reset_status>\n      <reset_required>No</reset_required>\n"
     "      <drain_and_reset_recommended>Yes</drain_and_reset_recommended>", "gpu_reset_required", "gpu-hardware"),
    # an operation refused while a graph is being captured (Habana's HPU graphs, PyTorch's CUDA generator)
    ("RuntimeError: collective nonSFG is not supported during hpu graph capturing", "cuda_graph_capture_error",
     "cuda-graph"),
    ("RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need this call to "
     "be captured, please file an issue.", "cuda_graph_capture_error", "cuda-graph"),
    # a kernel's hardware exception on ROCm, and DirectX's hung device (badly formed commands from the application)
    (":0:rocdevice.cpp:2984: 7040318052 us: Callback: Queue 0x7f0a1c000000 aborting with error : "
     "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016",
     "cuda_illegal_memory_access", "other-failure"),
    ("onnxruntime_genai.OrtException: Exception(3) tid(1c4) 887A0006 The GPU will not respond to more commands, most "
     "likely because of an invalid command passed by the calling application.", "cuda_illegal_memory_access",
     "other-failure"),
    # a shared library refused by the dynamic loader
    ("after starting launch_triton_server.py I encountered following issue:\n\nUNAVAILABLE: Not found: unable to load "
     "shared library: /opt/tritonserver/backends/tensorrtllm/libtriton_tensorrtllm.so: undefined symbol: "
     "_ZN12tensorrt_llm8executor8Response11getErrorMsgEv", "library_load_failed", "other-failure"),
    ("ImportError: /opt/venv/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: "
     "undefined symbol: _ZN3c104cuda9SetDeviceEi", "library_load_failed", "other-failure"),
    # a kernel fault the document places at graph capture
    ("Capturing several CUDA graphs over the hybrid stack still blows up.\n\n"
     "RuntimeError: Error in function 'runFmhaReduction' at fmhaReduction.cu:418: Failed to launch kernel: an illegal "
     "memory access was encountered", "cuda_graph_fault", "cuda-graph"),
])
def test_the_producers_formats_of_round_3zn(text: str, kind: str, category: str) -> None:
    f = classify_text(text + "\n", "paste.txt")
    assert (f.kind, f.category) == (kind, category)


@pytest.mark.parametrize(("text", "kind"), [
    ("        Reset Required                    : No\n        Drain and Reset Recommended       : N/A",
     "gpu_reset_required"),
    ("How do I check whether the GPU needs a reset?", "gpu_reset_required"),
    ("This PR fixes the undefined symbol error in _C.abi3.so: undefined symbol: foo when torch is upgraded.",
     "library_load_failed"),
    ("ld.lld: error: undefined reference to 'foo'", "library_load_failed"),
    # the capture bar beside a fault is not a capture the document blames
    ("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67\n"
     "RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_graph_fault"),
    ("Does the engine support capturing CUDA graphs on ROCm?", "cuda_graph_capture_error"),
])
def test_their_look_alikes_are_not(text: str, kind: str) -> None:
    assert classify_text(text + "\n", "paste.txt").kind != kind


FAQ = """FAQ

1. Context corruption in PD disaggregation

Error message

terminate called after throwing an instance of 'gloo::EnforceNotMet'
 what():  [enforce fail at gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 4 vs 3
Fatal Python error: Aborted

Cause

High-concurrency long sequences fill up the transfer buffer.

Solution

Disable overlap on the prefill node with --disable-overlap-schedule.
"""


def test_error_lines_quoted_in_an_faq_are_the_errors_it_explains() -> None:
    f = classify_text(FAQ, "faq.txt")
    assert f.benign and f.kind == "error_quoted_in_guide"


def test_the_same_lines_in_a_report_stay_a_failure_of_no_known_class() -> None:
    report = FAQ.replace("Cause\n", "I hit this on our cluster today.\n").replace("Solution\n", "")
    assert classify_text(report, "report.txt").kind == "unknown"


@pytest.mark.parametrize(("line", "cls"), [
    ("However, I encounter an issue where the responses are just random letters (see bottom).", "bad-output"),
    ("结果全是 感叹号", "bad-output"),
])
def test_the_reader_hears_these_bad_outputs(line: str, cls: str) -> None:
    assert reported.line_reports(line) is not None
    assert reported.cue_counts(line)[0][0] == cls


def test_a_question_about_random_words_is_not_a_report() -> None:
    assert reported.line_reports("How do I sample random words from the vocabulary?") is None


def test_the_pytorch_templates_bug_heading_is_a_report_heading() -> None:
    assert reported.line_reports("## 🐛 Bug") == "report_heading"
    assert reported.line_reports("## 🐛 Bug fixes in this release") is None


def test_a_page_titled_faq_explains_the_errors_it_quotes() -> None:
    page = ("FAQ\n1.CUDA out of memory\n- when starting the service: lower gpu_memory_utilization.\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    assert classify_text(page, "faq.txt").benign
    report = ("I read the FAQ and lowered gpu_memory_utilization, but the server still dies:\n"
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    assert classify_text(report, "report.txt").kind == "cuda_oom"


def test_an_error_message_line_in_a_report_is_no_faq_heading() -> None:
    report = ("I upgraded to 0.6.3 and the server dies at start-up.\nError message: RuntimeError: CUDA error: unknown "
              "error\nRoot cause\nThe driver was updated underneath the container.\n")
    assert not classify_text(report, "report.txt").benign
