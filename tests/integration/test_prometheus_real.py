"""A real Prometheus scraping local exporters: the Prometheus source and a direct scrape agree.

Three exporters speak vLLM 0.32 names: two serve the classic text format (colons kept, as
real vLLM does); one is prometheus_client's own `start_http_server`, which answers
Prometheus' OpenMetrics Accept header with underscore-escaped names (`vllm_…`) while a
direct scrape asking for text/plain still gets the colons.  A fourth target never answers.

The fleet runs on a timeline of its own, not on the wall clock: the test moves it one tick at a time, every
sample carries the tick's time as its exposition timestamp (Prometheus honours it), the direct scraper's clock
reads the same tick, and the next tick comes only once Prometheus has stored this one. Both sources therefore
hold exactly the same (time, value) points however late the scrapes, threads or Prometheus run, and the rates
are exact.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from tests.testkit import PageServer, free_port, run_prometheus, wait_for

from llm_oncall.signals.catalog import BY_KEY, SIGNALS
from llm_oncall.signals.prometheus import PrometheusError, PrometheusSource, promql
from llm_oncall.signals.scrape import ScrapeSource
from llm_oncall.signals.snapshot import PodSnapshot, Snapshot
from llm_oncall.signals.source import Target
from llm_oncall.signals.store import Store
from signals.pages import Engine

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("prometheus")]

TICKS = 10
"""Ticks of the fleet's timeline, one second apart: more than the window the Prometheus source reads."""
MAX_TICKS = 60
"""The timeline goes on while a failed scrape is inside that window (a safety net against an endless run)."""
SCRAPE_S = 2
"""Prometheus' scrape interval and timeout here: how fast the ticks go, not what they measure. Its own 1 s / 0.8 s
fail scrapes of these in-process exporters on a heavily loaded host, and each failure delays the run (below)."""
WINDOW_S = 6.0
TICK_S = 1.0


class Timeline:
    """The fleet's clock: whole seconds, moved only by the test (and the lock every exporter renders under)."""

    def __init__(self, start: float) -> None:
        self.now = start
        self.lock = threading.Lock()


class _Stamped(Collector):
    """An engine's families with every sample stamped with the timeline's time."""

    def __init__(self, engine: Engine, timeline: Timeline) -> None:
        self.engine = engine
        self.timeline = timeline

    def collect(self) -> Iterable[Metric]:
        with self.timeline.lock:  # one consistent tick: no half-applied increments, one timestamp
            ts = self.timeline.now
            metrics = list(self.engine.registry.collect())
        for m in metrics:  # fresh objects from each collect()
            m.samples = [s._replace(timestamp=ts) for s in m.samples]
        return metrics


def _stamped_registry(engine: Engine, timeline: Timeline) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Stamped(engine, timeline))
    return registry


@dataclass
class Pod:
    name: str
    engine: Engine
    port: int
    preempt: int
    finished: int
    fast: int
    slow: int

    def tick(self) -> None:
        """One tick's worth of work (the increments behind the expected per-second rates)."""
        self.engine.preempt(self.preempt).finish("stop", self.finished).tokens(40 * self.finished,
                                                                                20 * self.finished)
        self.engine.observe("ttft", 0.05, self.fast).observe("ttft", 0.7, self.slow).step(4)


@dataclass
class Fleet:
    pods: list[Pod]
    dead_port: int
    prometheus_url: str
    scrape_store: Store
    end: float
    """The last tick's time: every query of the tests is evaluated there."""


def _prometheus(tmp: Path, targets: dict[str, int]) -> Iterator[str]:
    static = "\n".join(f'      - targets: ["127.0.0.1:{p}"]\n        labels: {{pod: "{name}"}}'
                       for name, p in targets.items())
    yield from run_prometheus(tmp, "scrape_configs:\n  - job_name: vllm\n    honor_timestamps: true\n"
                                   f"    scrape_interval: {SCRAPE_S}s\n    scrape_timeout: {SCRAPE_S}s\n"
                                   f"    static_configs:\n{static}\n")


GENERATED = '{__name__=~"vllm:generation_tokens_total|vllm_generation_tokens_total",job="vllm"}'


def _stored(source: PrometheusSource, at: float) -> dict[str, tuple[float, float]]:
    """Per pod, the timestamp and value of the generated-token counter Prometheus holds at ``at``."""
    try:
        values = source.query(GENERATED, at=at)
        stamps = source.query(f"timestamp({GENERATED})", at=at)
    except PrometheusError:
        return {}
    ts = {r["metric"].get("pod", "?"): float(r["value"][1]) for r in stamps}
    return {r["metric"].get("pod", "?"): (ts.get(r["metric"].get("pod", "?"), math.nan), float(r["value"][1]))
            for r in values}


