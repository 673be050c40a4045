"""The watch loop's telemetry sources: the simulator (with its own Kubernetes API), Prometheus, fixed targets
and a file_sd list re-read every round.  `Feed.rounds()` hands the autopilot what is new since the last round."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from llm_oncall.respond.simsource import serve_sim
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
    simulated: bool = False
    """A simulated fleet: its history restarts with it (nothing to warm from the store)."""
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
        s = src.sim
        served = serve_sim(s.seed, s.step, s.fault, pods=s.pods, at=s.at, rate_per_pod=s.rate_per_pod)
        feed = Feed(served.source, s.step, kubeconfig=served.kubeconfig, namespace=served.fleet.cfg.namespace,
                    simulated=True, clock=served.clock)
        feed.closers.append(served.close)
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
