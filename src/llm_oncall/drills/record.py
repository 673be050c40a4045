"""The incident record of a `drill --act` run, written the way the on-call loop writes it (service/watch.py): an
incident in the store opened at the first page, its diagnosis changes, the plan (also saved in the actions ledger),
every action, the verifications, the status changes, and the telemetry of every scrape (postmortem/telemetry.py).

Times are the fleet's virtual clock on the simulator's epoch (t = 0 is 2026-01-01T00:00:00Z), so a seeded drill
writes the same record every time apart from the incident id's random suffix.  The injected fault (the ground
truth the autopilot never reads) goes to the telemetry notes only, for the postmortem's drill footnote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Plan
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.diagnosis.features import Features
from llm_oncall.incidents import IncidentStore
from llm_oncall.postmortem.telemetry import TelemetryLog
from llm_oncall.signals.snapshot import Snapshot
from llm_oncall.sim import Fleet

ACTOR = "drill-autopilot"


class DrillRecorder:
    def __init__(self, path: Path, fleet: Fleet, incident: str, seed: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            stale.unlink(missing_ok=True)  # a record of an earlier run of the same drill
        self.fleet = fleet
        self.epoch = fleet.cfg.epoch
        self.store = IncidentStore(path, clock=self.now)
        self.ledger = Ledger(path, clock=self.now)
        self.log = TelemetryLog(path)
        self.log.note("drill", {"incident": incident, "seed": seed})
        self.incident_id: str | None = None

    def now(self) -> float:
        return self.epoch + self.fleet.now

    def close(self) -> None:
        gt = self.fleet.ground_truth
        self.log.note("ground_truth", {"incident": gt.incident, "onset": None if gt.onset is None
                                       else self.epoch + gt.onset, "pods": list(gt.pods)})
        for c in (self.store, self.ledger, self.log):
            c.close()

    def scrape(self, f: Features, snap: Snapshot | None, d: Diagnosis) -> None:
        """After every diagnosis: the telemetry, then the incident (opened on a page, its diagnosis kept)."""
        self.log.record_scrape(self.epoch + f.t, f.values, snap, (d.incident, d.severity), epoch=self.epoch)
        if not d.pages and self.incident_id is None:
            return
        if self.incident_id is None:
            self.incident_id = self.store.open_incident(d.incident, d.title or d.summary, actor=ACTOR)
        if d.pages:
            self.store.set_diagnosis(self.incident_id, d.to_json(), actor=ACTOR)

    def planned(self, plan: Plan) -> None:
        if self.incident_id is None:
            return
        self.ledger.save_plan(plan.id, plan.incident, plan.to_json())
        self.store.set_plan(self.incident_id, plan.id, {"plan_id": plan.id, "incident": plan.incident, "actions": [
            {"id": a.id, "kind": a.kind, "target": a.target.ref(), "dry_run": a.dry_run.model_dump() if a.dry_run
             else None, "guard": a.guard.model_dump() if a.guard else None} for a in plan.actions],
            "manual": plan.manual}, actor=ACTOR)
        executed = False
        for a in plan.actions:
            self.store.event(self.incident_id, "action", ACTOR, {
                "action_id": a.id, "kind": a.kind, "target": a.target.ref(), "status": a.status, "result": a.result,
                "guard": a.guard.model_dump() if a.guard else None})
            executed = executed or a.status == "executed"
        if executed:
            self.store.set_status(self.incident_id, "mitigating", ACTOR, "emergency action executed")

    def verified(self, plan: Plan) -> None:
        if self.incident_id is None:
            return
        self.ledger.save_plan(plan.id, plan.incident, plan.to_json())
        for a in plan.actions:
            if a.verification is not None:
                self.store.event(self.incident_id, "verification", ACTOR, {"action_id": a.id, "kind": a.kind,
                                                                          **a.verification.model_dump()})

    def recovered(self, since: float, detail: dict[str, Any]) -> None:
        if self.incident_id is None:
            return
        self.store.set_status(self.incident_id, "mitigated", ACTOR, "recovery signal back")
        self.store.event(self.incident_id, "verification", ACTOR, {"verdict": "helped", "recovered_at":
                                                                   self.epoch + since, **detail})

    def finished(self, recovered: bool) -> None:
        if self.incident_id is None:
            return
        if recovered:
            self.store.set_status(self.incident_id, "resolved", ACTOR,
                                  "the drill ended with the recovery signal held and the actions verified")
