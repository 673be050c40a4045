"""Round 3zm (docs/evidence.md, "Check set 3zm, and round 3zm"): read from check set 3zm's misses after it was
measured, each a producer's format with its look-alikes. Threads read for the fabric manager's wordings besides the
set's own: NVIDIA/nvtrust#55, siderolabs/pkgs#720, NVIDIA/gpu-driver-container#735, akash-network/website PR #632."""

from __future__ import annotations

import pytest

from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize(("text", "kind", "category"), [
    # the fabric manager's own version check stops it, with or without the journal's prefix
    ("nv-fabricmanager[3228]: fabric manager NVIDIA GPU driver interface version 530.30.02 don't match with driver "
     "version 530.41.03. Please update with matching NVIDIA driver package.", "fabric_manager_error", "nvlink"),
    ("fabric manager NVIDIA GPU driver interface version 590.48.01 doesn't match with driver version 580.126.09.",
     "fabric_manager_error", "nvlink"),
    # a person's account, contracted
    ("Yep, it wasn't initialized, and as the other thread mentioned Fabric Manager wasn't running.",
     "fabric_manager_failed_reported", "nvlink"),
    # llama-box holding requests back for lack of KV space, line after line
    ("[2025-08-14 09:08:17.697176] D srv                 reconcile: rid 1271168364437 | batching, waiting previous "
     "batch finished: not enough space to place all tokens\n" * 3, "kv_cache_full", "kv-pressure"),
])
def test_the_producers_formats_of_round_3zm(text: str, kind: str, category: str) -> None:
    f = classify_text(text + "\n", "paste.txt")
    assert (f.kind, f.category) == (kind, category)


@pytest.mark.parametrize("text", [
    "Mar 11 08:02:15 node-3 nv-fabricmanager[4766]: Successfully configured all the available NVSwitches to route "
    "GPU NVLink traffic.",
    "If the fabric manager isn't running, CUDA fails with error 802.",
    # one held-back batch is the scheduler at work, not a queue for KV space
    "[2025-08-14 09:08:17.697176] D srv                 reconcile: rid 1271168364437 | batching, waiting previous "
    "batch finished: not enough space to place all tokens",
])
def test_their_look_alikes_are_not(text: str) -> None:
    assert classify_text(text + "\n", "paste.txt").kind not in (
        "fabric_manager_error", "fabric_manager_failed_reported", "kv_cache_full")
