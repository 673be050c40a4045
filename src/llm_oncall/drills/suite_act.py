"""`drill --suite N --act`: the generated scenarios (drills/generator.py) worked through the on-call loop, with MTTR
by incident — and, with `--manual`, the simulated on-call human's beside it (drills/manual.py)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from llm_oncall.drills.act import ActResult, manual_baseline, run_act
from llm_oncall.drills.generator import Scenario, generate
from llm_oncall.drills.suite import quantile


@dataclass(frozen=True)
class ActJob:
    scenario: Scenario
    manual: bool


GC_THRESHOLD = (50_000, 20, 20)
"""The cyclic collector's thresholds while a scenario runs. A drill round allocates ~10^5 short-lived objects
(parsed samples, snapshots, findings) that reference counting frees; at Python's default (700, 10, 10) the collector
scans them hundreds of times a scenario, ~10 % of its CPU time. Collection still happens, less often; nothing a
drill computes depends on when."""


@contextmanager
def fewer_collections() -> Iterator[None]:
    old = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*old)


def run_scenario_act(job: ActJob) -> tuple[int, ActResult]:
    s = job.scenario
    with fewer_collections():
        r = run_act(s.incident, s.seed, cfg=s.cfg, fault=s.fault)
        if job.manual and s.fault is not None:
            manual, delay = manual_baseline(s.incident, s.seed, cfg=s.cfg, fault=s.fault)
            r.manual_seconds_to_recovery = manual
            r.manual_decision_s = round(delay, 1)
    return s.index, r


def incident_scenarios(n: int, seed: int) -> list[Scenario]:
    """The incident scenarios of the first `n` generated (healthy ones have nothing to act on)."""
    return [s for s in generate(n, seed) if s.fault is not None]


def _cost(s: Scenario) -> float:
    """Rough relative run time (the fleet's size), to start the big scenarios first: the last to finish is then a
    small one and the workers end together."""
    return float(s.cfg.pods * s.cfg.rate_per_pod)


def run(n: int, seed: int, workers: int | None = None, manual: bool = False,
        progress: Callable[[ActResult], None] | None = None,
        scenarios: Sequence[Scenario] | None = None) -> list[ActResult]:
    """The incident scenarios of the first `n` generated (or `scenarios`), on `workers` processes (default: all
    cores); results in scenario order. Each scenario is seeded by its own (seed, index) alone, so the results do not
    depend on the number of workers or on which finishes first."""
    todo = list(scenarios) if scenarios is not None else incident_scenarios(n, seed)
    workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    out: dict[int, ActResult] = {}
    if workers == 1:
        for s in todo:
            i, r = run_scenario_act(ActJob(s, manual))
            out[i] = r
            if progress:
                progress(r)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run_scenario_act, ActJob(s, manual))
                       for s in sorted(todo, key=_cost, reverse=True)]
            for fut in as_completed(futures):
                i, r = fut.result()
                out[i] = r
                if progress:
                    progress(r)
    return [out[s.index] for s in todo]


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    return {"median_s": quantile(values, 0.5), "p95_s": quantile(values, 0.95)}


def report(results: Sequence[ActResult], n: int, seed: int, manual: bool = False) -> dict[str, Any]:
    """MTTR (onset → recovery) of the recovered, by incident; a scenario that did not recover counts in `recovered`
    only (an MTTR needs a recovery). `acted`: the scenarios where the loop executed an action at all (a recovery
    needs one; one without is a fix that did not apply, e.g. a router rollback with no router change to undo).
    `manual`: whether the human's run was part of it (its medians are null both when it was not run and when the
    human recovered nothing)."""
    by: dict[str, list[ActResult]] = {}
    for r in results:
        by.setdefault(r.drill.incident, []).append(r)
    ttr = [r.seconds_to_recovery for r in results if r.seconds_to_recovery is not None]
    by_hand = [r.manual_seconds_to_recovery for r in results if r.manual_seconds_to_recovery is not None]
    return {
        "scenarios": n, "seed": seed, "incidents": len(results), "manual": manual,
        "accuracy": sum(r.correct for r in results) / len(results) if results else None,
        "recovered": sum(r.recovered for r in results),
        "mttr_median_s": quantile(ttr, 0.5), "mttr_p95_s": quantile(ttr, 0.95),
        "manual_mttr_median_s": quantile(by_hand, 0.5) if by_hand else None,
        "mttr_by_incident": {inc: {"n": len(rs), "recovered": sum(r.recovered for r in rs),
                                   "acted": sum(any(a["status"] == "executed" for a in r.actions) for r in rs),
                                   **_stats([r.seconds_to_recovery for r in rs if r.seconds_to_recovery is not None]),
                                   "manual_median_s": quantile([r.manual_seconds_to_recovery for r in rs
                                                                if r.manual_seconds_to_recovery is not None], 0.5)}
                             for inc, rs in sorted(by.items())},
    }
