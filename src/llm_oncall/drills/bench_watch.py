"""`bench watch`: what one watch-loop round costs at fleet scale — parse every pod's page, add it to the
history, snapshot, features, diagnosis and the incident-store step, exactly as `serve` runs it — against the scrape
interval it must fit in, at several fleet sizes measured in the same run, beside the ingest-only (parse) cost.

The pages are real: the captured page of a real vLLM 0.32 CPU server (drills/realpage.py, package data), one live
copy per pod, advanced in place every round like a live server — counters and histogram buckets grow by one
interval of that server's traffic times the pod's own factor (0.5–1.5, jittered per round), so names, labels and
buckets are exactly the real server's and every pod's page differs.  The fleet is steady (no queue, no
preemptions, KV usage 30–60 %: gauges set per pod), so the round is the one a healthy fleet costs every 15 s.

The round itself is given by the caller (`round_factory`: the CLI builds `serve`'s own watch loop on the bench's
source, with a real SQLite incident store), so what is measured is what `serve` does: the source's `collect`
(parse), the autopilot's observe and step, the incident-store reads/writes of the round.  The per-scrape
telemetry a postmortem reads (postmortem/telemetry.py, written by `drill --act`, not by `serve`) is measured
beside it.  HTTP is not in the figure (a scrape's network wait is I/O, not CPU), nor is rendering the pages.
CPU seconds are process time: a busy neighbour on a shared machine slows the wall clock, not this figure.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.drills.realpage import LOADED_PAGE, LivePage, bundled
from llm_oncall.postmortem.telemetry import POD_SIGNALS, TelemetryLog
from llm_oncall.signals.source import Batch, Observation, Source, Target, parse_for

GOAL_CORE_SHARE = 0.25
"""Issue 15: 1,000 pods within 25 % of one core at a 15 s interval."""
LABELS = 'engine="0",model_name="tiny"'


class Round(Protocol):
    """One watch-loop round; its autopilot (for the diagnosis and the telemetry)."""

    @property
    def pilot(self) -> Autopilot: ...

    @property
    def last(self) -> Diagnosis | None: ...

    def round(self) -> None: ...


RoundFactory = Callable[[Source, float, Path], Round]
"""(source, interval, store file) → the watch loop to run one round at a time."""


class PagesSource:
    """The fleet's pages of this round, parsed in `collect` the way a scrape source parses what it fetched."""

    def __init__(self) -> None:
        self.pages: list[tuple[Target, str]] = []
        self.t = 0.0

    def collect(self) -> Batch:
        t = self.t
        return Batch(observations=[Observation(target, t, parse_for("vllm", text), None)
                                   for target, text in self.pages])


class Fleet:
    """N live copies of the real page with per-pod traffic and gauges; `step()` advances them one interval."""

    def __init__(self, pods: int, seed: int = 0, page: str | None = None) -> None:
        text = page if page is not None else bundled(LOADED_PAGE)
        self.rng = random.Random(seed)  # noqa: S311 (traffic, not secrets)
        self.targets = [Target(f"vllm-{i:05d}", f"http://vllm-{i:05d}:8000/metrics", "vllm",
                               {"pod": f"vllm-{i:05d}", "node": f"node-{i // 8:04d}", "group": "tiny"})
                        for i in range(pods)]
        self.pages: list[LivePage] = []
        self.factor: list[float] = []
        for _ in range(pods):
            p = LivePage(text)
            p.hold("vllm:num_preemptions_total")
            p.hold("vllm:request_num_preemptions_bucket")
            p.hold("vllm:request_num_preemptions_sum")
            p.set(f"vllm:num_requests_waiting{{{LABELS}}}", 0.0)
            p.set(f'vllm:num_requests_waiting_by_reason{{{LABELS},reason="capacity"}}', 0.0)
            self.pages.append(p)
            self.factor.append(self.rng.uniform(0.5, 1.5))

    def step(self) -> list[tuple[Target, str]]:
        out = []
        for target, page, f in zip(self.targets, self.pages, self.factor, strict=True):
            page.advance(f * self.rng.uniform(0.9, 1.1))
            page.set(f"vllm:num_requests_running{{{LABELS}}}", float(self.rng.randint(2, 6)))
            page.set(f"vllm:kv_cache_usage_perc{{{LABELS}}}", round(self.rng.uniform(0.3, 0.6), 3))
            out.append((target, page.render()))
        return out


