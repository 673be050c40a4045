"""A drill started from the console: the simulator in a background thread, one incident after another, so the
scoreboard fills in while the page polls it.  One drill at a time per service."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.drills.runner import run_one
from llm_oncall.incident_ids import FAULTS


@dataclass
class DrillRun:
    incidents: list[str]
    seed: int
    started_by: str
    started: float = field(default_factory=time.time)
    results: list[dict[str, Any]] = field(default_factory=list)
    running: str | None = None
    done: bool = False
    error: str | None = None

    @property
    def correct(self) -> int:
        return sum(1 for r in self.results if r.get("correct"))


class Drills:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: DrillRun | None = None

    def start(self, incidents: list[str], seed: int, by: str) -> DrillRun | None:
        """The new run, or None while one is still running."""
        unknown = [i for i in incidents if i not in FAULTS]
        if unknown:
            raise ValueError(f"unknown incident(s): {', '.join(unknown)}")
        with self.lock:
            if self.current is not None and not self.current.done:
                return None
            run = DrillRun(incidents or list(FAULTS), seed, by)
            self.current = run
        threading.Thread(target=self._run, args=(run,), name="console-drill", daemon=True).start()
        return run

    def _run(self, run: DrillRun) -> None:
        try:
            for inc in run.incidents:
                run.running = inc
                t0 = time.perf_counter()
                res = run_one(inc, run.seed)
                row = res.to_json()
                row["wall_s"] = round(time.perf_counter() - t0, 2)
                run.results.append(row)
        except Exception as exc:  # shown on the page, the service keeps running
            run.error = f"{type(exc).__name__}: {exc}"
        finally:
            run.running = None
            run.done = True
