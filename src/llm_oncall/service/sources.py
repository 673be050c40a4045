"""The watch loop's telemetry sources: the simulator (with its own Kubernetes API), Prometheus, fixed targets
and a file_sd list re-read every round.  `Feed.rounds()` hands the autopilot what is new since the last round."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_oncall.service.config import ServiceConfig
from llm_oncall.signals.prometheus import PrometheusSource
from llm_oncall.signals.scrape import ScrapeSource
from llm_oncall.signals.source import Batch, Source
from llm_oncall.signals.targets import parse_target, read_file_sd


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
    clock: Callable[[], float] = time.time
    """The clock of the fleet the loop serves: the wall clock, or the simulator's own (it advances one step per
    round, so cooldowns, verification windows and the diagnosis' age are counted in its time)."""

    def close(self) -> None:
        for c in reversed(self.closers):
            c()
        self.closers.clear()


def build(cfg: ServiceConfig) -> Feed:
    src = cfg.source
    timeout = min(10.0, max(0.5, cfg.interval * 0.8))
    if src.sim is not None:
        from llm_oncall.respond.simsource import SimSource
        from llm_oncall.sim import Fleet, FleetConfig, scenario
        from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

        s = src.sim
        if s.fault is None:
            fleet = Fleet(FleetConfig(pods=s.pods or 4, rate_per_pod=s.rate_per_pod or 8.0, dcgm_custom_csv=True),
                          seed=s.seed)
        else:
            over: dict[str, Any] = {} if s.pods is None else {"pods": s.pods}
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
        feed = Feed(SimSource(fleet, s.step, lock=cluster.lock), s.step, kubeconfig=kc,
                    namespace=fleet.cfg.namespace, sim=fleet, clock=lambda: fleet.cfg.epoch + fleet.now)
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
