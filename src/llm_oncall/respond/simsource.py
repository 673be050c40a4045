"""The simulated fleet as a telemetry Source: the same pages, logs and events a real fleet exposes.

Each `collect()` advances the virtual clock by one scrape interval and scrapes every surface
through the same parser as live scraping.  Ground truth is not part of a Batch.  The one simulator source of
the product: drills drive it on the virtual clock, `serve` (source `sim`) a round at a time; with a `lock` (the
simulator's Kubernetes API mutates the same fleet from its own thread) a collect holds it.
"""

from __future__ import annotations

import contextlib
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_oncall.probe.golden import GoldenProber, probe_fleet, record_fleet
from llm_oncall.signals.events import Event
from llm_oncall.signals.source import Batch, Observation, Target, parse_for
from llm_oncall.sim import Fleet, FleetConfig, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster


class SimSource:
    def __init__(self, fleet: Fleet, interval_s: float = 15.0, keep_text: bool = False,
                 cluster_events: bool = True, golden_prober: bool = True, flap: float = 0.0,
                 lock: Any = None) -> None:
        """`cluster_events=False` hides the event feed, as through a Prometheus that only has
        kube-state-metrics: changes are then derived from its series.  `flap`: the share of the first
        target's scrapes that time out while its pod is healthy (a flaky network path or a slow exporter)."""
        self.fleet = fleet
        self.flap = flap
        self._flap_rng = random.Random(fleet.seed * 31 + 7)  # noqa: S311 - simulation, not cryptography
        self.cluster_events = cluster_events
        self.golden_prober = golden_prober
        # A golden-prompt prober next to the fleet, as an operator would run one: references are
        # recorded at the first scrape (the fleet is healthy then), answers checked every scrape.
        self._prober: GoldenProber | None = None
        self.interval_s = interval_s
        self.keep_text = keep_text
        self._events_seen = 0
        self.lock = lock

    def _observe(self, target: Target, text: str | None, t: float) -> Observation:
        if text is None:
            return Observation(target, t, None, "connection refused")
        return Observation(target, t, parse_for(target.kind, text), None, text if self.keep_text else None)

    def collect(self) -> Batch:
        with self.lock if self.lock is not None else contextlib.nullcontext():
            return self._collect()

    def _collect(self) -> Batch:
        fleet = self.fleet
        fleet.advance(fleet.now + self.interval_s)
        t = fleet.now
        batch = Batch()
        for i, (name, labels) in enumerate(fleet.targets().items()):
            target = Target(name, None, "vllm", labels)
            if i == 0 and self.flap and self._flap_rng.random() < self.flap:
                batch.observations.append(Observation(target, t, None, "context deadline exceeded"))
                continue
            batch.observations.append(self._observe(target, fleet.render_metrics(name), t))
            lines = fleet.new_log_lines(name)
            if lines:
                batch.logs[f"{name}/logs.txt"] = lines
        for node in fleet.nodes():
            target = Target(node, None, "dcgm", {"node": node})
            batch.observations.append(self._observe(target, fleet.render_dcgm(node), t))
            kernel = fleet.new_kernel_log_lines(node)
            if kernel:
                batch.logs[f"{node}/kern.log"] = kernel
        batch.observations.append(self._observe(Target("gateway", None, "gateway"), fleet.render_gateway(), t))
        if self.golden_prober:
            if self._prober is None:
                self._prober = GoldenProber(record_fleet(fleet))
            batch.observations.append(self._observe(Target("golden-prober", None, "prober"),
                                                    probe_fleet(fleet, self._prober), t))
        batch.observations.append(self._observe(Target("kube-state-metrics", None, "kube"),
                                                fleet.render_kube_state(), t))
        if self.cluster_events:
            # Only the events recorded since the last scrape: the fleet's log is not copied every scrape.
            for e in fleet.events_since(self._events_seen):
                try:
                    batch.events.append(Event.from_json(e))
                except ValueError as exc:
                    batch.problems.append(str(exc))
            self._events_seen = fleet.events_recorded
        return batch


@dataclass
class ServedSim:
    """A simulated fleet served as a real one is: its telemetry through a SimSource, its Kubernetes API over HTTP
    (a kubeconfig the actions use through lightkube), its clock the fleet's own."""

    source: SimSource
    fleet: Fleet
    kubeconfig: Path
    closers: list[Callable[[], None]] = field(default_factory=list)

    def clock(self) -> float:
        return self.fleet.cfg.epoch + self.fleet.now

    def close(self) -> None:
        for c in reversed(self.closers):
            c()
        self.closers.clear()


def serve_sim(seed: int, step_s: float, fault: str | None = None, pods: int | None = None, at: float | None = None,
              rate_per_pod: float | None = None) -> ServedSim:
    """Start a simulated fleet (healthy, or with `fault` from its seeded scenario) and its Kubernetes API."""
    if fault is None:
        fleet = Fleet(FleetConfig(pods=pods or 4, rate_per_pod=rate_per_pod or 8.0, dcgm_custom_csv=True), seed=seed)
    else:
        over: dict[str, Any] = {} if pods is None else {"pods": pods}
        if at is not None:
            over["at"] = at
        if rate_per_pod is not None:
            over["rate_per_pod"] = rate_per_pod
        fc, spec = scenario(fault, seed, **over)
        fleet = Fleet(fc, seed=seed, fault=spec)
    cluster = KubeCluster(fleet)
    server = KubeApiServer(cluster).start()
    tmp = tempfile.TemporaryDirectory(prefix="llm-oncall-serve-")
    kubeconfig = server.write_kubeconfig(Path(tmp.name) / "kubeconfig")
    return ServedSim(SimSource(fleet, step_s, lock=cluster.lock), fleet, kubeconfig, [tmp.cleanup, server.stop])
