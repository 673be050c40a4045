"""The watch loop: every `interval`, collect from the source, run the autopilot, open or update the incident on a
page, plan its emergency fix, act per mode (propose: plan + dry-run; approve: what a human approved; auto: what
the policy allows), and resolve the incident when the symptoms are gone.

One round at a time (a lock): the Alertmanager receiver and the approval endpoint only record and wake the loop,
so whatever executes was decided on a diagnosis of this round — an older one (more than two intervals) is
re-checked first by the actuator.  At start, intents the ledger holds without a result (the process died between
claiming the idempotency key and recording the outcome) are reconciled against the cluster before anything runs.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from llm_oncall.actions import execute, verify
from llm_oncall.actions.kube import KubeError
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Plan
from llm_oncall.actions.run import Actuator
from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.incidents import IncidentStore, StoreError
from llm_oncall.postmortem.telemetry import TelemetryLog
from llm_oncall.service.sources import Feed
from llm_oncall.service.telemetry import Log, Metrics

PENDING = ("planned", "dry_run")
RECOVERED_ROUNDS = 2
TELEMETRY_KEPT_S = 3600.0
"""Every round's telemetry is kept an hour (≈ 15 kB a round for 8 pods: 3.5 MB an hour at 15 s) ..."""
INCIDENT_LEAD_S = 1800.0
"""... and for good around each incident, from half an hour before it opened (the baseline, the onset) to half an
hour after it resolved, for incidents of the last INCIDENTS_KEPT_S: what its postmortem charts."""
INCIDENTS_KEPT_S = 30 * 86400.0
"""Consecutive rounds with the incident's recovery signal back (actions/verify.py) before it counts as mitigated."""


