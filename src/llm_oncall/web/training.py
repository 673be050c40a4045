"""On-call training in the console: the same session as `llm-oncall train` (training/session.py), one per person
logged in, its commands serialized. The simulator runs in the service's process on its virtual clock; a command
blocks until its simulated cost has run (a few hundred milliseconds), in a worker thread."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from llm_oncall.incident_ids import FAULTS
from llm_oncall.training.report import render
from llm_oncall.training.session import Result, Session, Step

MAX_LINE = 400
MAX_RUNS = 4
"""Sessions kept at once (each holds a simulated fleet and its API server): the oldest goes first."""


@dataclass
class TrainingRun:
    who: str
    session: Session
    steps: list[Step] = field(default_factory=list)
    result: Result | None = None
    report: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


class Trainings:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, TrainingRun] = {}

    def get(self, who: str) -> TrainingRun | None:
        with self.lock:
            return self.runs.get(who)

    def start(self, who: str, incident: str, seed: int) -> TrainingRun:
        if incident == "random":
            incident = random.Random(seed).choice(FAULTS)  # noqa: S311 - picking a drill, not cryptography
        if incident not in FAULTS:
            raise ValueError(f"unknown incident {incident!r}")
        run = TrainingRun(who, Session(incident, seed))
        with self.lock:
            old = self.runs.pop(who, None)
            self.runs[who] = run
            while len(self.runs) > MAX_RUNS:
                self.runs.pop(next(iter(self.runs))).session.close()
        if old is not None:
            old.session.close()
        return run

    def command(self, run: TrainingRun, line: str) -> Step:
        if len(line) > MAX_LINE:
            raise ValueError(f"a command of at most {MAX_LINE} characters")
        with run.lock:
            if run.result is not None:
                raise ValueError("this training run is finished: start another")
            step = run.session.do(line)
            run.steps.append(step)
            return step

    def finish(self, run: TrainingRun, autopilot: bool = True) -> Result:
        with run.lock:
            if run.result is None:
                run.result = run.session.finish(autopilot=autopilot)
                run.report = render(run.result)
            return run.result

    def close(self) -> None:
        with self.lock:
            for r in self.runs.values():
                r.session.close()
            self.runs.clear()
