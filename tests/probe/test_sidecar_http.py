"""The liveness sidecar over HTTP, watching pods served by `sim serve`.

Nothing here is judged by when the test thread happened to run: each sidecar records every scrape its own loop
makes (the slot it stamped, the simulated time around the fetch, the verdict), and the bounds are checked on
that record. Waits are for conditions, with generous timeouts that only say what never happened.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.testkit import free_port, wait_for
from typer.testing import CliRunner

from llm_oncall.cli import probe as cli_probe
from llm_oncall.probe.liveness import LivenessConfig, Verdict
from llm_oncall.probe.server import LivenessSidecar, http_fetch, parse_listen
from llm_oncall.signals.duration import parse_duration
from llm_oncall.sim import Fleet, FleetConfig, faults, scenario
from llm_oncall.sim.serve import SimServer

from .conftest import fault_fleet

EPS = 1e-6  # slot times are sums of floats
# Only a safety net: a scrape of the in-process simulator can take far longer than the interval on a busy
# machine, and a scrape that timed out would read "unreachable" instead of the verdict under test.
SCRAPE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Seen:
    """One scrape of a recording sidecar."""

    slot: float
    """The time the sidecar's loop stamped on the scrape (its clock)."""
    world_before: float
    """The watched world's time (the simulator's virtual clock) before the fetch ..."""
    world_after: float
    """... and after it: the page shows the pod at a time in between."""
    verdict: Verdict


