"""Round 3zg (docs/evidence.md, "Round 3zg"): the producers' formats read from check set 3zg's misses, each with its
look-alikes."""

from __future__ import annotations

import pytest

from llm_oncall.evidence.classify import classify_text


def test_a_quoted_ggml_assertion_is_a_crash() -> None:
    text = ("When several agents send requests, the server goes down and reports "
            "`GGML_ASSERT(!(split && ne02 < ne12)) failed.`\n")
    f = classify_text(text, "report.md")
    assert (f.kind, f.category) == ("crash_reported", "other-failure")
    assert classify_text("    GGML_ASSERT(ne02 >= 0);\n", "ggml.c").kind != "crash_reported"


@pytest.mark.parametrize("line", [
    "peer access from 0x7f76d46da2c0 to 0x7f76b4713830: CUDA_ERROR_TOO_MANY_PEERS: peer mapping resources exhausted",
    "RuntimeError: Failed: CUDA error /sgl-workspace/DeepEP/csrc/deep_ep.cpp:200 'peer access is not supported "
    "between these two devices'",
])
def test_a_refused_peer_access_is_other_failure(line: str) -> None:
    f = classify_text(line + "\n", "train.log")
    assert (f.kind, f.category) == ("p2p_failure_reported", "other-failure")


def test_the_error_table_in_source_is_not() -> None:
    src = '    case cudaErrorPeerAccessUnsupported: return "peer access is not supported between these two devices";\n'
    assert classify_text(src, "errors.cc").kind != "p2p_failure_reported"


def test_an_amdgpu_shader_exception_is_a_process_fault() -> None:
    text = "".join(f"[22340.2204{n}] amdgpu: sq_intr: error, detail 0x00000000, type 1, sh 1, priv 1, wave_id {n}, "
                   "simd_id 0, wgp_id 0\n" for n in range(4))
    f = classify_text(text, "dmesg.txt")
    assert (f.kind, f.category) == ("amdgpu_page_fault", "other-failure")
    assert classify_text('\tdev_err(adev->dev, "sq_intr: error, type %d, sh %d\\n", type, sh);\n', "gfx.c").kind \
        != "amdgpu_page_fault"


def test_v0s_start_failure_wrapper_is_a_vllm_startup_error() -> None:
    wrapper = "RuntimeError: Engine process failed to start. See stack trace for the root cause.\n"
    f = classify_text("INFO 05-15 11:58:20 [api_server.py:1043] vLLM API server version 0.8.5\n" + wrapper, "vllm.log")
    assert (f.kind, f.category, f.lines) == ("vllm_startup_error", "other-failure", (2,))
    # a cause the catalogue names outranks the wrapper
    cause = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert classify_text(cause + wrapper, "vllm.log").kind != "vllm_startup_error"