@dataclass
class Scale:
    pods: int
    interval_s: float
    round_cpu_s: list[float] = field(default_factory=list)
    ingest_cpu_s: list[float] = field(default_factory=list)
    telemetry_cpu_s: list[float] = field(default_factory=list)
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
    def telemetry_seconds(self) -> float:
        return self._mean(self.telemetry_cpu_s)

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
                "round_cpu_seconds": list(self.round_cpu_s),
                "telemetry_log_seconds": self.telemetry_seconds,
                "telemetry_log_core_share": self.telemetry_seconds / self.interval_s,
                "round_wall_seconds": self._mean(self.round_wall_s), "ms_per_pod": 1000 * self.round_seconds
                / self.pods, "growth_last_over_first": self.growth, "diagnosis": self.diagnosis}


def _telemetry(log: TelemetryLog, pilot: Autopilot) -> None:
    """The per-scrape telemetry of drills/record.py: fleet features, a few values per pod, the diagnosis."""
    if not pilot.features or pilot.last is None:
        return
    f, snap, d = pilot.features[-1], pilot.snapshots[-1], pilot.last
    pods = {p.name: {"up": p.up, **{k: getattr(p, k) for k in POD_SIGNALS}} for p in snap.pods}
    log.record(f.t, f.values, pods, (d.incident, d.severity))


def measure(round_factory: RoundFactory, pods: int, rounds: int, warmup: int, interval_s: float = 15.0,
            seed: int = 0) -> Scale:
    """Rounds [0, warmup) fill the history unmeasured; every later round is measured twice over: ingest alone
    (parse every page), then the whole round (its own parse, the autopilot, the store)."""
    scale = Scale(pods, interval_s)
    fleet = Fleet(pods, seed)
    source = PagesSource()
    with tempfile.TemporaryDirectory(prefix="llm-oncall-bench-") as tmp:
        db = Path(tmp) / "incidents.db"
        loop = round_factory(source, interval_s, db)
        log = TelemetryLog(Path(tmp) / "telemetry.db")
        try:
            for r in range(warmup + rounds):
                source.pages, source.t = fleet.step(), 1.8e9 + (r + 1) * interval_s
                c0 = time.process_time()
                for _, text in source.pages:
                    parse_for("vllm", text)
                c1 = time.process_time()
                w0 = time.perf_counter()
                loop.round()
                c2 = time.process_time()
                w1 = time.perf_counter()
                _telemetry(log, loop.pilot)
                c3 = time.process_time()
                if r >= warmup:
                    scale.ingest_cpu_s.append(c1 - c0)
                    scale.round_cpu_s.append(c2 - c1)
                    scale.telemetry_cpu_s.append(c3 - c2)
                    scale.round_wall_s.append(w1 - w0)
            if loop.last is not None:
                scale.diagnosis = loop.last.incident
        finally:
            log.close()
    return scale


def ladder(pods: int) -> list[int]:
    """The sizes compared side by side: 10, 100, … up to and including `pods`."""
    out = [n for n in (10, 100, 1000, 10_000) if n < pods]
    return [*out, pods]


def run(round_factory: RoundFactory, pods: int = 1000, rounds: int = 10, warmup: int = 10,
        interval_s: float = 15.0, seed: int = 0, sizes: Sequence[int] | None = None) -> dict[str, Any]:
    scales = [measure(round_factory, n, rounds, warmup, interval_s, seed) for n in (sizes or ladder(pods))]
    top = scales[-1]
    out = top.to_json()
    out.update({"goal_core_share": GOAL_CORE_SHARE, "within_goal": top.core_share <= GOAL_CORE_SHARE,
                "flat": top.growth <= 1.1, "warmup_rounds": warmup, "page": LOADED_PAGE,
                "scales": [s.to_json() for s in scales]})
    return out
