"""Chaos drills: inject an incident into a simulated fleet, run the autopilot, score it.

The autopilot only sees what SimSource exposes (pages, logs, events); the ground truth is
read here, by the scorer, after the fact.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.drills.simsource import SimSource
from llm_oncall.sim import INCIDENTS, FaultSpec, Fleet, FleetConfig, scenario

DRILL_INCIDENTS: tuple[str, ...] = tuple(i for i in INCIDENTS if i != "pod-outlier")
INTERVAL_S = 15.0
AFTER_ONSET_S = 300.0


@dataclass(frozen=True)
class DrillResult:
    incident: str
    diagnosed: str
    correct: bool
    seconds_to_diagnosis: float | None
    onset: float | None
    seed: int
    evidence: tuple[str, ...] = ()
    scope_pods: tuple[str, ...] = ()
    truth_pods: tuple[str, ...] = ()
    false_pages: int = 0
    """Pages before onset (or anywhere in a healthy run)."""
    sim_seconds: float = 0.0
    final: str = "healthy"
    diagnosis: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "incident": self.incident, "diagnosed": self.diagnosed, "correct": self.correct,
            "seconds_to_diagnosis": self.seconds_to_diagnosis, "onset": self.onset, "seed": self.seed,
            "evidence": list(self.evidence), "scope_pods": list(self.scope_pods),
            "truth_pods": list(self.truth_pods), "false_pages": self.false_pages,
            "final": self.final, "sim_seconds": self.sim_seconds,
        }


def run_one(incident: str, seed: int, cfg: FleetConfig | None = None, fault: FaultSpec | None = None,
            after_onset_s: float = AFTER_ONSET_S, interval_s: float = INTERVAL_S,
            stop_on_page: bool = True) -> DrillResult:
    if cfg is None:
        cfg, fault = scenario(incident, seed)
    fleet = Fleet(cfg, seed=seed, fault=fault)
    source = SimSource(fleet, interval_s)
    pilot = Autopilot(interval_s=interval_s)
    onset = fault.at if fault is not None else None
    end = (onset if onset is not None else 300.0) + after_onset_s
    first_page: Diagnosis | None = None
    last: Diagnosis | None = None
    false_pages = 0
    while fleet.now < end - 1e-9:
        pilot.observe(source.collect())
        last = pilot.step()
        if not last.pages:
            continue
        if onset is None or fleet.now < onset:
            false_pages += 1
            continue
        if first_page is None:
            first_page = last
            if stop_on_page:
                break
    truth = fleet.ground_truth
    diagnosed = first_page.incident if first_page is not None else "healthy"
    expected = truth.incident if onset is not None else "healthy"
    correct = diagnosed == expected and (onset is not None or false_pages == 0)
    ttd = None
    if first_page is not None and correct and truth.onset is not None:
        ttd = max(0.0, first_page.t - truth.onset)
    shown = first_page or last
    return DrillResult(
        incident=expected, diagnosed=diagnosed if onset is not None or false_pages == 0 else "false-page",
        correct=correct, seconds_to_diagnosis=ttd, onset=truth.onset, seed=seed,
        evidence=tuple(e.text for e in (shown.evidence if shown else ())[:3]),
        scope_pods=shown.scope_pods if shown else (), truth_pods=truth.pods, false_pages=false_pages,
        sim_seconds=fleet.now, final=last.incident if last else "healthy",
        diagnosis=shown.to_json() if shown else {},
    )


def _run_args(args: tuple[str, int]) -> DrillResult:
    return run_one(*args)


def run_many(jobs: Sequence[tuple[str, int]], workers: int | None = None,
             progress: Callable[[DrillResult], None] | None = None) -> list[DrillResult]:
    """Run drills on all cores; results in job order."""
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers <= 1:
        out = []
        for job in jobs:
            r = _run_args(job)
            if progress:
                progress(r)
            out.append(r)
        return out
    results: list[DrillResult] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for r in pool.map(_run_args, jobs):
            if progress:
                progress(r)
            results.append(r)
    return results