def _holds(source: PrometheusSource, at: float, expected: dict[str, tuple[float, float]]) -> bool:
    return _stored(source, at) == expected


UP_RANGE_S = WINDOW_S + 3 + 2 * SCRAPE_S
"""`up` samples that can decide a step of the window the Prometheus source reads."""


def _up_throughout(source: PrometheusSource, at: float, range_s: float) -> dict[str, float]:
    """The lowest `up` of each live exporter over the ``range_s`` before ``at``."""
    try:
        rows = source.query(f'min_over_time(up{{job="vllm",pod!="pod-dead"}}[{range_s:g}s])', at=at)
    except PrometheusError:
        return {}
    return {r["metric"].get("pod", "?"): float(r["value"][1]) for r in rows}


def _up(source: PrometheusSource) -> dict[str, float]:
    try:
        rows = source.query('up{job="vllm"}')
    except PrometheusError:
        return {}
    return {r["metric"].get("pod", "?"): float(r["value"][1]) for r in rows}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp = tmp_path_factory.mktemp("prometheus")
    engines = {
        "pod-a": (Engine("vllm-0.32", model="llama").set(running=5, waiting=2, kv=0.41), 1, 5, 9, 1),
        "pod-b": (Engine("vllm-0.32", model="llama").set(running=8, waiting=13, kv=0.93), 3, 4, 6, 4),
        "pod-c": (Engine("vllm-0.32", model="llama").set(running=2, waiting=0, kv=0.12), 0, 2, 18, 2),
    }
    # The timeline starts in the past so that no sample is stamped ahead of Prometheus' own clock.
    timeline = Timeline(float(math.floor(time.time())) - 2.0)
    closers: list[Callable[[], None]] = []
    pods: list[Pod] = []
    for name, (engine, preempt, finished, fast, slow) in engines.items():
        registry = _stamped_registry(engine, timeline)
        if name == "pod-c":
            server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
            port = server.server_address[1]

            def close(server: Any = server, thread: threading.Thread = thread) -> None:
                server.shutdown()
                server.server_close()
                thread.join(timeout=5)

            closers.append(close)
        else:
            exporter = PageServer(functools.partial(generate_latest, registry))
            port = exporter.port
            closers.append(exporter.close)
        pods.append(Pod(name, engine, port, preempt, finished, fast, slow))
    dead_port = free_port()
    prom = _prometheus(tmp, {**{p.name: p.port for p in pods}, "pod-dead": dead_port})
    try:
        url = next(prom)
        source = PrometheusSource(url)
        # Every target scraped once (up is stamped by Prometheus itself: the window must start after it).
        wait_for(lambda: _up(source) == {"pod-a": 1.0, "pod-b": 1.0, "pod-c": 1.0, "pod-dead": 0.0}, 120,
                 "Prometheus' first scrape of all four targets")
        with timeline.lock:
            timeline.now = float(math.floor(time.time())) - 1.0
        targets = [Target(p.name, f"http://127.0.0.1:{p.port}/metrics") for p in pods]
        targets.append(Target("pod-dead", f"http://127.0.0.1:{dead_port}/metrics"))
        scraper = ScrapeSource(targets, timeout_s=30.0, clock=lambda: timeline.now)
        store = Store(interval_s=TICK_S)
        for k in range(MAX_TICKS):
            if k:
                with timeline.lock:
                    timeline.now += TICK_S
                    for p in pods:
                        p.tick()
            store.add(scraper.collect())
            at = timeline.now
            expected = {p.name: (at, 20.0 * p.finished * k) for p in pods}
            wait_for(functools.partial(_holds, source, at, expected), 120,
                     f"Prometheus to store tick {k} (t={at:.0f}) of every exporter")
            # Prometheus stamps `up` with its own clock. A scrape of a live exporter that timed out (a busy host)
            # is `up == 0` for the steps the Prometheus source reads around it: the window then holds one page
            # less for that pod than the direct scrape has. Go on until no such failure is inside the window.
            if k + 1 >= TICKS and _up_throughout(source, at, UP_RANGE_S) == {p.name: 1.0 for p in pods}:
                break
        else:
            raise AssertionError(f"Prometheus failed a scrape of a live exporter within every {UP_RANGE_S:g}s "
                                 f"over {MAX_TICKS} ticks: {_up_throughout(source, at, 60)}")
        end = store.latest_time()
        assert end == timeline.now, (end, timeline.now)
        yield Fleet(pods, dead_port, url, store, end)
    finally:
        for close in closers:
            close()
        prom.close()  # runs the finalizer: Prometheus is terminated


