"""The forward-progress probe on a real vLLM server: an idle server and an overloaded one stay 200, a frozen
worker turns /livez 503 within stall + one scrape of the last engine step /metrics showed, and resuming it turns
/livez 200 again.

Every judgement is made on the scrapes the probe's own loop recorded (slot, start and end of each scrape, verdict),
never on when this test's thread happened to poll: on a busy 2-core host the test can run seconds late while the
probe is on time, and the other way round. Waits are for those events, bounded only by generous safety nets.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from tests.testkit import wait_for

from llm_oncall.probe.liveness import LivenessConfig, Verdict
from llm_oncall.probe.server import LivenessSidecar, http_fetch

from .test_incidents import Client, Load
from .vllm_env import VllmServer

pytestmark = pytest.mark.real_engine

STALL_S = 4.0
INTERVAL_S = 1.0
EPS = 1e-6  # slot times are sums of floats
# The probe sees engine steps through the API server's /metrics, which records a step only when it has processed
# that step's outputs. If the API server falls behind the engine, the heartbeat on /metrics keeps moving after
# SIGSTOP while it drains what is already queued (measured here: 0.0 s, the heartbeat stops at once).
# The bound the probe owes is therefore counted from the scrape that first showed the last step. Both ends of it
# are the probe's own scrapes; SCHED_S covers how late the probe's scrape thread and /metrics answer on a busy
# host. DRAIN_CAP_S only proves the 503 comes in bounded wall time.
SCHED_S = 1.5
DRAIN_CAP_S = 60.0
PROMPT = "the water is long and people find the way"


@dataclass(frozen=True)
class Seen:
    slot: float
    """The time the probe's loop stamped on the scrape."""
    started: float
    """Monotonic time the scrape began ..."""
    ended: float
    """... and when its verdict was in."""
    verdict: Verdict


