"""The liveness sidecar over HTTP, watching pods served by `sim serve`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.testkit import free_port, wait_until
from typer.testing import CliRunner

from llm_oncall.cli import probe as cli_probe
from llm_oncall.probe.liveness import LivenessConfig
from llm_oncall.probe.server import LivenessSidecar, http_fetch, parse_duration, parse_listen
from llm_oncall.sim import Fleet, FleetConfig
from llm_oncall.sim.serve import SimServer

from .conftest import fault_fleet


@pytest.fixture
def sidecars() -> Iterator[Callable[..., LivenessSidecar]]:
    started: list[tuple[LivenessSidecar, Callable[[], None]]] = []

    def start(url: str, stall: float, interval: float, grace: float = 60.0) -> LivenessSidecar:
        fetch, close = http_fetch(url, timeout_s=max(0.5, interval))
        car = LivenessSidecar(fetch, LivenessConfig(stall, grace), interval, ("127.0.0.1", 0), target=url)
        started.append((car, close))
        return car.start()

    yield start
    for car, close in started:
        car.stop()
        close()


def livez(client: httpx.Client, car: LivenessSidecar) -> httpx.Response:
    return client.get(car.url + "/livez")


def test_engine_hang_turns_livez_503_within_stall_plus_one_interval(
        serve: Callable[..., SimServer], sidecars: Callable[..., LivenessSidecar]) -> None:
    stall, interval, onset, speed = 2.0, 0.25, 6.0, 4.0
    fleet = fault_fleet("engine-hang", seed=5, at=onset, pods=4, params={"group": "vllm-llama-8b-g1"})
    server = serve(fleet, speed=speed)
    groups = {g["labels"]["pod"]: g["labels"]["group"] for g in server.file_sd() if g["labels"]["kind"] == "vllm"}
    urls = server.pod_urls()
    hung = sidecars(urls[next(p for p, g in groups.items() if g == "vllm-llama-8b-g1")] + "/metrics",
                    stall, interval)
    fine = sidecars(urls[next(p for p, g in groups.items() if g == "vllm-llama-8b-g0")] + "/metrics",
                    stall, interval)
    frozen_at: list[float] = []

    def watch_freeze() -> None:  # wall time at which the simulated fault fires
        while not frozen_at and time.monotonic() - server._wall0 < 30:
            if server.virtual_now() >= onset:
                frozen_at.append(time.monotonic())
            time.sleep(0.005)

    th = threading.Thread(target=watch_freeze, daemon=True)
    th.start()
    failed_at: float | None = None
    with httpx.Client(timeout=5.0) as client:
        while time.monotonic() - server._wall0 < onset / speed + stall + 4.0:
            r, r_fine = livez(client, hung), livez(client, fine)
            assert r_fine.status_code == 200, r_fine.json()
            if r.status_code == 503:
                failed_at = time.monotonic()
                break
            # before traffic reaches the pod it is idle; either way it is 200 until the freeze
            assert r.json()["status"] in ("ok", "idle", "starting"), r.json()
            assert not frozen_at or time.monotonic() - frozen_at[0] < stall + interval + 1.0
            time.sleep(0.02)
        th.join(timeout=5)
        assert failed_at is not None and frozen_at
        body = r.json()
        assert body["status"] == "stalled" and body["running"] > 0
        assert body["stall_threshold_seconds"] == stall
        # decided at the first scrape slot at which the heartbeat had been flat for the stall time
        assert stall - 1e-6 <= body["seconds_since_progress"] <= stall + interval + 1e-6, body
        took = failed_at - frozen_at[0]
        # wall time: stall + one interval, plus slack for a shared 2-core machine running the
        # simulator, both sidecars and this loop in one process
        assert stall - 0.1 <= took <= stall + interval + 1.0, took
        page = client.get(hung.url + "/metrics").text
    fams = {f.name: f for f in text_string_to_metric_families(page)}
    status = {s.labels["status"]: s.value for s in fams["llm_oncall_probe_status"].samples}
    assert status["stalled"] == 1.0 and sum(status.values()) == 1.0
    assert fams["llm_oncall_probe_stall_seconds"].samples[0].value >= stall
    assert "llm_oncall_probe_scrape_errors" in fams


def test_saturated_healthy_fleet_is_never_stalled(
        serve: Callable[..., SimServer], sidecars: Callable[..., LivenessSidecar]) -> None:
    # far more traffic than two pods can serve: hundreds queued, engines still stepping
    fleet = Fleet(FleetConfig(pods=2, rate_per_pod=40.0), seed=2)
    server = serve(fleet, speed=4.0)
    cars = [sidecars(u + "/metrics", 1.0, 0.2) for u in server.pod_urls().values()]
    waiting_seen = 0.0
    with httpx.Client(timeout=5.0) as client:
        end = time.monotonic() + 4.0
        while time.monotonic() < end:
            for car in cars:
                r = livez(client, car)
                assert r.status_code == 200, r.json()
                assert r.json()["status"] in ("ok", "starting", "idle")
                waiting_seen = max(waiting_seen, r.json()["waiting"] or 0.0)
            time.sleep(0.05)
    assert waiting_seen > 10, "the fleet was meant to be saturated"


def test_unreachable_target_answers_503_only_after_grace(sidecars: Callable[..., LivenessSidecar]) -> None:
    port = free_port()
    car = sidecars(f"http://127.0.0.1:{port}/metrics", 1.0, 0.1, grace=1.0)
    with httpx.Client(timeout=5.0) as client:
        assert wait_until(lambda: car.tracker.scrapes > 0, timeout=2.0)
        r = livez(client, car)
        assert r.status_code == 200 and r.json()["status"] == "unreachable"
        assert wait_until(lambda: livez(client, car).status_code == 503, timeout=3.0)
        body = livez(client, car).json()
        assert body["status"] == "unreachable" and body["unreachable_seconds"] >= 1.0
        assert client.get(car.url + "/nope").status_code == 404


def test_cli_serve_reports_a_verdict(serve: Callable[..., SimServer]) -> None:
    fleet = fault_fleet("kv-capacity", seed=1, at=1000.0, pods=1)
    server = serve(fleet, speed=2.0)
    url = next(iter(server.pod_urls().values())) + "/metrics"
    result = CliRunner().invoke(cli_probe.app, ["serve", "--target", url, "--listen", "127.0.0.1:0",
                                                "--interval", "200ms", "--stall", "5s", "--duration", "1s",
                                                "--json"])
    assert result.exit_code == 0, result.output
    body = __import__("json").loads(result.stdout.strip().splitlines()[-1])
    assert body["status"] == "ok" and body["target"] == url and body["stall_threshold_seconds"] == 5.0


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