def _prom_snapshot(fleet: Fleet) -> Snapshot:
    source = PrometheusSource(fleet.prometheus_url, 'job="vllm"', window_s=WINDOW_S + 3, step_s=1.0,
                              clock=lambda: fleet.end)
    store = Store(interval_s=1.0)
    store.add(source.collect())
    return store.snapshot(window_s=WINDOW_S)


def _pod(snap: Snapshot, name: str) -> PodSnapshot:
    pod = snap.pod(name)
    assert pod is not None, f"{name} missing from {[p.name for p in snap.pods]}"
    return pod


def test_prometheus_stored_escaped_names_for_the_negotiating_exporter(fleet: Fleet) -> None:
    source = PrometheusSource(fleet.prometheus_url)
    escaped = source.query('vllm_num_requests_running{job="vllm"}', at=fleet.end)
    colon = source.query('{__name__="vllm:num_requests_running",job="vllm"}', at=fleet.end)
    assert {r["metric"]["pod"] for r in escaped} == {"pod-c"}
    assert {r["metric"]["pod"] for r in colon} == {"pod-a", "pod-b"}


def test_prometheus_source_matches_direct_scrape(fleet: Fleet) -> None:
    direct = fleet.scrape_store.snapshot(window_s=WINDOW_S)
    via_prometheus = _prom_snapshot(fleet)
    for p in fleet.pods:
        a, b = _pod(direct, p.name), _pod(via_prometheus, p.name)
        assert a.up and b.up, p.name
        assert (a.running, a.waiting, a.kv_usage) == (b.running, b.waiting, b.kv_usage), p.name
        assert a.model_name == b.model_name == "llama"
        per_s = 1 / TICK_S
        for field, expected in (("preemptions_per_s", p.preempt * per_s), ("requests_per_s", p.finished * per_s),
                                ("generation_tokens_per_s", 20 * p.finished * per_s)):
            got_direct, got_prom = getattr(a, field), getattr(b, field)
            # the same points on the fleet's own timeline: exact in both sources
            assert got_direct == pytest.approx(expected, rel=1e-9), (p.name, field, "direct")
            assert got_prom == pytest.approx(expected, rel=1e-9), (p.name, field, "prometheus")
        assert a.ttft_p99 is not None and b.ttft_p99 is not None
        assert b.ttft_p99 == pytest.approx(a.ttft_p99, rel=1e-9), p.name
        assert a.restarts == b.restarts == 0
    assert direct.fleet.ttft_p99 == pytest.approx(via_prometheus.fleet.ttft_p99, rel=1e-9)
    assert direct.fleet.running == via_prometheus.fleet.running == 15
    assert direct.fleet.kv_usage_max == via_prometheus.fleet.kv_usage_max == 0.93


def test_dead_target_is_down_in_both_sources(fleet: Fleet) -> None:
    for snap in (fleet.scrape_store.snapshot(window_s=WINDOW_S), _prom_snapshot(fleet)):
        dead = _pod(snap, "pod-dead")
        assert not dead.up and dead.running is None and dead.preemptions_per_s is None
        assert (snap.fleet.pods_total, snap.fleet.pods_up) == (4, 3)


def test_every_catalog_promql_is_accepted_by_prometheus(fleet: Fleet) -> None:
    source = PrometheusSource(fleet.prometheus_url)
    for sig in SIGNALS:
        for selector in ("", 'job="vllm",pod=~"pod-.*"'):
            source.query(promql(sig, selector))  # raises PrometheusError unless status is success
    # evaluated at the last tick: the fleet's timeline, not the wall clock, holds the samples
    at = fleet.end
    running = {r["metric"]["pod"]: float(r["value"][1]) for r in source.query(promql(BY_KEY["running"]), at=at)}
    assert running == {"pod-a": 5.0, "pod-b": 8.0, "pod-c": 2.0}  # colon and escaped names alike
    rates = {r["metric"]["pod"]: float(r["value"][1])
             for r in source.query(promql(BY_KEY["preemptions"], window="5s"), at=at)}
    assert rates == pytest.approx({p.name: p.preempt / TICK_S for p in fleet.pods}, rel=1e-9)
    p99 = {r["metric"]["pod"]: float(r["value"][1])
           for r in source.query(promql(BY_KEY["ttft"], window="5s"), at=at)}
    assert set(p99) == {"pod-a", "pod-b", "pod-c"} and all(0.5 < v <= 0.75 for v in p99.values())
