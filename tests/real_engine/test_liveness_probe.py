"""The forward-progress probe on a real vLLM server: an idle server and an overloaded one stay 200, a frozen
worker turns /livez 503 within stall + one scrape of the last engine step /metrics showed, and resuming it turns
/livez 200 again."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from llm_oncall.probe.liveness import LivenessConfig
from llm_oncall.probe.server import LivenessSidecar, http_fetch

from .vllm_env import STEPS, VllmServer, start_load

pytestmark = pytest.mark.real_engine

STALL_S = 4.0
INTERVAL_S = 1.0
# The probe sees engine steps through the API server's /metrics, which records a step only when it has processed
# that step's outputs. If the API server falls behind the engine, the heartbeat on /metrics keeps moving after
# SIGSTOP while it drains what is already queued (measured here: 0.0 s, the heartbeat stops at once).
# The bound the probe owes is therefore counted from the last step /metrics showed; SCHED_S covers this test's
# own polling period and thread scheduling. DRAIN_CAP_S only proves the 503 comes in bounded wall time.
SCHED_S = 1.5
DRAIN_CAP_S = 60.0


def _livez(sidecar: LivenessSidecar) -> tuple[int, dict[str, Any]]:
    r = httpx.get(f"{sidecar.url}/livez", timeout=5)
    return r.status_code, r.json()


def test_livez_follows_forward_progress(vllm_server: VllmServer) -> None:
    vllm_server.wait_idle()
    fetch, close = http_fetch(vllm_server.metrics_url, 3.0)
    sidecar = LivenessSidecar(fetch, LivenessConfig(stall_s=STALL_S, unreachable_grace_s=30.0), INTERVAL_S,
                              ("127.0.0.1", 0), target=vllm_server.metrics_url)
    try:
        with sidecar:
            time.sleep(3 * INTERVAL_S)
            code, body = _livez(sidecar)
            assert (code, body["status"]) == (200, "idle"), body
            # Each request grows to ~29 of the 39 KV blocks: few run, the rest queue (and get preempted). A warm
            # server decodes the tiny model at up to ~3,600 tokens/s (12 such requests were done in 3 s), so 32 of
            # them keep a queue for longer than the probe needs to see it.
            load = start_load(vllm_server, requests=32, max_tokens=900)
            try:
                overloaded = 0
                seen: list[tuple[str, float | None, float | None]] = []
                for _ in range(20):
                    time.sleep(0.5)
                    code, body = _livez(sidecar)
                    assert code == 200, body  # saturated but stepping is never stalled
                    seen.append((body["status"], body["running"], body["waiting"]))
                    overloaded += body["status"] == "ok" and (body["waiting"] or 0) > 0
                    if overloaded >= 4:
                        break
                assert overloaded >= 4, (f"the server never showed a queue: {seen}; "
                                         f"{len(load.results)} requests done, errors {load.errors()[:2]}")
                vllm_server.freeze("worker")
                frozen_at = time.monotonic()
                steps, moved_at = vllm_server.scrape()[STEPS], frozen_at
                try:
                    while True:
                        code, body = _livez(sidecar)
                        now = time.monotonic()
                        if code == 503:
                            break
                        assert now - frozen_at <= DRAIN_CAP_S, (steps, moved_at - frozen_at, str(body))
                        latest = vllm_server.scrape()[STEPS]
                        if latest != steps:
                            steps, moved_at = latest, time.monotonic()
                        time.sleep(0.2)
                    print(f"\n[livez] 503 after {now - frozen_at:.1f}s from SIGSTOP, {now - moved_at:.1f}s from "
                          f"the last step on /metrics ({moved_at - frozen_at:.1f}s drain)")
                    assert body["status"] == "stalled" and body["running"] > 0, body
                    assert now - moved_at <= STALL_S + INTERVAL_S + SCHED_S, (now - moved_at, body)
                    # The probe's own accounting: stalled once the heartbeat has been flat for the stall time,
                    # counted in scrape slots.
                    assert STALL_S <= body["seconds_since_progress"] <= STALL_S + INTERVAL_S, body
                finally:
                    vllm_server.thaw()
                deadline = time.monotonic() + 2 * INTERVAL_S + SCHED_S
                while True:
                    code, body = _livez(sidecar)
                    if code == 200:
                        break
                    assert time.monotonic() < deadline, f"/livez did not recover after the worker resumed: {body}"
                    time.sleep(0.2)
            finally:
                load.join(180)
            assert not load.errors(), load.errors()
    finally:
        close()
