"""`bench drill`: suite scenarios per minute on all cores against one core, same scenarios, same run."""

from __future__ import annotations

import os
import time
from typing import Any

from llm_oncall.drills.generator import generate
from llm_oncall.drills.suite import run_scenarios


def run(scenarios: int, seed: int, workers: int | None = None) -> dict[str, Any]:
    """Run the same generated scenarios twice: on `workers` processes (default: all cores), then on one.

    Both passes must agree on every result (the simulation is deterministic per scenario), which is
    checked: a speed-up bought by different answers is no speed-up.
    """
    if scenarios <= 0:
        raise ValueError("scenarios must be positive")
    items = generate(scenarios, seed)
    workers = max(1, workers or os.cpu_count() or 1)
    t0 = time.perf_counter()
    parallel = run_scenarios(items, workers)
    t1 = time.perf_counter()
    single = run_scenarios(items, 1)
    t2 = time.perf_counter()
    same = all(a.diagnosed == b.diagnosed and a.intervals_to_diagnosis == b.intervals_to_diagnosis
               for a, b in zip(parallel, single, strict=True))
    wall_n, wall_1 = t1 - t0, t2 - t1
    per_min = 60.0 * scenarios / wall_n
    per_min_1 = 60.0 * scenarios / wall_1
    return {
        "scenarios": scenarios,
        "seed": seed,
        "workers": workers,
        "scenarios_per_minute": round(per_min, 2),
        "single_worker_scenarios_per_minute": round(per_min_1, 2),
        "speedup": round(per_min / per_min_1, 3),
        "wall_seconds": round(wall_n, 2),
        "single_worker_wall_seconds": round(wall_1, 2),
        "identical_results": same,
        "correct": sum(r.correct for r in parallel),
    }