class Watcher:
    def __init__(self, feed: Feed, store: IncidentStore, ledger: Ledger, actuator: Actuator | None, mode: str,
                 interval_s: float, metrics: Metrics, log: Log, resolve_after: int = 3) -> None:
        self.feed = feed
        self.store = store
        self.ledger = ledger
        self.actuator = actuator
        self.mode = mode
        self.interval_s = interval_s
        self.metrics = metrics
        self.log = log
        self.resolve_after = resolve_after
        self.pilot = Autopilot(feed.interval_s)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.last: Diagnosis | None = None
        self.last_wall: float | None = None
        self.rounds = 0
        self.green = 0
        self.plan: Plan | None = None
        self.plan_incident: str | None = None
        self.thread: threading.Thread | None = None
        self.observed: deque[dict[str, Any]] = deque(maxlen=400)
        self.telemetry: TelemetryLog | None = None
        """Where each round's features go for postmortems (the store's file), when set."""
        self.pruned_at = 0.0
        self.baselines: dict[str, float | None] | None = None
        self.recovered_streak = 0
        self.notify: Callable[..., None] = lambda *a, **k: None
        """(incident id, event, text, detail): the notifier, when `notify` targets are configured."""
        self.is_leader: Callable[[], bool] = lambda: True
        """With leader election (service/leader.py) a follower diagnoses every round (its history stays warm for
        a takeover) but opens no incident, plans, notifies or acts: that is the leader's."""

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
                d = self._diagnose()
                if d is not None and self.is_leader():
                    self._handle(d)
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

    # ---- diagnose -----------------------------------------------------------------------------------
    def _diagnose(self) -> Diagnosis | None:
        batch = self.feed.source.collect()
        failed = sum(1 for o in batch.observations if o.page is None)
        if failed:
            self.metrics.scrape_failures.inc(failed)
        for p in batch.problems:
            self.log.warning("source problem", problem=p)
        if self.feed.replay:
            pilot = Autopilot(self.feed.interval_s, self.pilot.registry, scrapes_kept=400)
            pilot.observe(batch)
            d: Diagnosis | None = None
            for t in pilot.store.times()[1:]:
                d = pilot.step(at=t)
            self.pilot = pilot
        else:
            self.pilot.observe(batch)
            d = self.pilot.step() if len(self.pilot.store.times()) >= 2 else None
        if d is not None:
            self.last, self.last_wall = d, time.time()
            if self.pilot.features:
                self.observed.append(verify.observe(self.pilot.features[-1], self.pilot.snapshots[-1]))
                self._record(d)
        return d

    def _record(self, d: Diagnosis) -> None:
        """The round's telemetry for the postmortem's impact and charts, on the store's (wall) clock; kept for
        TELEMETRY_KEPT_S."""
        if self.telemetry is None:
            return
        now, snap = time.time(), self.pilot.snapshots[-1]
        self.telemetry.record_scrape(now, self.pilot.features[-1].values, snap, (d.incident, d.severity),
                                     epoch=now - snap.t)
        if now - self.pruned_at >= 600.0:
            self.telemetry.prune(now - TELEMETRY_KEPT_S, keep=[
                (i["opened_at_s"] - INCIDENT_LEAD_S, (i["resolved_at_s"] or now) + INCIDENT_LEAD_S)
                for i in self.store.incidents() if i["opened_at_s"] >= now - INCIDENTS_KEPT_S])
            self.pruned_at = now

    def recheck(self) -> Diagnosis | None:
        """A fresh diagnosis for the actuator when the one it was given is too old."""
        d = self._diagnose()
        self.log.info("diagnosis re-checked before execution", incident=d.incident if d else None)
        return d if d is not None and d.pages else None

    # ---- incidents ----------------------------------------------------------------------------------
    def _handle(self, d: Diagnosis) -> None:
        active = self.store.active()
        if d.pages:
            self.green = 0
            if active is None:
                iid = self.store.open_incident(d.incident, d.title or d.summary, actor="watch")
                self.log.info("incident opened", incident_id=iid, incident=d.incident)
                self.notify(iid, "opened", f"{d.incident} paged: {d.title or d.summary}", {"diagnosis": d.to_json()})
                active = self.store.get(iid, timeline=False)
                assert active is not None
            iid = active["id"]
            if self.store.set_diagnosis(iid, d.to_json()):
                self.log.info("diagnosis", incident_id=iid, incident=d.incident, confidence=round(d.confidence, 3))
                self.notify(iid, "diagnosis", f"diagnosis: {d.incident} ({d.confidence:.0%}): {d.summary}",
                            {"incident": d.incident, "confidence": d.confidence})
            self._plan(active, d)
            self._act(iid)
            self._verify(iid, d)
            return
        if active is None:
            return
        iid, status = active["id"], active["status"]
        if not self._back_after_acting():
            # Quiet but not back: a fixed pod that restarts is not scraped, so nothing about it pages, and the
            # incident would resolve before the fix took effect. It waits for the recovery signal.
            self.green = 0
            return
        self.green += 1
        if status == "mitigating":
            self.store.set_status(iid, "mitigated", "watch", f"no page for {self.green} round(s) after acting")
            self.notify(iid, "status", "mitigated: the page stopped after the executed actions",
                        {"status": "mitigated"})
            self.store.event(iid, "verification", "watch", {"verdict": "helped", "detail": "the diagnosis stopped "
                                                            f"paging ({d.incident}) after the executed actions"})
        firing = self.store.firing_alerts(iid)
        if self.green >= self.resolve_after and firing == 0:
            self.store.set_status(iid, "resolved", "watch", f"no page for {self.green} rounds and no firing alert")
            self.log.info("incident resolved", incident_id=iid)
            self.notify(iid, "status", "resolved", {"status": "resolved"})
            self.plan, self.plan_incident = None, None

    def _back_after_acting(self) -> bool:
        """Without an executed action, yes; with one, when the recovery signal of the incident it fixed is back."""
        acted = self.plan is not None and any(a.status == "executed" for a in self.plan.actions)
        if not acted or self.plan is None or self.baselines is None or not self.observed:
            return True
        return verify.recovered(self.plan.incident, self.observed[-1], self.baselines)

    def _verify(self, iid: str, d: Diagnosis) -> None:
        """The page may go on after a fix (demand is still doubled; the capacity now absorbs it): the incident is
        mitigated when its recovery signal is back for RECOVERED_ROUNDS rounds, open again when it is lost."""
        status = (self.store.get(iid, timeline=False) or {}).get("status")
        acted = self.plan is not None and any(a.status == "executed" for a in self.plan.actions)
        if status not in ("open", "mitigating", "mitigated") or not acted or self.baselines is None \
                or not self.observed:
            return
        ok = verify.recovered(d.incident, self.observed[-1], self.baselines)
        self.recovered_streak = self.recovered_streak + 1 if ok else 0
        sig = verify.signals(d.incident)
        detail = {s.name: {"value": s.value(self.observed[-1]), "baseline": self.baselines.get(s.name)} for s in sig}
        if status in ("open", "mitigating") and self.recovered_streak >= RECOVERED_ROUNDS:
            self.store.set_status(iid, "mitigated", "watch", f"recovery signal back for {self.recovered_streak} rounds")
            self.notify(iid, "status", f"mitigated: {'; '.join(s.doc for s in sig)}", {"status": "mitigated"})
            self.store.event(iid, "verification", "watch", {"verdict": "helped", "signals": detail,
                                                            "detail": "; ".join(s.doc for s in sig)})
        elif status == "mitigated" and not ok:
            self.store.set_status(iid, "open", "watch", f"symptoms back: {d.incident}")
            self.notify(iid, "status", f"open again: {d.incident} symptoms back", {"status": "open"})
            self.store.event(iid, "verification", "watch", {"verdict": "relapsed", "signals": detail})

    def _plan(self, active: dict[str, Any], d: Diagnosis) -> None:
        iid = active["id"]
        if self.plan_incident != iid:
            self.plan, self.plan_incident = None, iid
            if active.get("plan_id"):
                body = self.ledger.plan(active["plan_id"])
                self.plan = Plan.from_json(body) if body else None
        if self.actuator is None or not d.emergency_actions:
            return
        if self.plan is not None and self.plan.incident == d.incident:
            return
        ns = self.feed.namespace
        try:
            self.actuator.observe_config(ns or self.actuator.kube.namespace, time.time())
            plan = self.actuator.plan(d, list(self.pilot.snapshots), ns, first_page_t=active["opened_at_s"])
        except KubeError as exc:
            self.log.error("planning failed: the cluster's API", error=str(exc))
            return
        self.plan = plan
        # baselines of the recovery signals from before the page (minus two minutes: onset precedes the page)
        self.baselines = {s.name: verify.baseline(list(self.observed), s, d.t - 120.0)
                          for s in verify.signals(d.incident)}
        self.recovered_streak = 0
        self.store.set_plan(iid, plan.id, {"plan_id": plan.id, "incident": plan.incident, "actions": [
            {"id": a.id, "kind": a.kind, "target": a.target.ref(), "dry_run": a.dry_run.model_dump() if a.dry_run
             else None, "guard": a.guard.model_dump() if a.guard else None} for a in plan.actions],
            "manual": plan.manual})
        self.log.info("plan", incident_id=iid, plan_id=plan.id, actions=[a.kind for a in plan.actions])
        wait = " — awaiting approval: " + ", ".join(f"{a.kind} {a.id}" for a in plan.actions) \
            if self.mode == "approve" and plan.actions else ""
        self.notify(iid, "plan", f"plan {plan.id}: {', '.join(a.kind for a in plan.actions) or 'manual steps only'}"
                    f" ({self.mode} mode){wait}", {"plan_id": plan.id, "actions": [a.id for a in plan.actions]})

    def _act(self, iid: str) -> None:
        p, act = self.plan, self.actuator
        if p is None or act is None or self.mode == "propose":
            return
        approved: set[str] = set()
        if self.mode == "approve":
            decisions = self.store.decisions(p.id)
            for a in p.actions:
                dec = decisions.get(a.id)
                if dec and dec["decision"] == "rejected" and a.status in PENDING:
                    a.status, a.result = "blocked", f"rejected by {dec['actor']}"
                    self.store.event(iid, "action", "watch", {"action_id": a.id, "kind": a.kind, "status": "blocked",
                                                              "result": a.result})
                    self.metrics.actions.labels("rejected").inc()
            approved = {a for a, dec in decisions.items() if dec["decision"] == "approved"}
            pending = {a.id for a in p.actions if a.status in PENDING and a.id in approved}
        else:
            pending = {a.id for a in p.actions if a.status in PENDING}
        if not pending:
            return
        age = time.time() - (self.last_wall or 0.0)
        act.execute(p, approved=approved, recheck=self.recheck, diagnosis_age_s=age, only=pending)
        self.ledger.save_plan(p.id, p.incident, p.to_json())
        executed = False
        for a in p.actions:
            if a.id not in pending:
                continue
            self.store.event(iid, "action", act.actor, {"action_id": a.id, "kind": a.kind, "target": a.target.ref(),
                                                        "status": a.status, "result": a.result,
                                                        "guard": a.guard.model_dump() if a.guard else None})
            self.metrics.actions.labels(a.status).inc()
            self.log.info("action", incident_id=iid, action_id=a.id, kind=a.kind, status=a.status)
            self.notify(iid, "action", f"{a.kind} {a.target.ref()}: {a.status}", {"action_id": a.id,
                                                                                  "status": a.status})
            executed = executed or a.status == "executed"
        if executed:
            self.store.set_status(iid, "mitigating", "watch", "emergency action executed")

    def _refresh_counts(self) -> None:
        for status, n in self.store.counts().items():
            self.metrics.incidents.labels(status).set(n)

    # ---- reconcile ----------------------------------------------------------------------------------
    def reconcile(self) -> list[dict[str, Any]]:
        """Executions with an intent and no result: landed → recorded as executed; else the key is released."""
        act = self.actuator
        out: list[dict[str, Any]] = []
        rows = self.ledger._exec("SELECT idempotency_key, action_id FROM executions WHERE status = 'started'")
        if not rows or act is None:
            return out
        plans = [json.loads(b) for (b,) in self.ledger._exec("SELECT body FROM plans ORDER BY created_at")]
        for key, action_id in rows:
            body = next((pl for pl in reversed(plans) if any(a["id"] == action_id for a in pl["actions"])), None)
            if body is None:
                self.ledger.release(key)
                out.append({"key": key, "outcome": "released", "why": "no plan holds this action"})
                continue
            plan = Plan.from_json(body)
            a = next(x for x in plan.actions if x.id == action_id)
            try:
                landed = execute.handler(a).landed(act.kube, a)
            except KubeError as exc:
                self.log.error("reconcile: cannot read the target; intent kept", key=key, error=str(exc))
                continue
            if landed:
                self.ledger.finish(key, "executed", {"reconciled": "the write landed before the restart"})
                self.ledger.start_cooldown(a.kind, a.target.ref(), act.policy.cooldown(a.kind), time.time())
                a.status, a.result = "executed", {"reconciled": "landed before the restart"}
            else:
                self.ledger.release(key)
                a.status, a.result = "dry_run", None
            self.ledger.save_plan(plan.id, plan.incident, plan.to_json())
            outcome = "executed" if landed else "released"
            self.ledger.audit("reconcile", plan.id, a.id, "reconciled", {"key": key, "outcome": outcome})
            inc = self.store._rows("SELECT id FROM incidents WHERE plan_id = ?", (plan.id,))
            if inc:
                self.store.event(inc[0][0], "action", "reconcile", {"action_id": a.id, "kind": a.kind,
                                                                    "status": outcome, "key": key,
                                                                    "result": "intent reconciled after a restart"})
                if landed:
                    self.store.set_status(inc[0][0], "mitigating", "reconcile", "action landed before the restart")
            self.log.info("intent reconciled", key=key, outcome=outcome)
            out.append({"key": key, "outcome": outcome})
        return out
