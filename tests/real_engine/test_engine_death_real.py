"""Real vLLM 0.32, read by the evidence classifier as a pod's log is read (``stream=True``): the lines round 3x took
from the current release's source, checked on the server that prints them (docs/evidence.md, "Round 3x").

One server with ``VLLM_COMPUTE_NANS_IN_LOGITS=1``: under load its periodic stats line carries ``Corrupted: 0 reqs``
(healthy: the new key must not turn a healthy line into an alarm). Then its engine core is killed (SIGKILL): the API
server's log says the engine core is gone (``[shutdown] MPClient: engine core exited unexpectedly`` in 0.32, or the
``EngineDeadError`` of a request in flight), and the log reads as a dead engine, not as a hang and not as healthy.
Every wait is for an event in the log, with a timeout only as a safety net.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from llm_oncall.evidence.classify import classify_all, classify_text

from .test_incidents import Client, running_load
from .vllm_env import VllmServer

pytestmark = pytest.mark.real_engine

PROMPT = " ".join(["the water is long and people find the way"] * 3)


def _log(server: VllmServer) -> str:
    return server.log_path.read_text(encoding="utf-8", errors="replace")


def _wait_in_log(server: VllmServer, needles: tuple[str, ...], timeout_s: float, what: str) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        text = _log(server)
        if any(n in text for n in needles):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; log tail:\n{text[-3000:]}")
        time.sleep(0.5)


def test_nan_counting_stats_stay_healthy_and_a_killed_engine_core_is_a_dead_engine(
        start_vllm_server: Callable[..., VllmServer]) -> None:
    server = start_vllm_server(env={"VLLM_COMPUTE_NANS_IN_LOGITS": "1"})
    clients = [Client(PROMPT, n) for n in (200, 170, 140)]
    with running_load(server, clients, max_requests=10_000, timeout_s=300):
        text = _wait_in_log(server, ("Corrupted: ",), 180, "a stats line with the corrupted-request count")
    stats = [f for f in classify_all(text, "pod.log", stream=True) if f.parser == "stats"]
    assert stats and stats[0].kind == "vllm_stats" and stats[0].benign, stats
    assert stats[0].facts["last_stats"]["corrupted"] == 0
    assert classify_text(text, "pod.log", stream=True).benign

    engine = server.engine_core_pid()
    os.kill(engine, signal.SIGKILL)
    # the liveness monitor notices within its poll; a request would also fail with EngineDeadError
    text = _wait_in_log(server, ("exited unexpectedly", "EngineDeadError", "died unexpectedly"), 120,
                        "the API server noticing the dead engine core")
    time.sleep(1.0)  # the lines that follow the first one (the shutdown) belong to the same event
    lines = _log(server).splitlines()
    f = classify_text("\n".join(lines) + "\n", "pod.log", stream=True)
    assert (f.kind, f.category, f.benign) == ("engine_dead", "other-failure", False), (f.kind, f.facts)
    said = [lines[n - 1] for n in f.lines]
    print(f"\n[engine death] {f.kind} lines {f.lines}: {[s[-100:] for s in said[:3]]}")
    # 0.32's own words for it are among the evidence whenever the liveness monitor printed them
    if "exited unexpectedly" in "\n".join(lines):
        assert any("engine core exited unexpectedly" in s for s in said), said
