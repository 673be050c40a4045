"""Round 3zf (docs/evidence.md, "Round 3zf"): the producers' formats and the reader's wording read from check set
3zf's misses, each with its look-alikes."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported
from llm_oncall.evidence.classify import classify_text

KFD_HANG = """\
Oct 07 15:47:47 host kernel: amdgpu: qcm fence wait loop timeout expired
Oct 07 15:47:47 host kernel: amdgpu: The cp might be in an unrecoverable state due to an unsuccessful queues preemption
Oct 07 15:47:47 host kernel: amdgpu: Failed to evict process queues
Oct 07 15:47:47 host kernel: amdgpu 0000:03:00.0: amdgpu: GPU reset begin!
"""


def test_kfd_queue_preemption_failure_is_an_amdgpu_hang() -> None:
    f = classify_text(KFD_HANG, "journal.txt")
    assert (f.kind, f.category) == ("amdgpu_gpu_reset", "gpu-hardware") and 1 in f.lines


@pytest.mark.parametrize("line", [
    "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::939524096 (896)MB",
    "RuntimeError: FATAL ERROR :: MODULE:SYNHELPER workspace Allocation of size ::14493510400 failed!",
])
def test_a_gaudi_fatal_error_is_other_failure(line: str) -> None:
    f = classify_text("INFO loading the model on 8 HPUs\n" + line + "\n", "hpu.log")
    assert (f.kind, f.category) == ("accelerator_runtime_fatal", "other-failure")


def test_the_gaudi_loggers_source_is_not() -> None:
    src = '            "FATAL ERROR :: MODULE:",                                          \\\n'
    assert classify_text(src, "logger.h").kind != "accelerator_runtime_fatal"


def test_a_neuron_compile_failure_is_other_failure() -> None:
    line = ("2023-09-25 10:07:13.000980:  7133  ERROR ||NEURON_CC_WRAPPER||: Compilation failed for "
            "/tmp/neuroncc_compile_workdir/fc40/model.MODULE_5a71+eefbc487.neff after 0 retries.\n")
    f = classify_text(line, "neuron.log")
    assert (f.kind, f.category) == ("accelerator_compile_failed", "other-failure")
    assert classify_text("This PR fixes ||NEURON_CC_WRAPPER||: Compilation failed for cached graphs.\n",
                         "pr.md").kind != "accelerator_compile_failed"


@pytest.mark.parametrize("line", [
    "No matter what, the output is either non-sense, or an endless string of `@`s.",
    "The responses were complete gibberish after the upgrade.",
])
def test_an_output_described_as_bad_is_a_report(line: str) -> None:
    assert reported.read(line + "\n").reports(1, False)


@pytest.mark.parametrize("line", [
    "If the output is garbage, lower the temperature.",
    "the output is fine",
    "How do I tell whether the output is gibberish?",
])
def test_a_condition_or_a_healthy_output_is_no_report(line: str) -> None:
    assert not reported.read(line + "\n").reports(1, False)
