"""The watch loop's telemetry sources: the simulator (with its own Kubernetes API), Prometheus, fixed targets
and a file_sd list re-read every round.  `Feed.rounds()` hands the autopilot what is new since the last round."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_oncall.probe.golden import GoldenProber, probe_fleet, record_fleet
from llm_oncall.service.config import ServiceConfig
from llm_oncall.signals.events import Event
from llm_oncall.signals.prometheus import PrometheusSource
from llm_oncall.signals.scrape import ScrapeSource
from llm_oncall.signals.source import Batch, Observation, Source, Target, parse_for
from llm_oncall.signals.targets import parse_target, read_file_sd


class ServiceSimSource:
    """The simulated fleet advanced by `step_s` virtual seconds per round (same surfaces as drills' SimSource)."""

    def __init__(self, fleet: Any, step_s: float, lock: Any) -> None:
        self.fleet = fleet
        self.step_s = step_s
        self.lock = lock
        self._prober: GoldenProber | None = None
        self._events_seen = 0

    def collect(self) -> Batch:
        with self.lock:
            return self._collect()

    def _collect(self) -> Batch:
        fleet = self.fleet
        fleet.advance(fleet.now + self.step_s)
        t = fleet.now
        batch = Batch()

        def obs(target: Target, text: str | None) -> Observation:
            if text is None:
                return Observation(target, t, None, "connection refused")
            return Observation(target, t, parse_for(target.kind, text), None)

        for name, labels in fleet.targets().items():
            batch.observations.append(obs(Target(name, None, "vllm", labels), fleet.render_metrics(name)))
            lines = fleet.new_log_lines(name)
            if lines:
                batch.logs[f"{name}/logs.txt"] = lines
        for node in fleet.nodes():
            batch.observations.append(obs(Target(node, None, "dcgm", {"node": node}), fleet.render_dcgm(node)))
            kernel = fleet.new_kernel_log_lines(node)
            if kernel:
                batch.logs[f"{node}/kern.log"] = kernel
        batch.observations.append(obs(Target("gateway", None, "gateway"), fleet.render_gateway()))
        if self._prober is None:
            self._prober = GoldenProber(record_fleet(fleet))
        batch.observations.append(obs(Target("golden-prober", None, "prober"), probe_fleet(fleet, self._prober)))
        batch.observations.append(obs(Target("kube-state-metrics", None, "kube"), fleet.render_kube_state()))
        for e in fleet.events_since(self._events_seen):
            try:
                batch.events.append(Event.from_json(e))
            except ValueError as exc:
                batch.problems.append(str(exc))
        self._events_seen = fleet.events_recorded
        return batch


class FileSdSource:
    """A file_sd list re-read every round (targets come and go with the fleet)."""

    def __init__(self, path: Path, timeout_s: float) -> None:
        self.path = path
        self.timeout_s = timeout_s

    def collect(self) -> Batch:
        targets = read_file_sd(self.path)
        if not targets:
            return Batch(problems=[f"{self.path}: no targets"])
        return ScrapeSource(targets, timeout_s=self.timeout_s).collect()


@dataclass
class Feed:
    source: Source
    interval_s: float
    """The scrape interval the autopilot sees (virtual seconds for the simulator)."""
    replay: bool = False
    """Prometheus answers a window of history each round: the autopilot is rebuilt from it every round."""
    kubeconfig: Path | None = None
    namespace: str | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    sim: Any = None

    def close(self) -> None:
        for c in reversed(self.closers):
            c()
        self.closers.clear()


def build(cfg: ServiceConfig) -> Feed:
    src = cfg.source
    timeout = min(10.0, max(0.5, cfg.interval * 0.8))
    if src.sim is not None:
        from llm_oncall.sim import Fleet, FleetConfig, scenario
        from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

        s = src.sim
        if s.fault is None:
            fleet = Fleet(FleetConfig(pods=s.pods, rate_per_pod=s.rate_per_pod or 8.0, dcgm_custom_csv=True),
                          seed=s.seed)
        else:
            over: dict[str, Any] = {"pods": s.pods}
            if s.at is not None:
                over["at"] = s.at
            if s.rate_per_pod is not None:
                over["rate_per_pod"] = s.rate_per_pod
            fc, spec = scenario(s.fault, s.seed, **over)
            fleet = Fleet(fc, seed=s.seed, fault=spec)
        cluster = KubeCluster(fleet)
        server = KubeApiServer(cluster).start()
        tmp = tempfile.TemporaryDirectory(prefix="llm-oncall-serve-")
        kc = server.write_kubeconfig(Path(tmp.name) / "kubeconfig")
        feed = Feed(ServiceSimSource(fleet, s.step, cluster.lock), s.step, kubeconfig=kc,
                    namespace=fleet.cfg.namespace, sim=fleet)
        feed.closers += [tmp.cleanup, server.stop]
        return feed
    if src.prometheus is not None:
        window = 40 * cfg.interval
        return Feed(PrometheusSource(src.prometheus, src.selector, window_s=window, step_s=cfg.interval),
                    cfg.interval, replay=True, kubeconfig=cfg.kubeconfig, namespace=cfg.namespace)
    if src.targets is not None:
        targets = [parse_target(t) for t in src.targets]
        return Feed(ScrapeSource(targets, timeout_s=timeout), cfg.interval, kubeconfig=cfg.kubeconfig,
                    namespace=cfg.namespace)
    assert src.file_sd is not None
    read_file_sd(src.file_sd)  # fail fast on a bad file
    return Feed(FileSdSource(src.file_sd, timeout), cfg.interval, kubeconfig=cfg.kubeconfig, namespace=cfg.namespace)
