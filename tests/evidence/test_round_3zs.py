"""Round 3zs (docs/evidence.md, "Round 3zs"): written before check set 3zs was read. A CUDA driver, runtime or HIP
call that returned a named failure code is a CUDA failure of the process (`cuda-result-code`), whatever library
prints it; the codes that name a cause keep their own signatures, and the codes that are states or notices are none."""

from __future__ import annotations

import pytest

from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize("text", [
    # OpenMM (AlphaFold's relax step) loading a kernel built for a newer toolkit than the driver
    "  File \"/opt/conda/lib/python3.8/site-packages/simtk/openmm/openmm.py\", line 13223, in __init__\n"
    "    this = _openmm.new_Context(*args)\n"
    "Exception: Error loading CUDA module: CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)",
    # OpenMM's numbered form, after minutes of a run
    "Exception: Error downloading array posq: Error invoking cuMemcpyDtoH: CUDA error (700)",
    # cuda-samples' checkCudaErrors
    "CUDA error at cudaTensorCoreGemm.cu:455 code=209(cudaErrorNoKernelImageForDevice) \"cudaFuncSetAttribute(...)\"",
])
def test_a_call_that_returned_a_named_failure_code(text: str) -> None:
    f = classify_text(text + "\n", "paste.txt")
    assert (f.kind, f.category) == ("cuda_result_code", "other-failure")


def test_a_code_that_names_a_cause_keeps_its_signature() -> None:
    f = classify_text("failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error "
                      "encountered\n", "paste.txt")
    assert f.category == "gpu-memory"
    # a failed peer mapping is read by the peer-to-peer signature (TensorFlow's driver wrapper on ten GPUs)
    f = classify_text("E tensorflow/stream_executor/cuda/cuda_driver.cc:1002] failed to enable peer access from 0x5 to "
                      "0x9: CUDA_ERROR_TOO_MANY_PEERS: peer mapping resources exhausted\n", "paste.txt")
    assert (f.kind, f.category) == ("p2p_failure_reported", "other-failure")
    f = classify_text("RuntimeError: CUDA error at graph.cu:88 code=900(cudaErrorStreamCaptureUnsupported)\n",
                      "paste.txt")
    assert f.kind != "cuda_result_code"


@pytest.mark.parametrize("text", [
    # code that handles the codes
    "```cpp\nCUresult r = cuStreamQuery(s);\nif (r == CUDA_ERROR_NOT_READY) return false;\n"
    "switch (err) {\n    case cudaErrorInvalidValue:\n        break;\n}\n```",
    # an enum of the header
    "typedef enum cudaError_enum {\n  CUDA_SUCCESS = 0,\n  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,\n} CUresult;",
    # states and notices: a poll not done yet, an idempotent call
    "cuStreamQuery returned CUDA_ERROR_NOT_READY",
    "W external/xla/xla/stream_executor/cuda/cuda_driver.cc:1410] failed to enable peer access from 0 to 1: "
    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
    # a code named in a sentence that explains it
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION means that the PTX was compiled with a newer toolkit than the driver supports.",
])
def test_look_alikes_of_round_3zs(text: str) -> None:
    assert classify_text(text + "\n", "paste.txt").kind != "cuda_result_code"
