"""The watch loop of `serve`: the responder's rounds (respond/responder.py) on the wall clock, in a thread.

One round at a time (a lock): the Alertmanager receiver and the approval endpoint only record and wake the loop,
so whatever executes was decided on a diagnosis of this round — an older one (more than two intervals) is
re-checked first by the actuator. At start, intents the ledger holds without a result (the process died between
claiming the idempotency key and recording the outcome) are reconciled against the cluster before anything runs,
and the recent rounds' raw telemetry is replayed from the store (respond/history.py), so a restart in the middle
of an incident diagnoses it on the history it had.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_oncall.actions.guard import Policy
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.run import Actuator
from llm_oncall.diagnosis.autopilot import HISTORY, Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.diagnosis.symptoms import Slo
from llm_oncall.incidents import IncidentStore, StoreError
from llm_oncall.respond import Responder
from llm_oncall.respond.history import History
from llm_oncall.respond.responder import Predictor
from llm_oncall.service.observability import Log, Metrics
from llm_oncall.service.sources import Feed


class _Counters:
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def count(self, what: str, label: str = "", n: float = 1.0) -> None:
        if what == "scrape_failures":
            self.metrics.scrape_failures.inc(n)
        elif what == "actions":
            self.metrics.actions.labels(label).inc(n)


def _twin(interval_s: float) -> Predictor:
    """The twin (respond/twin.py) imports the simulator: only a service that enables it loads it."""
    from llm_oncall.respond.twin import Twin

    return Twin(interval_s)


class Watcher:
    def __init__(self, feed: Feed, store: IncidentStore, ledger: Ledger, actuator: Actuator | None, mode: str,
                 interval_s: float, metrics: Metrics, log: Log, resolve_after: int = 3,
                 slo: Slo | None = None, twin: bool = False) -> None:
        self.feed = feed
        self.store = store
        self.ledger = ledger
        self.interval_s = interval_s
        self.metrics = metrics
        self.log = log
        # The simulator restarts with the service (a new fleet at t = 0) and Prometheus answers its own history:
        # only scraped sources keep theirs for a restart.
        history = History(store.path, HISTORY) if not feed.simulated and not feed.replay else None
        self.responder = Responder(feed.source, feed.interval_s, store, ledger, actuator, mode, clock=feed.clock,
                                   log=log, counters=_Counters(metrics), namespace=feed.namespace,
                                   resolve_after=resolve_after, replay=feed.replay, actor="llm-oncall-serve",
                                   history=history, pilot=Autopilot(feed.interval_s, slo=slo),
                                   twin=_twin(feed.interval_s) if twin else None)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.rounds = 0
        self.thread: threading.Thread | None = None
        self.policy_file: Path | None = None
        self._last_wall: float | None = None
        self._policy_mtime: float | None = None

    # what the API and the service read
    @property
    def last(self) -> Diagnosis | None:
        return self.responder.last

    @property
    def last_wall(self) -> float | None:
        """When (wall clock) the last diagnosis was made."""
        return self._last_wall

    @property
    def mode(self) -> str:
        return self.responder.mode

    @property
    def actuator(self) -> Actuator | None:
        return self.responder.actuator

    def set_notify(self, notify: Callable[[str, str, str, dict[str, Any]], None]) -> None:
        self.responder.notify = notify

    def set_leader(self, is_leader: Callable[[], bool]) -> None:
        self.responder.is_leader = is_leader

    # ---- life ---------------------------------------------------------------------------------------
    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="watch", daemon=True)
        self.thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self.stopping.set()
        self.wake.set()
        if self.thread is not None:
            self.thread.join(timeout_s)

    def run(self) -> None:
        while not self.stopping.is_set():
            started = time.monotonic()
            self.round()
            left = self.interval_s - (time.monotonic() - started)
            if left > 0:
                self.wake.wait(left)
            self.wake.clear()

    def round(self) -> None:
        with self.lock:
            t0 = time.monotonic()
            try:
                self._reload_policy()
                if self.responder.round() is not None:
                    self._last_wall = time.time()
                self._refresh_counts()
            except StoreError as exc:
                self.metrics.loop_errors.inc()
                self.log.error("store unavailable; round skipped", error=str(exc))
            except Exception as exc:  # a round must never kill the loop
                self.metrics.loop_errors.inc()
                self.log.error("round failed", error=f"{type(exc).__name__}: {exc}")
            finally:
                self.rounds += 1
                self.metrics.loop_seconds.observe(time.monotonic() - t0)

    def _reload_policy(self) -> None:
        """A changed policy file is read again and the open incidents' waiting actions are guarded anew; a policy
        that no longer parses is refused (the one in force stays) and logged."""
        act, path = self.responder.actuator, self.policy_file
        if act is None or path is None:
            return
        try:
            mtime = path.stat().st_mtime
        except OSError as exc:
            self.log.error("policy file unreadable; the one in force stays", path=str(path), error=str(exc))
            return
        if self._policy_mtime is None:
            self._policy_mtime = mtime
            return
        if mtime == self._policy_mtime:
            return
        self._policy_mtime = mtime
        try:
            policy = Policy.load(path)
        except (OSError, ValueError) as exc:
            self.log.error("policy file refused; the one in force stays", error=str(exc))
            return
        policy.max_diagnosis_age_s = act.policy.max_diagnosis_age_s
        act.policy = policy
        self.log.info("policy reloaded: open incidents re-planned", path=str(path))
        self.responder.replan()

    def _refresh_counts(self) -> None:
        for status, n in self.store.counts().items():
            self.metrics.incidents.labels(status).set(n)

    def reconcile(self) -> list[dict[str, Any]]:
        with self.lock:
            return self.responder.reconcile()

    def warm(self) -> int:
        with self.lock:
            return self.responder.warm()

    def close(self) -> None:
        if self.responder.history is not None:
            self.responder.history.close()
