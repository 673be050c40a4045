"""One round of the on-call loop, the same for `serve` and `drill --act` (docs/architecture.md):

observe → diagnose → incident (open, join, keep its identity) → plan → guard → approve/execute → verify (revert what
harmed) → resolve.

The clock, the telemetry source, the incident store, the actions ledger, the actuator, the telemetry log and the
notifier are passed in: `serve` runs rounds on the wall clock in a thread behind its HTTP API, a drill runs them on
the simulator's virtual clock. Each incident in the store that is not resolved is a `Case` here (its plan, the
baselines of its recovery signals, the verification state); the store stays the record, so a restart loads the
cases again.

The responder knows its own actions' side effects (actions/effects.yaml): a page they explain while they last
(cold caches after a restart, a rollout) is recorded on the incident that acted as an expected effect; it neither
renames that incident nor opens or plans another. A different diagnosis during recovery is a different fault: it
opens an incident of its own.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from llm_oncall.actions import effects, execute, verify
from llm_oncall.actions.kube import KubeError
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, Plan
from llm_oncall.actions.run import Actuator, sized_steps
from llm_oncall.diagnosis.autopilot import HISTORY, Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.diagnosis.features import Features
from llm_oncall.evidence import nodeproblems, repair
from llm_oncall.incidents import IncidentStore
from llm_oncall.postmortem.telemetry import TelemetryLog
from llm_oncall.respond.history import History
from llm_oncall.respond.nodeproblems import NodeProblemReader
from llm_oncall.signals.snapshot import Snapshot
from llm_oncall.signals.source import Source

PENDING = ("planned", "dry_run")
RECOVERED_ROUNDS = 2
"""Consecutive rounds with the incident's recovery signal back (actions/verify.py) before it counts as mitigated."""
RELAPSE_ROUNDS = 3
"""Consecutive rounds without it before a mitigated incident is open again: recovery is judged on the users' p99s,
and one red scrape of a quantile is noise; a pager that flaps on it trains people to ignore it."""
TELEMETRY_KEPT_S = 3600.0
"""Every round's telemetry is kept an hour (≈ 15 kB a round for 8 pods: 3.5 MB an hour at 15 s) ..."""
INCIDENT_LEAD_S = 1800.0
"""... and for good around each incident, from half an hour before it opened (the baseline, the onset) to half an
hour after it resolved, for incidents of the last INCIDENTS_KEPT_S: what its postmortem charts."""
INCIDENTS_KEPT_S = 30 * 86400.0
UNNAMED = ("unknown", "healthy")


class Log(Protocol):
    def info(self, msg: str, **fields: Any) -> None: ...

    def warning(self, msg: str, **fields: Any) -> None: ...

    def error(self, msg: str, **fields: Any) -> None: ...


class Counters(Protocol):
    """The service's own metrics (service/observability.py); drills count nothing."""

    def count(self, what: str, label: str = "", n: float = 1.0) -> None: ...


class Predictor(Protocol):
    """Tries a new plan on a twin of the fleet (respond/twin.py `Twin`) and puts the prediction on it."""

    def __call__(self, plan: Plan, d: Diagnosis, features: Sequence[Features], snapshots: Sequence[Snapshot],
                 executes: Callable[[Action], bool] | None = None) -> Any: ...


Notify = Callable[[str, str, str, dict[str, Any]], None]
"""(incident id, event, text, detail): event is opened | diagnosis | plan | action | status | effect."""


class _Quiet:
    def info(self, msg: str, **fields: Any) -> None:
        return

    def warning(self, msg: str, **fields: Any) -> None:
        return

    def error(self, msg: str, **fields: Any) -> None:
        return


class _NoCounts:
    def count(self, what: str, label: str = "", n: float = 1.0) -> None:
        return


@dataclass
class Case:
    """An incident the loop serves: its plan and what verifying it needs."""

    id: str
    incident: str
    opened_at: float
    plan: Plan | None = None
    baselines: dict[str, float | None] = field(default_factory=dict)
    before: dict[str, Any] | None = None
    """The recovery signals when the first action executed (the verification's "before")."""
    acted_at: float | None = None
    verified: bool = False
    streak: int = 0
    lost: int = 0
    """Consecutive rounds with the recovery signal lost (after mitigation: RELAPSE_ROUNDS of them reopen)."""
    recovered_at: float | None = None
    """The first round of the first streak of RECOVERED_ROUNDS with the recovery signal back."""
    green: int = 0
    effects_seen: set[str] = field(default_factory=set)
    reverted: set[str] = field(default_factory=set)
    """Executed actions since undone (a harmful one reverted, an autoscaler's floor handed back): their side effects
    end with them and explain no later page."""
    twin_checked: bool = False
    """The twin's prediction has been compared with what happened (once per case)."""

    @property
    def acted(self) -> bool:
        return self.plan is not None and any(a.status == "executed" for a in self.plan.actions)


