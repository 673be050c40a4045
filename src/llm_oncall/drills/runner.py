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
from llm_oncall.respond.simsource import SimSource
from llm_oncall.runbooks.expr import Expr, compile_expr
from llm_oncall.signals.source import Batch
from llm_oncall.sim import FAULTS, FaultSpec, Fleet, FleetConfig, scenario

DRILL_INCIDENTS: tuple[str, ...] = tuple(i for i in FAULTS if i != "pod-outlier")
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
    intervals_to_diagnosis: float | None = None
    """Scrape intervals from the first observable symptom to the diagnosis."""
    evidence: tuple[str, ...] = ()
    scope_pods: tuple[str, ...] = ()
    truth_pods: tuple[str, ...] = ()
    false_pages: int = 0
    """Pages before onset (or anywhere in a healthy run)."""
    early_warning: bool = False
    """A `warn` of the injected incident before its first page (early detection, not a false page)."""
    warnings: int = 0
    """Evaluations at severity `warn` before onset or in a healthy run (not pages)."""
    detected_unknown: bool = False
    """An `unknown` page (a red symptom no runbook explained yet) came before the named diagnosis."""
    stated_confidence: float | None = None
    """The confidence of the answer scored: the first named page's; for a run that never paged, the median of
    its evaluations' (a healthy answer spans the run, not only its last scrape)."""
    sim_seconds: float = 0.0
    final: str = "healthy"
    diagnosis: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "incident": self.incident, "diagnosed": self.diagnosed, "correct": self.correct,
            "seconds_to_diagnosis": self.seconds_to_diagnosis, "onset": self.onset, "seed": self.seed,
            "intervals_to_diagnosis": self.intervals_to_diagnosis,
            "evidence": list(self.evidence), "scope_pods": list(self.scope_pods),
            "truth_pods": list(self.truth_pods), "false_pages": self.false_pages,
            "final": self.final, "sim_seconds": self.sim_seconds, "early_warning": self.early_warning,
            "warnings": self.warnings, "detected_unknown": self.detected_unknown,
            "confidence": self.stated_confidence,
        }


def answers(d: Diagnosis, t: float, onset: float | None) -> bool:
    """The answer a drill scores (and `drill --act` acts on): a page after onset that names an incident.

    An `unknown` page (a red symptom no runbook explains yet) is a detection, not a diagnosis or a plan."""
    return d.pages and d.incident != "unknown" and onset is not None and t >= onset


class DrillLoop:
    """One scrape at a time: the autopilot on the fleet's telemetry, the timeline the scorer reads, and the first
    answer after onset (the scorer, not the autopilot, may look at the truth for that)."""

    def __init__(self, fleet: Fleet, incident: str, interval_s: float = INTERVAL_S, flap: float = 0.0,
                 lock: Any = None) -> None:
        self.fleet = fleet
        self.interval_s = interval_s
        self.source = SimSource(fleet, interval_s, flap=flap, lock=lock)
        self.pilot = Autopilot(interval_s=interval_s)
        self.alert = _alert_of(self.pilot, incident)
        self.timeline: list[tuple[float, Diagnosis, bool]] = []
        self.answer: tuple[float, Diagnosis] | None = None

    def step(self, batch: Batch | None = None) -> Diagnosis:
        """Observe one scrape (`batch`, else collected now) and diagnose it."""
        self.pilot.observe(batch if batch is not None else self.source.collect())
        return self.note(self.pilot.step())

    def note(self, d: Diagnosis) -> Diagnosis:
        """Score a diagnosis of this loop's autopilot (`drill --act`: the responder's round made it)."""
        now = self.fleet.now
        symptom = self.alert is not None and self.alert.holds(self.pilot.features[-1].values)
        self.timeline.append((now, d, symptom))
        if self.answer is None and answers(d, now, self.fleet.ground_truth.onset):
            self.answer = (now, d)
        return d

    def result(self, seed: int, until: float | None = None) -> DrillResult:
        """The score of the timeline (up to `until`: after an action the fleet is no longer the drill's)."""
        gt = self.fleet.ground_truth
        timeline = self.timeline if until is None else [x for x in self.timeline if x[0] <= until]
        return score(gt.incident if self.fleet.fault is not None else "healthy", gt.onset, gt.pods, timeline, seed,
                     self.interval_s)


