"""`bench watch`: what one watch-loop round costs at fleet scale — parse every pod's page, add it to the
history, snapshot, features, diagnosis — against the scrape interval it must fit in, at several fleet sizes
measured in the same run, beside the ingest-only (parse) cost.

The pages are the simulator's (exact vLLM 0.32 names, types, labels and buckets; counters advancing as traffic
flows): a base fleet is simulated once and its pages are re-labelled to N pods (pod, node and group names made
unique), so the simulator's own cost is not in the figure and every size sees the same traffic per pod. HTTP is
not in it either (a scrape's network wait is I/O, not CPU). CPU seconds are process time: a busy neighbour on a
shared machine slows the wall clock, not this figure.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.signals.source import Batch, Observation, Target, parse_for
from llm_oncall.sim import Fleet, FleetConfig

BASE_PODS = 10
GOAL_CORE_SHARE = 0.25
"""Issue 15: 1,000 pods within 25 % of one core at a 15 s interval."""

Recorded = list[list[tuple[str, dict[str, str], str]]]
"""Per round: (pod name, target labels, page text) of the base fleet."""


@dataclass
class Scale:
    pods: int
    interval_s: float
    round_cpu_s: list[float] = field(default_factory=list)
    ingest_cpu_s: list[float] = field(default_factory=list)
    round_wall_s: list[float] = field(default_factory=list)
    diagnosis: str = ""

    @staticmethod
    def _mean(xs: Sequence[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    @property
    def round_seconds(self) -> float:
        return self._mean(self.round_cpu_s)

    @property
    def ingest_seconds(self) -> float:
        return self._mean(self.ingest_cpu_s)

    @property
    def core_share(self) -> float:
        return self.round_seconds / self.interval_s

    @property
    def ingest_only_core_share(self) -> float:
        return self.ingest_seconds / self.interval_s

    @property
    def growth(self) -> float:
        """Last measured rounds over the first ones (≈1: flat as the history grows)."""
        n = max(1, len(self.round_cpu_s) // 3)
        first, last = self._mean(self.round_cpu_s[:n]), self._mean(self.round_cpu_s[-n:])
        return last / first if first else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"pods": self.pods, "interval_s": self.interval_s, "round_seconds": self.round_seconds,
                "core_share": self.core_share, "ingest_only_seconds": self.ingest_seconds,
                "ingest_only_core_share": self.ingest_only_core_share, "rounds": len(self.round_cpu_s),
                "round_wall_seconds": self._mean(self.round_wall_s), "ms_per_pod": 1000 * self.round_seconds
                / self.pods, "growth_last_over_first": self.growth, "diagnosis": self.diagnosis}


def record(rounds: int, interval_s: float = 15.0, seed: int = 0, base_pods: int = BASE_PODS) -> Recorded:
    fleet = Fleet(FleetConfig(pods=base_pods, rate_per_pod=8.0), seed=seed)
    out: Recorded = []
    for _ in range(rounds):
        fleet.advance(fleet.now + interval_s)
        pages = []
        for name, labels in fleet.targets().items():
            text = fleet.render_metrics(name)
            if text is not None:
                pages.append((name, dict(labels), text))
        out.append(pages)
    return out


def _targets(base: list[tuple[str, dict[str, str], str]], pods: int) -> list[tuple[Target, int]]:
    """N targets over the base fleet's pages: (target, index of its base page)."""
    out = []
    for i in range(pods):
        k, j = divmod(i, len(base))
        name, labels, _ = base[j]
        suffix = f"-x{k}" if k else ""
        lab = {**labels, "pod": name + suffix}
        for key in ("node", "group"):
            if key in lab:
                lab[key] += suffix
        out.append((Target(name + suffix, None, "vllm", lab), j))
    return out


def measure(recorded: Recorded, pods: int, warmup: int, interval_s: float = 15.0) -> Scale:
    """Rounds [0, warmup) fill the history unmeasured; every later round is measured twice over: ingest alone,
    then the whole round (a fresh parse, the autopilot's observe and step)."""
    scale = Scale(pods, interval_s)
    pilot = Autopilot(interval_s)
    for r, pages in enumerate(recorded):
        t = (r + 1) * interval_s
        targets = _targets(pages, pods)
        c0 = time.process_time()
        for _, j in targets:
            parse_for("vllm", pages[j][2])
        c1 = time.process_time()
        w0 = time.perf_counter()
        batch = Batch(observations=[Observation(target, t, parse_for("vllm", pages[j][2]), None)
                                    for target, j in targets])
        pilot.observe(batch)
        d = pilot.step() if r >= 1 else None
        c2 = time.process_time()
        w1 = time.perf_counter()
        if r >= warmup:
            scale.ingest_cpu_s.append(c1 - c0)
            scale.round_cpu_s.append(c2 - c1)
            scale.round_wall_s.append(w1 - w0)
        if d is not None:
            scale.diagnosis = d.incident
    return scale


def ladder(pods: int) -> list[int]:
    """The sizes compared side by side: 10, 100, … up to and including `pods`."""
    out = [n for n in (10, 100, 1000, 10_000) if n < pods]
    return [*out, pods]


def run(pods: int = 1000, rounds: int = 10, warmup: int = 10, interval_s: float = 15.0, seed: int = 0,
        sizes: Sequence[int] | None = None) -> dict[str, Any]:
    recorded = record(warmup + rounds, interval_s, seed)
    scales = [measure(recorded, n, warmup, interval_s) for n in (sizes or ladder(pods))]
    top = scales[-1]
    out = top.to_json()
    out.update({"goal_core_share": GOAL_CORE_SHARE, "within_goal": top.core_share <= GOAL_CORE_SHARE,
                "warmup_rounds": warmup, "base_pods": BASE_PODS, "scales": [s.to_json() for s in scales]})
    return out