class Recording(LivenessSidecar):
    """The product's sidecar, recording every scrape its loop makes (the loop itself is unchanged)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.seen: list[Seen] = []

    def scrape_once(self, t: float | None = None) -> Verdict:
        started = self.clock()
        verdict = super().scrape_once(t)
        self.seen.append(Seen(started if t is None else t, started, self.clock(), verdict))
        return verdict

    def trace(self, since: int = 0) -> str:
        seen = list(self.seen)
        t0 = seen[0].started if seen else 0.0
        return "\n".join(f"slot {s.slot - t0:7.2f} scrape {s.started - t0:7.2f}..{s.ended - t0:7.2f} "
                         f"{s.verdict.status:11s} running={s.verdict.running} waiting={s.verdict.waiting} "
                         f"flat={s.verdict.seconds_since_progress} steps={s.verdict.progress_value}"
                         for s in seen[since:])


def _livez(sidecar: LivenessSidecar) -> tuple[int, dict[str, Any]]:
    r = httpx.get(f"{sidecar.url}/livez", timeout=10)
    return r.status_code, r.json()


def test_livez_follows_forward_progress(vllm_server: VllmServer) -> None:
    vllm_server.wait_idle()
    fetch, close = http_fetch(vllm_server.metrics_url, 3.0)
    sidecar = Recording(fetch, LivenessConfig(stall_s=STALL_S, unreachable_grace_s=30.0), INTERVAL_S,
                        ("127.0.0.1", 0), target=vllm_server.metrics_url)
    try:
        with sidecar:
            wait_for(lambda: len(sidecar.seen) >= 3, 60, "three scrapes of the idle server")
            assert all(s.verdict.status == "idle" for s in sidecar.seen), sidecar.trace()
            code, body = _livez(sidecar)
            assert (code, body["status"]) == (200, "idle"), body
            # Each request grows to ~29 of the 39 KV blocks: few run, the rest queue (and get preempted). 32 clients
            # that resubmit until stopped keep that queue, and requests running at the freeze, however fast the
            # host decodes (a warm server did 12 such requests in 3 s: a fixed batch can drain between polls).
            loaded_from = len(sidecar.seen)
            load = Load(vllm_server, [Client(PROMPT, 900)] * 32, max_requests=100_000, timeout_s=300).start()
            try:
                def queue_seen() -> bool:
                    return sum(s.verdict.status == "ok" and (s.verdict.waiting or 0) > 0
                               for s in sidecar.seen[loaded_from:]) >= 2
                wait_for(queue_seen, 180, "two probe scrapes of the server stepping with a queue")
                # saturated but stepping is never stalled, at any scrape
                assert all(s.verdict.healthy for s in sidecar.seen), sidecar.trace(loaded_from)
                code, body = _livez(sidecar)
                assert code == 200, body

                frozen_from = len(sidecar.seen)
                vllm_server.freeze("worker")
                frozen_at = time.monotonic()
                try:
                    wait_for(lambda: any(not s.verdict.healthy for s in sidecar.seen[frozen_from:]), DRAIN_CAP_S,
                             "the probe to call the frozen worker stalled")
                    code, body = _livez(sidecar)
                    assert code == 503 and body["status"] == "stalled" and body["running"] > 0, body
                finally:
                    vllm_server.thaw()
                thawed_at = time.monotonic()
                seen = list(sidecar.seen)
                trace = sidecar.trace(loaded_from)
                s = next(i for i in range(frozen_from, len(seen)) if not seen[i].verdict.healthy)
                # the scrape before it that read a page (a failed scrape judges nothing)
                prev = next(x for x in reversed(seen[:s]) if x.verdict.status != "unreachable")
                stalled = seen[s].verdict
                assert stalled.status == "stalled" and (stalled.running or 0) > 0, trace
                assert stalled.seconds_since_progress is not None, trace
                # The probe's own accounting, in scrape slots: stalled at the first slot at which the heartbeat
                # had been flat for the stall time, counted from the scrape that first showed the last step.
                moved_slot = seen[s].slot - stalled.seconds_since_progress
                m = next(i for i, x in enumerate(seen) if abs(x.slot - moved_slot) < 1e-3)
                assert seen[m].verdict.progress_value == stalled.progress_value, trace
                assert stalled.seconds_since_progress >= STALL_S - EPS, trace
                assert prev.verdict.healthy and prev.slot - moved_slot < STALL_S - EPS, trace
                assert stalled.seconds_since_progress <= STALL_S + (seen[s].slot - prev.slot) + EPS, trace
                # The same bound in wall time, between the probe's own scrapes: the last step was on /metrics when
                # the scrape that first showed it ended, the 503 when the deciding scrape ended.
                took = seen[s].ended - seen[m].ended
                print(f"\n[livez] 503 {seen[s].ended - frozen_at:.1f}s after SIGSTOP, {took:.1f}s after the scrape "
                      f"that first showed the last step (which ended {seen[m].ended - frozen_at:.1f}s after "
                      f"SIGSTOP), flat {stalled.seconds_since_progress:.1f}s in slots")
                assert took <= STALL_S + INTERVAL_S + SCHED_S, (took, trace)

                # Resumed: 200 again at the first scrape that shows a step, and only then.
                wait_for(lambda: any(x.started >= thawed_at and x.verdict.healthy for x in sidecar.seen), 60,
                         "the probe to see the resumed worker step")
                after = [x for x in sidecar.seen if x.started >= thawed_at]
                first_ok = next(i for i, x in enumerate(after) if x.verdict.healthy)
                assert all(x.verdict.progress_value == stalled.progress_value for x in after[:first_ok]), trace
                assert after[first_ok].verdict.progress_value != stalled.progress_value, sidecar.trace(loaded_from)
                assert after[first_ok].verdict.status == "ok", sidecar.trace(loaded_from)
                print(f"[livez] 200 again at scrape {first_ok + 1} after the thaw, "
                      f"{after[first_ok].ended - thawed_at:.1f}s after SIGCONT")
                code, body = _livez(sidecar)
                assert code == 200, body
            finally:
                errors = list(load.errors)
                load.stop()
            assert not errors, errors[:3]
    finally:
        close()