def run_one(incident: str, seed: int, cfg: FleetConfig | None = None, fault: FaultSpec | None = None,
            after_onset_s: float = AFTER_ONSET_S, interval_s: float = INTERVAL_S,
            stop_on_page: bool = True, flap: float = 0.0) -> DrillResult:
    if cfg is None:
        cfg, fault = scenario(incident, seed)
    fleet = Fleet(cfg, seed=seed, fault=fault)
    loop = DrillLoop(fleet, incident, interval_s, flap=flap)
    planned = fault.at if fault is not None else None
    end = (planned if planned is not None else 300.0) + after_onset_s
    while fleet.now < end - 1e-9:
        loop.step()
        if stop_on_page and loop.answer is not None:
            break
    return loop.result(seed)


def _alert_of(pilot: Autopilot, incident: str) -> Expr | None:
    rb = pilot.registry.get(incident)
    return compile_expr(rb.alert) if rb is not None and rb.alert else None


def score(expected: str, onset: float | None, truth_pods: tuple[str, ...],
          timeline: Sequence[tuple[float, Diagnosis, bool]], seed: int, interval_s: float) -> DrillResult:
    """First named page after onset is the answer; pages before onset (or in a healthy run) are false.

    An `unknown` page after onset (a red symptom no runbook explains yet) is a detection, not a diagnosis: the
    answer is the first page that names an incident, and `unknown` only when nothing else was named.
    """
    false_pages = 0
    first_page: tuple[float, Diagnosis] | None = None
    first_unknown: tuple[float, Diagnosis] | None = None
    symptom_t: float | None = None
    warnings = 0
    warned_right = False
    for t, d, symptom in timeline:
        after = onset is not None and t >= onset
        if after and symptom and symptom_t is None:
            symptom_t = t
        if d.severity == "warn" and d.incident != "healthy" and not d.pages:
            warnings += 0 if after else 1
            warned_right = warned_right or (d.incident == expected and first_page is None)
            continue
        if not d.pages:
            continue
        if not after:
            false_pages += 1
        elif answers(d, t, onset):
            first_page = first_page or (t, d)
        else:
            first_unknown = first_unknown or (t, d)
    first_page = first_page or first_unknown
    diagnosed = first_page[1].incident if first_page else "healthy"
    correct = diagnosed == expected if onset is not None else false_pages == 0
    ttd = intervals = None
    if first_page is not None and correct and onset is not None:
        ttd = max(0.0, first_page[0] - onset)
        # MTTD counts from the first scrape where the symptom was observable (the runbook's alert
        # condition held); a diagnosis that beats the symptom counts as 0.
        start = symptom_t if symptom_t is not None and symptom_t <= first_page[0] else first_page[0]
        intervals = (first_page[0] - start) / interval_s
    shown = first_page[1] if first_page else (timeline[-1][1] if timeline else None)
    if first_page is not None:
        stated: float | None = first_page[1].confidence
    else:
        quiet = sorted(d.confidence for _, d, _ in timeline if not d.pages)
        stated = quiet[len(quiet) // 2] if quiet else None
    last = timeline[-1][1] if timeline else None
    if onset is None and false_pages:
        diagnosed = next(d.incident for _, d, _ in timeline if d.pages)
    return DrillResult(
        incident=expected, diagnosed=diagnosed, correct=correct, seconds_to_diagnosis=ttd,
        intervals_to_diagnosis=intervals, onset=onset, seed=seed,
        evidence=tuple(e.text for e in (shown.evidence if shown else ())[:3]),
        scope_pods=shown.scope_pods if shown else (), truth_pods=truth_pods, false_pages=false_pages,
        sim_seconds=timeline[-1][0] if timeline else 0.0, final=last.incident if last else "healthy",
        diagnosis=shown.to_json() if shown else {}, early_warning=warned_right, warnings=warnings,
        stated_confidence=stated,
        detected_unknown=first_unknown is not None and (first_page is None or first_unknown[0] <= first_page[0]),
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
