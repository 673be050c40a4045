"""Round 3zp (docs/evidence.md, "Check set 3zp, and round 3zp"): read from check set 3zp's misses after it was
measured, each a producer's format with its look-alikes."""

from __future__ import annotations

import pytest

from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize(("text", "kind", "category"), [
    # Intel's kernel drivers on a GPU that stopped processing
    ("Jun 02 22:39:31 host kernel: i915 0000:00:02.0: [drm] GPU HANG: ecode 12:1:85dffffb, in python3 [4411]",
     "intel_gpu_reset", "gpu-hardware"),
    ("kernel: i915 0000:00:02.0: [drm] *ERROR* GT0: GUC: Engine reset failed on 0:0 (rcs0) because 0x00000000",
     "intel_gpu_reset", "gpu-hardware"),
    ("xe 0000:03:00.0: [drm] GT0: Engine reset: engine_class=ccs, logical_mask: 0x1, guc_id=2",
     "intel_gpu_reset", "gpu-hardware"),
    # a Gaudi card whose embedded CPU does not answer at init
    ("[   73.023132] habanalabs hl6: Failed to communicate with Device CPU (CPU-CP timeout)\n"
     "[   73.023276] habanalabs 0000:34:00.0: Failed to initialize hl6. Device is NOT usable !",
     "gaudi_device_unusable", "gpu-hardware"),
    # Ollama's newer runner is llama-server
    ('time=2026-06-03T17:01:30.085-07:00 level=INFO source=sched.go:641 msg="Load failed" model=gemma4 '
     'error="llama-server process has terminated: exit status 0xc0000094"', "ollama_runner_terminated",
     "other-failure"),
    # the kubelet's own admission check for an extended resource
    ("NAME                             READY   STATUS                RESTARTS   AGE\n"
     "riva-api-768b77d764-74k4m        0/2     OutOfnvidia.com/gpu   0          5m55s", "pod_admission_failed",
     "other-failure"),
])
def test_the_producers_formats_of_round_3zp(text: str, kind: str, category: str) -> None:
    f = classify_text(text + "\n", "paste.txt")
    assert (f.kind, f.category) == (kind, category)


@pytest.mark.parametrize(("text", "kind"), [
    ("i915 0000:00:02.0: [drm] GuC firmware i915/tgl_guc_70.bin version 70.20.0", "intel_gpu_reset"),
    ("We previously reported ccs engine resets on this node; this PR adds the devcoredump to the bug template.",
     "intel_gpu_reset"),
    ("[   70.120001] habanalabs hl2: Successfully added device 0000:1a:00.0 to habanalabs driver",
     "gaudi_device_unusable"),
    ("java.lang.OutOfMemoryError: Java heap space", "pod_admission_failed"),
    ("riva-api-768b77d764-74k4m        2/2     Running               0          5m55s", "pod_admission_failed"),
])
def test_their_look_alikes_are_not(text: str, kind: str) -> None:
    assert classify_text(text + "\n", "paste.txt").kind != kind