class Responder:
    def __init__(self, source: Source, interval_s: float, store: IncidentStore, ledger: Ledger,
                 actuator: Actuator | None, mode: str, clock: Callable[[], float] = time.time,
                 log: Log | None = None, telemetry: TelemetryLog | None = None, notify: Notify | None = None,
                 counters: Counters | None = None, namespace: str | None = None, resolve_after: int = 3,
                 replay: bool = False, actor: str = "llm-oncall", pilot: Autopilot | None = None,
                 history: History | None = None, twin: Predictor | None = None) -> None:
        self.source = source
        self.interval_s = interval_s
        self.store = store
        self.ledger = ledger
        self.actuator = actuator
        self.mode = mode
        self.clock = clock
        self.log: Log = log or _Quiet()
        self.telemetry = telemetry
        self.node_problems = NodeProblemReader(actuator.kube) if actuator is not None else None
        """Node conditions and Events (NPD, GPU-health agents) read through the actuator's Kubernetes client."""
        self.notify: Notify = notify or (lambda *a: None)
        self.counters: Counters = counters or _NoCounts()
        self.namespace = namespace
        self.resolve_after = resolve_after
        self.replay = replay
        """Prometheus answers a window of history each round: the autopilot is rebuilt from it every round."""
        self.actor = actor
        self.pilot = pilot or Autopilot(interval_s)
        self.history = history
        """Where each round's raw telemetry goes, for a warm restart (respond/history.py)."""
        self.twin = twin
        """Each new plan tried on a twin first (respond/twin.py): its prediction on every action. Off unless given
        (`serve` with `twin: true`, drills): a prediction costs seconds of CPU."""
        self.last: Diagnosis | None = None
        self.last_at: float | None = None
        self.observed: deque[dict[str, Any]] = deque(maxlen=400)
        self.cases: dict[str, Case] | None = None
        self.resolved: deque[Case] = deque(maxlen=8)
        """Recently resolved cases: their actions' side effects may still show (and must not open an incident)."""
        self.pruned_at = 0.0
        self.is_leader: Callable[[], bool] = lambda: True
        """With leader election a follower diagnoses every round (its history stays warm for a takeover) but opens
        no incident, plans, notifies or acts: that is the leader's."""

    # ---- one round ----------------------------------------------------------------------------------
    def round(self) -> Diagnosis | None:
        d = self.diagnose()
        if self.actuator is not None:
            # The router ConfigMap's versions as they go by: a later config rollback returns to one seen before onset.
            self.actuator.observe_config(self.namespace or self.actuator.kube.namespace, self.clock())
        if d is not None and self.is_leader():
            self.handle(d)
        return d

    def diagnose(self) -> Diagnosis | None:
        batch = self.source.collect()
        failed = sum(1 for o in batch.observations if o.page is None)
        if failed:
            self.counters.count("scrape_failures", n=failed)
        for p in batch.problems:
            self.log.warning("source problem", problem=p)
        if self.replay:
            pilot = Autopilot(self.interval_s, self.pilot.registry, scrapes_kept=400)
            pilot.observe(batch)
            d: Diagnosis | None = None
            for t in pilot.store.times()[1:]:
                d = pilot.step(at=t)
            self.pilot = pilot
        else:
            self.pilot.observe(batch)
            if self.node_problems is not None:  # what NPD / GPU-health agents put on the Nodes, this round
                self.pilot.replace_findings(nodeproblems.PREFIX, self.node_problems.read(self.clock()))
            if self.history is not None:
                self.history.append(self.clock(), batch)
            d = self.pilot.step() if len(self.pilot.store.times()) >= 2 else None
        if d is not None:
            self.last, self.last_at = d, self.clock()
            if self.pilot.features:
                self.observed.append(verify.observe(self.pilot.features[-1], self.pilot.snapshots[-1]))
                self._record(d)
        return d

    def warm(self) -> int:
        """Replay the rounds the history kept (a restart): the autopilot's baselines, heartbeats and windows are
        what they were, so a hang in progress is still a hang on the first round. Nothing is acted on or recorded
        while replaying; the rounds replayed are returned."""
        if self.history is None or self.replay:
            return 0
        batches = self.history.load(self.clock() - HISTORY * self.interval_s)
        for batch in batches:
            self.pilot.observe(batch)
            if len(self.pilot.store.times()) >= 2:
                self.last = self.pilot.step()
                self.observed.append(verify.observe(self.pilot.features[-1], self.pilot.snapshots[-1]))
        return len(batches)

    def recheck(self) -> Diagnosis | None:
        """A fresh diagnosis for the actuator when the one it was given is too old."""
        d = self.diagnose()
        self.log.info("diagnosis re-checked before execution", incident=d.incident if d else None)
        return d if d is not None and d.pages else None

    def _record(self, d: Diagnosis) -> None:
        """The round's telemetry for postmortems (impact, charts) and a warm restart, on the store's clock."""
        if self.telemetry is None:
            return
        now, snap = self.clock(), self.pilot.snapshots[-1]
        self.telemetry.record_scrape(now, self.pilot.features[-1].values, snap, (d.incident, d.severity),
                                     epoch=now - snap.t)
        if now - self.pruned_at >= 600.0:
            self.telemetry.prune(now - TELEMETRY_KEPT_S, keep=[
                (i["opened_at_s"] - INCIDENT_LEAD_S, (i["resolved_at_s"] or now) + INCIDENT_LEAD_S)
                for i in self.store.incidents() if i["opened_at_s"] >= now - INCIDENTS_KEPT_S])
            self.pruned_at = now

    # ---- incidents ----------------------------------------------------------------------------------
    def open_cases(self) -> dict[str, Case]:
        """The incidents not yet resolved, as the store has them: the ones this loop opened, those an alert opened
        (Alertmanager's webhook) and, after a restart, those it served before."""
        if self.cases is None:
            self.cases = {}
        rows = [r for r in self.store.incidents() if r["status"] != "resolved"]
        live = {r["id"] for r in rows}
        for iid in [i for i in self.cases if i not in live]:
            self.resolved.append(self.cases.pop(iid))  # resolved elsewhere
        for row in sorted(rows, key=lambda r: r["opened_at_s"]):
            if row["id"] in self.cases:
                continue
            c = Case(row["id"], row["incident"], row["opened_at_s"])
            full = self.store.get(row["id"], timeline=False) or {}
            body = self.ledger.plan(full["plan_id"]) if full.get("plan_id") else None
            if body is not None:
                c.plan = Plan.from_json(body)
                c.baselines = self._baselines(c.plan.incident, c.plan.diagnosed_at)
                c.acted_at = c.plan.created_at if c.acted else None
            self.cases[c.id] = c
        return self.cases

    def handle(self, d: Diagnosis) -> None:
        cases = self.open_cases()
        now = self.clock()
        newest = max(cases.values(), key=lambda c: c.opened_at) if cases else None
        if d.pages:
            served = self._route(d, newest, now)
            if served is not None:
                served.green = 0
                if self.store.set_diagnosis(served.id, d.to_json(), actor=self.actor):
                    self.log.info("diagnosis", incident_id=served.id, incident=d.incident,
                                  confidence=round(d.confidence, 3))
                    self.notify(served.id, "diagnosis", f"diagnosis: {d.incident} ({d.confidence:.0%}): {d.summary}",
                                {"incident": d.incident, "confidence": d.confidence, "diagnosis": d.to_json()})
                if d.incident not in UNNAMED:
                    served.incident = d.incident
                self._plan(served, d)
        for c in list(cases.values()):
            self._next_step(c, d)
            self._act(c)
            self._verify(c, d)
            self._resolve(c, d)
        for c in self.resolved:
            if c.acted and not c.verified:
                self._verify(c, d)  # resolved before its verification window ended: the actions are judged still

    def _route(self, d: Diagnosis, newest: Case | None, now: float) -> Case | None:
        """The case a page belongs to: None when it is an expected effect of the loop's own action."""
        own = self._own_effect(d, now)
        if own is not None and (newest is None or d.incident != newest.incident):
            case, action = own
            self._expected_effect(case, action, d)
            return None
        if newest is None:
            return self._open(d)
        if newest.acted and d.incident not in UNNAMED and d.incident != newest.incident:
            # Not what this incident was acted on, and not a side effect of the action: a different fault.
            c = self._open(d)
            self.store.event(newest.id, "note", self.actor, {"detail": f"a different fault paged during recovery: "
                                                             f"{d.incident} ({c.id})"})
            return c
        return newest

    def _open(self, d: Diagnosis) -> Case:
        iid = self.store.open_incident(d.incident, d.title or d.summary, actor=self.actor)
        self.log.info("incident opened", incident_id=iid, incident=d.incident)
        self.notify(iid, "opened", f"{d.incident} paged: {d.title or d.summary}", {"diagnosis": d.to_json()})
        row = self.store.get(iid, timeline=False) or {}
        c = Case(iid, d.incident, float(row.get("opened_at_s") or self.clock()))
        assert self.cases is not None
        self.cases[iid] = c
        return c

    def _own_effect(self, d: Diagnosis, now: float) -> tuple[Case, Action] | None:
        """The loop's own executed action (of any case, resolved ones included) whose side effects explain `d`."""
        for c in sorted(self._acting_cases(), key=lambda c: -(c.acted_at or 0.0)):
            assert c.plan is not None
            for a in c.plan.actions:
                if a.status != "executed" or c.acted_at is None or a.id in c.reverted:
                    continue
                e = effects.of(a.kind)
                if d.incident in e.explains and now - c.acted_at <= e.lasts_s and d.incident != c.incident:
                    return c, a
        return None

    def _acting_cases(self) -> list[Case]:
        cases = list((self.cases or {}).values()) + list(self.resolved)
        return [c for c in cases if c.acted]

    def _expected_effect(self, c: Case, a: Action, d: Diagnosis) -> None:
        if d.incident in c.effects_seen:
            return
        c.effects_seen.add(d.incident)
        e = effects.of(a.kind)
        text = f"expected effect of {a.kind} {a.target.ref()}: {d.incident} ({'; '.join(e.effects)})"
        self.store.event(c.id, "effect", self.actor, {"incident": d.incident, "action_id": a.id, "kind": a.kind,
                                                      "detail": text, "summary": d.summary})
        self.log.info("expected effect of an own action", incident_id=c.id, diagnosis=d.incident, action=a.kind)
        self.notify(c.id, "effect", text, {"incident": d.incident, "action_id": a.id})

    # ---- plan and act -------------------------------------------------------------------------------
    def _plan(self, c: Case, d: Diagnosis) -> None:
        if self.actuator is None or not d.emergency_actions or d.incident in UNNAMED:
            return
        if c.plan is not None and (c.plan.incident == d.incident or c.acted):
            return
        try:
            stalled = self.pilot.features[-1].pod_sets if self.pilot.features else {}
            idle = set(stalled.get("stalled_groups", ())) | set(stalled.get("crashloop", ()))
            plan = self.actuator.plan(d, list(self.pilot.snapshots), self.namespace, first_page_t=c.opened_at,
                                      not_serving=sorted(idle))
        except KubeError as exc:
            self.log.error("planning failed: the cluster's API", error=str(exc))
            return
        if self.twin is not None:
            self._predict(plan, d)
        c.plan = plan
        c.baselines = self._baselines(d.incident, d.t)
        c.streak = 0
        self.store.set_plan(c.id, plan.id, plan_event(plan), actor=self.actor)
        self.log.info("plan", incident_id=c.id, plan_id=plan.id, actions=[a.kind for a in plan.actions])
        blocked = [a for a in plan.actions if a.guard is not None and not a.guard.approvable]
        wait = " — awaiting approval: " + ", ".join(f"{a.kind} {a.id}" for a in plan.actions
                                                    if a not in blocked) \
            if self.mode == "approve" and len(blocked) < len(plan.actions) else ""
        self.notify(c.id, "plan", f"plan {plan.id}: {', '.join(a.kind for a in plan.actions) or 'manual steps only'}"
                    f" ({self.mode} mode){wait}", {"plan_id": plan.id, "actions": [a.id for a in plan.actions],
                                                   "plan": plan_event(plan)})

    def _predict(self, plan: Plan, d: Diagnosis) -> None:
        """The plan tried on the twin: what it predicts goes on each action and on the plan (advice only: a twin
        that fails leaves the plan as it was)."""
        assert self.twin is not None
        try:
            self.twin(plan, d, list(self.pilot.features), list(self.pilot.snapshots), lambda a: a.would_execute)
        except Exception as exc:  # a prediction is advice: the plan goes on without it
            self.log.warning("twin prediction failed", error=f"{type(exc).__name__}: {exc}")
            return
        self.ledger.save_plan(plan.id, plan.incident, plan.to_json())
        self.counters.count("twin_predictions")

    def _check_prediction(self, c: Case) -> None:
        """Predicted against observed seconds from the first action to recovery: a large miss goes on the
        timeline (respond/twin.py `miss`), once per incident — at recovery, or when the prediction's time (×2 and
        a few scrapes) has passed without one."""
        p = c.plan
        if c.twin_checked or p is None or p.twin is None or c.acted_at is None:
            return
        whole = p.twin.get("plan") or {}
        predicted = whole.get("predicted_seconds_to_recovery")
        horizon = float(p.twin.get("horizon_s") or 0.0)
        observed = c.recovered_at - c.acted_at if c.recovered_at is not None else None
        waited = self.clock() - c.acted_at
        from_twin = verify.prediction_miss(predicted, observed, horizon, waited)
        if observed is None and from_twin is None and waited < horizon:
            return  # no recovery yet, and not yet late for the prediction: undecided
        c.twin_checked = True
        detail = {"predicted_seconds_to_recovery": predicted, "observed_seconds_to_recovery":
                  None if observed is None else round(observed, 1)}
        if from_twin is None:
            said = f"recovery {predicted:.0f} s after the action" if predicted is not None else \
                f"no recovery within {horizon:.0f} s"
            seen = f"{observed:.0f} s" if observed is not None else f"none after {waited:.0f} s"
            self.store.event(c.id, "note", self.actor, {**detail, "twin": "hit",
                                                        "detail": f"twin: predicted {said}; observed {seen}"})
            return
        self.store.event(c.id, "note", self.actor, {**detail, "twin": "miss", "detail": f"twin miss: {from_twin}"})
        self.log.warning("twin prediction missed", incident_id=c.id, detail=from_twin)
        self.counters.count("twin_misses")

    def _baselines(self, incident: str, t: float) -> dict[str, float | None]:
        """The recovery signals' baselines from before the page (minus two minutes: onset precedes the page)."""
        return {s.name: verify.baseline(list(self.observed), s, t - 120.0) for s in verify.signals(incident)}

    def replan(self) -> None:
        """The policy changed: the guard's verdict on every action still waiting is given again."""
        act = self.actuator
        if act is None:
            return
        for c in self.open_cases().values():
            p = c.plan
            if p is None:
                continue
            changed = False
            for a in p.actions:
                if a.status in PENDING or (a.status == "blocked" and a.result == (a.guard.why if a.guard else None)):
                    old = a.guard.model_dump() if a.guard else None
                    a.guard = act.guard(p, a)
                    a.status, a.result = "dry_run", None
                    changed = changed or old != a.guard.model_dump()
            if changed:
                self.ledger.save_plan(p.id, p.incident, p.to_json())
                self.store.event(c.id, "plan", self.actor, {**plan_event(p), "why": "the policy changed"})

    def _sync(self, c: Case) -> None:
        """Actions of this plan executed elsewhere (`act apply` on the same store) are taken as executed here."""
        if c.plan is None:
            return
        body = self.ledger.plan(c.plan.id)
        done = {a["id"]: a for a in (body or {}).get("actions", []) if a.get("status") == "executed"}
        first = not c.acted
        for a in c.plan.actions:
            if a.id in done and a.status != "executed":
                a.status, a.result = "executed", done[a.id].get("result")
        if first and c.acted:
            c.acted_at = self.clock()
            c.before = self.observed[-1] if self.observed else None

    def _act(self, c: Case) -> None:
        self._sync(c)
        p, act = c.plan, self.actuator
        if p is None or act is None or self.mode == "propose":
            return
        status = (self.store.get(c.id, timeline=False) or {}).get("status")
        decisions = self.store.decisions(p.id) if self.mode == "approve" else {}
        approved: set[str] = set()
        overrides: dict[str, str] = {}
        for a in p.actions:
            dec = decisions.get(a.id)
            if dec is None or a.status not in PENDING:
                continue
            if dec["decision"] == "rejected":
                a.status, a.result = "blocked", f"rejected by {dec['actor']}"
                self._outcome(c, a)
                self.counters.count("actions", "rejected")
            elif status in ("mitigated", "resolved"):
                a.status, a.result = "blocked", f"refused: the incident is {status} (approved by {dec['actor']})"
                self._outcome(c, a)
            else:
                approved.add(a.id)
                if dec.get("override"):
                    overrides[a.id] = f"{dec['actor']}: {dec['override']}"
        pending = ({a.id for a in p.actions if a.status in PENDING and a.id in approved} if self.mode == "approve"
                   else {a.id for a in p.actions if a.status in PENDING})
        if not pending or status in ("mitigated", "resolved"):
            if self.mode == "approve" and pending:
                self.ledger.save_plan(p.id, p.incident, p.to_json())
            return
        age = self.clock() - (self.last_at or 0.0)
        first = not c.acted
        act.execute(p, approved=approved, recheck=self.recheck, diagnosis_age_s=age, only=pending,
                    overrides=overrides)
        for a in p.actions:
            if a.status in PENDING:  # what the executed ones changed (an alternative no longer needed)
                a.guard = act.guard(p, a)
        self.ledger.save_plan(p.id, p.incident, p.to_json())
        for a in p.actions:
            if a.id in pending:
                self._outcome(c, a)
        if c.acted:
            if first:
                c.acted_at = self.clock()
                c.before = self.observed[-1] if self.observed else None
            self.store.set_status(c.id, "mitigating", self.actor, "emergency action executed")

    def _next_step(self, c: Case, d: Diagnosis) -> None:
        """A scale-out the caps bounded below what the surge needs takes its next step once the last step's
        replicas all serve and the incident has not recovered on the users' rule (actions/run.py next_scale_step);
        the round's _act executes it as it would the plan's first actions."""
        p, act = c.plan, self.actuator
        if p is None or act is None or not c.acted or not self.observed or d.incident != p.incident \
                or not sized_steps(p):
            return
        if (self.store.get(c.id, timeline=False) or {}).get("status") in ("mitigated", "resolved"):
            return
        obs = self.observed[-1]
        if verify.recovered(p.incident, obs, c.baselines):
            return
        ratio, serving = obs.get("arrival_rate_ratio"), obs.get("pods_up")
        up = float(serving) if isinstance(serving, int | float) else None
        arrivals, served = obs.get("arrival_rate"), obs.get("success_rate")
        saturated = None
        if not verify.signal_back(p.incident, obs, c.baselines) and up and isinstance(arrivals, float) \
                and isinstance(served, float):
            saturated = (arrivals, served / up)  # the queue stays: a pod's successes are its capacity now
        a = act.next_scale_step(p, d, list(self.pilot.snapshots), ratio if isinstance(ratio, float) else None,
                                up, self.namespace, saturated)
        if a is None:
            return
        self.store.event(c.id, "note", self.actor, {"action_id": a.id, "detail": f"next scale-out step: {a.why}"})
        self.log.info("scale-out step", incident_id=c.id, plan_id=p.id, action_id=a.id,
                      replicas=a.params.get("replicas"))

    def _outcome(self, c: Case, a: Action) -> None:
        """Every decision on an action ends in an outcome: the timeline, the log, the metrics and the notifiers."""
        self.store.event(c.id, "action", self.actor, {
            "action_id": a.id, "kind": a.kind, "target": a.target.ref(), "status": a.status, "result": a.result,
            "guard": a.guard.model_dump() if a.guard else None})
        self.counters.count("actions", a.status)
        self.log.info("action", incident_id=c.id, action_id=a.id, kind=a.kind, status=a.status)
        why = "" if a.status == "executed" else f" — {a.result if a.result else (a.guard.why if a.guard else '')}"
        self.notify(c.id, "action", f"{a.kind} {a.target.ref()}: {a.status}{why}",
                    {"action_id": a.id, "status": a.status, "result": a.result})
        if a.kind == "hardware_ticket" and a.status == "executed":  # the ticket itself: the notify target
            self.notify(c.id, "hardware_ticket", f"hardware ticket: {a.params.get('summary', a.target.ref())}",
                        {"action_id": a.id, "node": a.params.get("node"), "gpu": a.params.get("gpu"),
                         "rung": a.params.get("rung"), "xids": a.params.get("xids"), "ticket": a.params.get("ticket")})

    # ---- verify and resolve -------------------------------------------------------------------------
    def _verify(self, c: Case, d: Diagnosis) -> None:
        """Mitigated when the incident's recovery signal is back for RECOVERED_ROUNDS rounds (the page may go on:
        demand is still doubled, the capacity now absorbs it), open again when it is lost for RELAPSE_ROUNDS; after
        the policy's verification window every executed action is judged, and one that harmed is reverted."""
        if not c.acted or not self.observed or c.plan is None or c.acted_at == self.clock():
            return  # this round's telemetry was taken before the action: it says nothing of its effect
        obs = self.observed[-1]
        incident = c.plan.incident
        sig = verify.signals(incident)
        ok = verify.recovered(incident, obs, c.baselines)
        c.streak = c.streak + 1 if ok else 0
        c.lost = 0 if ok else c.lost + 1
        status = (self.store.get(c.id, timeline=False) or {}).get("status")
        detail = {s.name: {"value": s.value(obs), "baseline": c.baselines.get(s.name)} for s in sig}
        if c.streak >= RECOVERED_ROUNDS and status in ("open", "mitigating"):
            since = float(obs["t"]) - (RECOVERED_ROUNDS - 1) * self.interval_s
            if c.recovered_at is None:
                c.recovered_at = self.clock() - (RECOVERED_ROUNDS - 1) * self.interval_s
            self.store.set_status(c.id, "mitigated", self.actor,
                                  f"recovery signal and user-facing symptoms back for {c.streak} rounds")
            self.notify(c.id, "status", f"mitigated: {'; '.join(s.doc for s in sig)}", {"status": "mitigated"})
            self.store.event(c.id, "verification", self.actor, {
                "verdict": "helped", "signals": detail, "user_facing": verify.slo_state(obs, incident),
                "recovered_at": c.recovered_at, "since_t": since,
                "detail": "; ".join([*(s.doc for s in sig), "TTFT, ITL and errors within baseline or SLO"])})
        elif status == "mitigated" and c.lost >= RELAPSE_ROUNDS:
            self.store.set_status(c.id, "open", self.actor, f"symptoms back: {incident}")
            self.notify(c.id, "status", f"open again: {incident} symptoms back", {"status": "open"})
            self.store.event(c.id, "verification", self.actor, {"verdict": "relapsed", "signals": detail})
        self._check_prediction(c)
        act = self.actuator
        window = act.policy.verify_window_s if act is not None else 0.0
        if c.verified or c.acted_at is None or self.clock() < c.acted_at + window or act is None:
            return
        c.verified = True
        before = c.before or obs
        previous = self.observed[-2] if len(self.observed) > 1 else None
        for a in c.plan.actions:
            if a.status != "executed":
                continue
            a.verification = verify.judge(incident, before, obs, c.baselines, previous)
            own = act.effect(a)
            if own is not None:  # the action's own check (a rung of the repair ladder): done what it is for?
                ok_own, why_own = own
                a.verification.detail += f"; {a.kind}: {why_own}"
                if not ok_own and a.verification.verdict == "helped":
                    a.verification.verdict = "no_effect"
            self.ledger.audit(act.actor, c.plan.id, a.id, "verify", a.verification.model_dump())
            if a.verification.verdict == "harmful":
                outcome = act.revert(c.plan, a)
                a.verification.detail += "; " + outcome
                if outcome == "reverted":
                    c.reverted.add(a.id)
            self.store.event(c.id, "verification", self.actor, {"action_id": a.id, "kind": a.kind,
                                                                **a.verification.model_dump()})
        self.ledger.save_plan(c.plan.id, c.plan.incident, c.plan.to_json())

    def _resolve(self, c: Case, d: Diagnosis) -> None:
        mine = d.pages and (d.incident == c.incident or d.incident == "unknown")
        if mine or (c.acted and not self._back(c)):
            # Quiet but not back: a fixed pod that restarts is not scraped, so nothing about it pages, and the
            # incident would resolve before the fix took effect. It waits for the recovery signal.
            c.green = 0
            return
        if d.pages and self._own_effect(d, self.clock()) is not None:
            c.green = 0  # the fix's own side effects are still showing
            return
        if self.pilot.features and self.pilot.features[-1].get("symptom") is True:
            # Not paging yet, but the users are not served either (an unexplained symptom pages only once it
            # outlasts a burst): the round is not a quiet one.
            return
        c.green += 1
        status = (self.store.get(c.id, timeline=False) or {}).get("status")
        if status == "mitigating" and not c.acted:
            return
        if c.green >= self.resolve_after and self.store.firing_alerts(c.id) == 0:
            self.store.set_status(c.id, "resolved", self.actor, f"no page for {c.green} rounds and no firing alert")
            self.log.info("incident resolved", incident_id=c.id)
            self.notify(c.id, "status", "resolved", {"status": "resolved"})
            self._hand_back(c)
            self._close_plan(c)
            assert self.cases is not None
            del self.cases[c.id]
            self.resolved.append(c)

    def _close_plan(self, c: Case) -> None:
        """Resolved: what still waited for approval is not needed any more (and can no longer be approved)."""
        p = c.plan
        if p is None or not any(a.status in PENDING for a in p.actions):
            return
        for a in p.actions:
            if a.status in PENDING:
                a.status, a.result = "skipped", "not taken: the incident resolved without it"
        self.ledger.save_plan(p.id, p.incident, p.to_json())

    def _hand_back(self, c: Case) -> None:
        """Resolved: what the fix took from the fleet's owners goes back. An autoscaler's floor the fix raised is
        restored, so the autoscaler owns the replicas again (a scale-out without an autoscaler stays: nothing else
        would scale it back up). A node the GPU repair ladder cordoned serves again once the rung's repair passed
        its own check, where the catalogue says that rung makes the GPU whole (not while it awaits new hardware)."""
        act = self.actuator
        if act is None or c.plan is None:
            return
        for a in c.plan.actions:
            if a.status != "executed":
                continue
            if a.kind == "scale_out" and a.target.kind == "HorizontalPodAutoscaler":
                self._give_back(c, a, "the autoscaler's floor restored")
            elif a.kind == "cordon_node" and (why := self._repaired(c.plan, a)) is not None:
                self._give_back(c, a, f"back in service: {why}")

    def _repaired(self, p: Plan, cordon: Action) -> str | None:
        """Why the node a ladder rung cordoned may serve again, or None."""
        rung = cordon.params.get("rung")
        if not isinstance(rung, str) or not repair.ladder().rung(rung).returns_to_service:
            return None
        fix = repair.ladder().rung(rung).actions[-1]
        node = cordon.params.get("node")
        done = [a for a in p.actions if a.kind == fix and a.status == "executed" and a.params.get("node") == node]
        if not done or self.actuator is None:
            return None
        checks = [self.actuator.effect(a) for a in done]
        if not all(ch is not None and ch[0] for ch in checks):
            return None
        return "; ".join(ch[1] for ch in checks if ch is not None)

    def _give_back(self, c: Case, a: Action, what: str) -> None:
        assert self.actuator is not None and c.plan is not None
        outcome = self.actuator.revert(c.plan, a)
        if outcome == "reverted":
            c.reverted.add(a.id)
        self.store.event(c.id, "action", self.actor, {
            "action_id": a.id, "kind": a.kind, "target": a.target.ref(),
            "status": "reverted" if outcome == "reverted" else "failed", "result": f"{what}: {outcome}"})

    def _back(self, c: Case) -> bool:
        if c.plan is None or not self.observed:
            return True
        return verify.recovered(c.plan.incident, self.observed[-1], c.baselines)

    # ---- reconcile ----------------------------------------------------------------------------------
    def reconcile(self) -> list[dict[str, Any]]:
        """Executions with an intent and no result (the process died between claiming the idempotency key and
        recording the outcome): landed → recorded as executed; else the key is released."""
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
                self.ledger.start_cooldown(a.kind, a.target.ref(), act.policy.cooldown(a.kind), self.clock())
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
        self.cases = None  # reloaded with the reconciled plans
        return out


def plan_event(plan: Plan) -> dict[str, Any]:
    """The plan as the timeline shows it: each action with its dry-run and the guard's verdict."""
    return {"plan_id": plan.id, "incident": plan.incident,
            "actions": [{**a.brief(), "approvable": bool(a.guard and a.guard.approvable)} for a in plan.actions],
            "manual": plan.manual}