class Recording(LivenessSidecar):
    """The product's sidecar, recording every scrape its loop makes (the loop itself is unchanged)."""

    def __init__(self, *args: Any, world: Callable[[], float], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.world = world
        self.seen: list[Seen] = []

    def scrape_once(self, t: float | None = None) -> Verdict:
        before = self.world()
        verdict = super().scrape_once(t)
        self.seen.append(Seen(self.clock() if t is None else t, before, self.world(), verdict))
        return verdict

    def trace(self) -> str:
        return "\n".join(f"slot {s.slot:8.3f} world {s.world_before:7.2f}..{s.world_after:7.2f} "
                         f"{s.verdict.status:11s} running={s.verdict.running} waiting={s.verdict.waiting} "
                         f"flat={s.verdict.seconds_since_progress} value={s.verdict.progress_value}"
                         for s in list(self.seen))


@pytest.fixture
def sidecars() -> Iterator[Callable[..., Recording]]:
    started: list[tuple[Recording, Callable[[], None]]] = []

    def start(url: str, stall: float, interval: float, grace: float = 60.0,
              world: Callable[[], float] = lambda: 0.0,
              clock: Callable[[], float] = time.monotonic) -> Recording:
        fetch, close = http_fetch(url, timeout_s=SCRAPE_TIMEOUT_S)
        car = Recording(fetch, LivenessConfig(stall, grace), interval, ("127.0.0.1", 0), clock=clock, target=url,
                        world=world)
        started.append((car, close))
        car.start()
        return car

    yield start
    for car, close in started:
        car.stop()
        close()


def livez(client: httpx.Client, car: LivenessSidecar) -> httpx.Response:
    return client.get(car.url + "/livez")


def test_engine_hang_turns_livez_503_within_stall_plus_one_interval(
        serve: Callable[..., SimServer], sidecars: Callable[..., Recording]) -> None:
    stall, interval, speed = 2.0, 0.25, 4.0
    group = "vllm-llama-8b-g1"
    cfg, spec = scenario("engine-hang", 5, pods=4, params={"group": group})
    assert spec is not None
    fleet = Fleet(cfg, seed=5)  # the hang is injected below, once both sidecars have watched their pods step
    server = serve(fleet, speed=speed)
    groups = {g["labels"]["pod"]: g["labels"]["group"] for g in server.file_sd() if g["labels"]["kind"] == "vllm"}
    urls = server.pod_urls()
    hung = sidecars(urls[next(p for p, g in groups.items() if g == group)] + "/metrics",
                    stall, interval, world=server.virtual_now)
    fine = sidecars(urls[next(p for p, g in groups.items() if g == "vllm-llama-8b-g0")] + "/metrics",
                    stall, interval, world=server.virtual_now)
    wait_for(lambda: sum(x.verdict.status == "ok" for x in hung.seen) >= 3 and len(fine.seen) >= 3, 60,
             "three scrapes of each pod, the one to hang stepping with requests")
    with server.lock:
        onset = fleet.now
        faults.install(fleet, dataclasses.replace(spec, at=onset))  # fires at the clock's next advance
    with httpx.Client(timeout=SCRAPE_TIMEOUT_S) as client:
        def hung_fails() -> bool:
            r_fine = livez(client, fine)
            assert r_fine.status_code == 200, r_fine.json()
            return livez(client, hung).status_code == 503

        wait_for(hung_fails, 60, f"/livez of the pod frozen at t={onset:.2f}s (simulated) to answer 503")
        body = livez(client, hung).json()
        page = client.get(hung.url + "/metrics").text
    assert body["status"] == "stalled" and body["running"] > 0, body
    assert body["stall_threshold_seconds"] == stall and body["seconds_since_progress"] >= stall, body
    wait_for(lambda: any(not s.verdict.healthy for s in hung.seen), 30, "the stalled scrape in the sidecar's record")

    seen = list(hung.seen)
    trace = hung.trace()
    s = next(i for i, x in enumerate(seen) if not x.verdict.healthy)
    stalled = seen[s].verdict
    prev = next(x for x in reversed(seen[:s]) if x.verdict.status != "unreachable")  # a failed scrape judges nothing
    assert stalled.status == "stalled" and (stalled.running or 0) > 0, trace
    # While the pod stepped it was never stalled: every scrape whose page predates the freeze was healthy.
    before = [x for x in seen if x.world_after < onset]
    assert before and all(x.verdict.status in ("ok", "idle") for x in before), trace
    # The stall clock runs from the last scrape at which the heartbeat moved; at the latest that is the first
    # scrape whose fetch began after the freeze with requests present (every later page shows the same frozen
    # heartbeat, and a hung engine never finishes what it holds).
    k0 = next(i for i, x in enumerate(seen) if x.world_before > onset and x.verdict.status != "idle")
    assert stalled.seconds_since_progress is not None
    moved = seen[s].slot - stalled.seconds_since_progress
    assert moved <= seen[k0].slot + EPS, trace
    # Decided at the first scrape slot at which the heartbeat had been flat for the stall time ...
    assert stalled.seconds_since_progress >= stall - EPS, trace
    assert prev.verdict.healthy and prev.slot - moved < stall - EPS, trace
    # ... so within stall + one scrape slot of the first scrape that could see the freeze. The slot gap is the
    # interval unless the sidecar skipped slots behind a slow scrape (its loop keeps the cadence).
    gap = seen[s].slot - prev.slot
    slots = gap / interval
    assert round(slots) >= 1 and abs(slots - round(slots)) < 1e-3, trace
    assert seen[s].slot - seen[k0].slot <= stall + gap + EPS, trace
    # The healthy pod's sidecar was never anything but ok or idle, at every one of its scrapes.
    assert fine.seen and all(x.verdict.status in ("ok", "idle") for x in fine.seen), fine.trace()
    fams = {f.name: f for f in text_string_to_metric_families(page)}
    status = {s.labels["status"]: s.value for s in fams["llm_oncall_probe_status"].samples}
    assert status["stalled"] == 1.0 and sum(status.values()) == 1.0
    assert fams["llm_oncall_probe_stall_seconds"].samples[0].value >= stall
    assert "llm_oncall_probe_scrape_errors" in fams


def test_saturated_healthy_fleet_is_never_stalled(
        serve: Callable[..., SimServer], sidecars: Callable[..., Recording]) -> None:
    # far more traffic than two pods can serve: hundreds queued, engines still stepping
    stall, interval, scrapes = 1.0, 0.2, 20  # each sidecar judges at least four stall periods
    fleet = Fleet(FleetConfig(pods=2, rate_per_pod=40.0), seed=2)
    server = serve(fleet, speed=4.0)
    cars = [sidecars(u + "/metrics", stall, interval, world=server.virtual_now) for u in server.pod_urls().values()]

    def waiting_seen() -> float:
        return max((x.verdict.waiting or 0.0) for car in cars for x in list(car.seen)) if any(
            car.seen for car in cars) else 0.0

    with httpx.Client(timeout=SCRAPE_TIMEOUT_S) as client:
        def judged_enough() -> bool:
            for car in cars:
                r = livez(client, car)
                assert r.status_code == 200, r.json()
                assert r.json()["status"] in ("ok", "starting", "idle"), r.json()
            return all(len(car.seen) >= scrapes for car in cars) and waiting_seen() > 10

        wait_for(judged_enough, 120, f"{scrapes} scrapes per pod and a queue of more than 10 requests")
    for car in cars:
        assert all(x.verdict.status in ("ok", "idle") for x in car.seen), car.trace()


def test_unreachable_target_answers_503_only_after_grace(sidecars: Callable[..., Recording]) -> None:
    # The grace is measured on the sidecar's clock; this one moves only when the test moves it.
    now = [1000.0]
    car = sidecars(f"http://127.0.0.1:{free_port()}/metrics", 1.0, 0.1, grace=1.0, clock=lambda: now[0])
    with httpx.Client(timeout=SCRAPE_TIMEOUT_S) as client:
        wait_for(lambda: len(car.seen) > 0, 30, "the sidecar's first scrape of a port nothing listens on")
        r = livez(client, car)
        assert r.status_code == 200 and r.json()["status"] == "unreachable", r.json()
        now[0] += 0.99
        r = livez(client, car)
        assert r.status_code == 200 and r.json()["status"] == "unreachable", r.json()
        now[0] = 1001.0
        r = livez(client, car)
        assert r.status_code == 503, r.json()
        body = r.json()
        assert body["status"] == "unreachable" and body["unreachable_seconds"] >= 1.0
        assert client.get(car.url + "/nope").status_code == 404
    assert all(x.verdict.status == "unreachable" for x in car.seen)


def test_cli_serve_reports_a_verdict(serve: Callable[..., SimServer]) -> None:
    fleet = fault_fleet("kv-capacity", seed=1, at=1000.0, pods=1)
    server = serve(fleet, speed=2.0)
    # The pod has no request for its first simulated fraction of a second: start watching once it has work, so
    # every scrape of the run sees it stepping with requests present ("ok"), however late the scrapes come.
    wait_for(lambda: server.virtual_now() >= 1.0, 30, "the simulated pod's first second")
    url = next(iter(server.pod_urls().values())) + "/metrics"
    result = CliRunner().invoke(cli_probe.app, ["serve", "--target", url, "--listen", "127.0.0.1:0",
                                                "--interval", "200ms", "--stall", "5s", "--duration", "1s",
                                                "--timeout", "30s", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout.strip().splitlines()[-1])
    assert body["status"] == "ok" and body["target"] == url and body["stall_threshold_seconds"] == 5.0, body


def test_option_parsing() -> None:
    assert parse_duration("30s") == 30.0 and parse_duration("2m") == 120.0 and parse_duration("250ms") == 0.25
    assert parse_duration("7") == 7.0
    for bad in ("", "abc", "-1s", "nan"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    assert parse_listen("127.0.0.1:8081") == ("127.0.0.1", 8081)
    assert parse_listen(":9") == ("127.0.0.1", 9) and parse_listen("9") == ("127.0.0.1", 9)
    with pytest.raises(ValueError):
        parse_listen("host:port")
