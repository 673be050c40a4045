"""Round 3ze (docs/evidence.md, "Round 3ze"): what the failure-report reader reads, and the rules round 3ze added."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported
from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize("line", ["vllm exited with code 0", "the worker exited with status 0 after the run",
                                  "the job exits with exit code 0"])
def test_a_clean_exit_is_no_report(line: str) -> None:
    assert not reported.read(line + "\n").reports(1, False)


@pytest.mark.parametrize("line", ["vllm exited with code 1", "the server exited with exit code 137",
                                  "the engine exits with status 0x1 after the warm-up"])
def test_an_exit_with_another_code_is_a_report(line: str) -> None:
    assert reported.read(line + "\n").reports(1, False)


def test_a_clean_exit_stays_benign() -> None:
    assert classify_text("vllm exited with code 0\n", "ok").benign


# --- amdgpu: a GPU that stopped processing, and its reset ----------------------------------------------------------

AMDGPU_TIMEOUT = """\
[  308.334535] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=1255, emitted seq=1257
[  308.334876] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* Process information: process  pid 0 thread  pid 0
[  308.335146] amdgpu 0000:30:00.0: amdgpu: GPU reset begin!
[  308.545598] amdgpu 0000:30:00.0: amdgpu: GPU reset succeeded, trying to resume
[  308.545803] [drm] VRAM is lost due to GPU reset!
"""


def test_an_amdgpu_ring_timeout_and_reset_is_gpu_hardware() -> None:
    f = classify_text(AMDGPU_TIMEOUT, "dmesg.txt")
    assert (f.kind, f.category) == ("amdgpu_gpu_reset", "gpu-hardware") and 1 in f.lines
    mes = ("amdgpu 0000:03:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE\n"
           "amdgpu 0000:03:00.0: amdgpu: MES might be in unrecoverable state, issue a GPU reset\n")
    assert classify_text(mes, "dmesg.txt").kind == "amdgpu_gpu_reset"


def test_a_soft_recovered_ring_and_the_drivers_source_are_not() -> None:
    soft = "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, but soft recovered\n"
    assert classify_text(soft, "dmesg.txt").kind != "amdgpu_gpu_reset"
    src = '\tDRM_ERROR("ring %s timeout, signaled seq=%u, emitted seq=%u\\n",\n'
    assert classify_text(src, "amdgpu_job.c").kind != "amdgpu_gpu_reset"


# --- DeepSpeed-MII: the KV cache reset when no request can be scheduled -------------------------------------------

def test_mii_kv_deadlock_reset_is_kv_pressure() -> None:
    line = ("Deadlock detected. Resetting KV cache and recomputing requests. Consider limiting number of concurrent "
            "requests or decreasing max lengths of prompts/generations.\n")
    f = classify_text(line * 3, "mii.log")
    assert (f.kind, f.category) == ("kv_cache_blocks_exhausted", "kv-pressure")
    code = '            print(\n                "Deadlock detected. Resetting KV cache and recomputing requests."\n'
    assert classify_text(code, "ragged_batching.py").category != "kv-pressure"


# --- graphs: XLA's graph calls, and a fault the reporter avoids with the graphs off -------------------------------

def test_xla_graph_launch_failure_is_cuda_graph() -> None:
    line = "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to launch HIP graph: HIP_ERROR_InvalidValue\n"
    assert classify_text(line, "jax.log").category == "cuda-graph"
    assert classify_text('    throw std::runtime_error("Failed to launch CUDA graph");\n', "g.cc").category \
        != "cuda-graph"


FAULT = ("Weights load fine, the server reports ready, and the first request crashes:\n"
         "RuntimeError: CUDA error: an illegal memory access was encountered\n")


def test_a_fault_that_goes_away_with_graphs_off_is_cuda_graph() -> None:
    for workaround in ("**Workaround:** `--disable-cuda-graph` works correctly.\n",
                       "With --enforce-eager it works fine.\n"):
        f = classify_text(FAULT + workaround, "report.md")
        assert (f.kind, f.category) == ("cuda_graph_fault", "cuda-graph")


def test_a_fault_without_the_workaround_or_beside_a_cost_note_stays_a_kernel_fault() -> None:
    assert classify_text(FAULT, "report.md").kind == "cuda_illegal_memory_access"
    cost = FAULT + "--enforce-eager costs about a third of the throughput, so we keep graphs on.\n"
    assert classify_text(cost, "report.md").kind == "cuda_illegal_memory_access"


# --- a process that died on a signal or an assertion, as the producer prints it ---------------------------------

@pytest.mark.parametrize("line", [
    "Aborted (core dumped)",
    "fish: Job 1, './server -m \"/models/m.gguf\"' terminated by signal SIGABRT (Abort)",
    "error: Uncaught SIGSEGV (SEGV_MAPERR) at 0x328 on legion pid 249503 tid 249511",
    "GGML_ASSERT: llama.cpp:1064: addr == NULL && size == 0",
])
def test_a_process_killed_by_a_signal_is_other_failure(line: str) -> None:
    f = classify_text("llama server listening on 127.0.0.1:8080\n" + line + "\n", "server.log")
    assert (f.kind, f.category) == ("crash_reported", "other-failure") and f.lines == (2,)


def test_a_named_cause_outranks_the_signal_and_code_or_a_fix_is_quiet() -> None:
    text = "RuntimeError: CUDA error: an illegal memory access was encountered\nAborted (core dumped)\n"
    assert classify_text(text, "worker.log").kind == "cuda_illegal_memory_access"
    assert classify_text("This PR fixes a Segmentation fault (core dumped) on exit.\n", "pr.md").kind \
        != "crash_reported"
    define = ('#define GGML_ASSERT(x) do { if (!(x)) ggml_abort(__FILE__, __LINE__, "GGML_ASSERT(%s) failed", #x); }'
              ' while (0)\n')
    assert classify_text(define, "ggml.h").kind != "crash_reported"
