"""Simulator throughput: virtual seconds per wall second for a healthy fleet under load."""

from __future__ import annotations

import time
from typing import Any

from llm_oncall.sim.config import FleetConfig
from llm_oncall.sim.fleet import Fleet


def run(pods: int = 16, rate_per_pod: float = 20.0, sim_seconds: float = 300.0, seed: int = 1,
        scrape_interval_s: float = 15.0) -> dict[str, Any]:
    """Advance a fleet and scrape every pod each interval, as a drill does."""
    fleet = Fleet(FleetConfig(pods=pods, rate_per_pod=rate_per_pod), seed=seed)
    targets = list(fleet.targets())
    start = time.perf_counter()
    render_s = 0.0
    t = 0.0
    while t < sim_seconds:
        t = min(sim_seconds, t + scrape_interval_s)
        fleet.advance(t)
        r0 = time.perf_counter()
        for name in targets:
            fleet.render_metrics(name)
        render_s += time.perf_counter() - r0
    wall = time.perf_counter() - start
    finished = fleet.finished_requests()
    return {
        "pods": pods,
        "rate_per_pod": rate_per_pod,
        "sim_seconds": sim_seconds,
        "wall_seconds": round(wall, 3),
        "sim_seconds_per_wall_second": round(sim_seconds / wall, 2),
        "requests_per_s": round(finished / wall, 1),
        "simulated_requests": finished,
        "render_seconds": round(render_s, 3),
    }
