"""`drill --act`: the autopilot plans, guards (auto mode, the drill policy), executes the runbook's emergency fix
against the simulator's Kubernetes API through lightkube, and verifies recovery on the same telemetry.

The fleet, its API server and the client live in this process; the API runs on 127.0.0.1 over HTTP, so the
actions go through exactly the code that talks to a real cluster. Time is the fleet's virtual clock.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_oncall.actions import verify
from llm_oncall.actions.guard import DRILL_POLICY, Policy
from llm_oncall.actions.kube import Kube
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, Plan
from llm_oncall.actions.run import Actuator
from llm_oncall.drills.record import DrillRecorder
from llm_oncall.drills.runner import INTERVAL_S, DrillLoop, DrillResult, run_one
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

AFTER_ACTION_S = 900.0
"""How long a drill waits for recovery after acting."""
RECOVERED_SCRAPES = 2
"""Consecutive scrapes with the incident's signal back before it counts as recovered."""


@dataclass
class ActResult:
    drill: DrillResult
    actions: list[dict[str, Any]] = field(default_factory=list)
    recovered: bool = False
    seconds_to_recovery: float | None = None
    acted_at: float | None = None
    plan: dict[str, Any] = field(default_factory=dict)
    audit: list[dict[str, Any]] = field(default_factory=list)
    incident_id: str | None = None
    """The incident in the record (`record=`), when the drill paged."""
    postmortem: dict[str, Any] | None = None

    @property
    def correct(self) -> bool:
        return self.drill.correct

    def to_json(self) -> dict[str, Any]:
        out = self.drill.to_json()
        out.update({"actions": self.actions, "recovered": self.recovered,
                    "seconds_to_recovery": self.seconds_to_recovery, "manual_seconds_to_recovery": None,
                    "acted_at": self.acted_at, "plan_id": self.plan.get("id")})
        if self.incident_id is not None:
            out["incident_id"] = self.incident_id
        if self.postmortem is not None:
            out["postmortem"] = self.postmortem
        return out


def _summary(a: Action) -> dict[str, Any]:
    v = a.verification
    return {"id": a.id, "kind": a.kind, "target": a.target.ref(), "status": "dry_run" if a.status == "dry_run"
            else a.status, "runbook_action": a.runbook_action, "why": a.why,
            "dry_run": a.dry_run.model_dump() if a.dry_run else None,
            "guard": a.guard.model_dump() if a.guard else None,
            "result": a.result, "verification": v.model_dump() if v else None}


def run_act(incident: str, seed: int, policy: Policy = DRILL_POLICY, interval_s: float = INTERVAL_S,
            workdir: Path | None = None, record: Path | None = None) -> ActResult:
    """`record`: an SQLite file for the incident record (incident store, plan, telemetry; drills/record.py)."""
    cfg, fault = scenario(incident, seed)
    fleet = Fleet(cfg, seed=seed, fault=fault)
    rec = DrillRecorder(record, fleet, incident, seed) if record is not None else None
    cluster = KubeCluster(fleet)
    server = KubeApiServer(cluster).start()
    tmp = tempfile.TemporaryDirectory(prefix="llm-oncall-drill-")
    try:
        kc = server.write_kubeconfig(Path(workdir or tmp.name) / f"kubeconfig-{incident}")
        kube = Kube(kc)
        ledger = Ledger(":memory:", clock=lambda: fleet.now)
        actuator = Actuator(kube, ledger, policy, mode="auto", actor="drill-autopilot", clock=lambda: fleet.now,
                            sleep=lambda s: None)
        result = _loop(incident, seed, fleet, cluster, actuator, interval_s, policy, rec)
        result.incident_id = rec.incident_id if rec is not None else None
        return result
    finally:
        server.stop()
        tmp.cleanup()
        if rec is not None:
            rec.close()


def _loop(incident: str, seed: int, fleet: Fleet, cluster: KubeCluster, actuator: Actuator, interval_s: float,
          policy: Policy, rec: DrillRecorder | None = None) -> ActResult:
    """Drill until the first named page after onset (the scorer's answer), act on it, then watch for recovery."""
    drill = DrillLoop(fleet, incident, interval_s)
    ns = fleet.cfg.namespace
    planned = fleet.fault.at if fleet.fault is not None else 300.0
    end = planned + 300.0 + AFTER_ACTION_S
    observed: list[dict[str, Any]] = []
    plan: Plan | None = None
    acted_at: float | None = None
    baselines: dict[str, float | None] = {}
    before: dict[str, Any] = {}
    streak = 0
    recovered_at: float | None = None
    verified = False
    while fleet.now < end - 1e-9:
        if plan is None and drill.answer is None and fleet.now >= planned + 300.0:
            break  # no named page in the drill's window: nothing to act on
        with cluster.lock:
            batch = drill.source.collect()
        d_now = drill.step(batch)
        if rec is not None:
            rec.scrape(drill.pilot.features[-1], drill.pilot.snapshots[-1], d_now)
        obs = verify.observe(drill.pilot.features[-1], drill.pilot.snapshots[-1])
        observed.append(obs)
        actuator.observe_config(ns, fleet.now)
        if plan is None and drill.answer is not None:
            first_page, d = drill.answer
            # baselines from before the page (minus two minutes: the incident may have started a little earlier)
            baselines = {s.name: verify.baseline(observed, s, first_page - 120.0) for s in verify.signals(d.incident)}
            plan = actuator.plan(d, list(drill.pilot.snapshots), ns, first_page_t=first_page)
            actuator.execute(plan, diagnosis_age_s=0.0)
            acted_at = fleet.now
            if rec is not None:
                rec.planned(plan)
            before = obs
            continue
        if plan is None or acted_at is None:
            continue
        if verify.recovered(incident, obs, baselines):
            streak += 1
            if streak >= RECOVERED_SCRAPES and recovered_at is None:
                recovered_at = fleet.now - (RECOVERED_SCRAPES - 1) * interval_s
                if rec is not None:
                    rec.recovered(recovered_at, {"signals": {s.name: s.value(obs) for s in
                                                             verify.signals(incident)}})
        else:
            streak = 0
        if not verified and fleet.now >= acted_at + policy.verify_window_s:
            verified = True
            for a in plan.actions:
                if a.status == "executed":
                    a.verification = verify.judge(plan.incident, before, obs, baselines,
                                                  observed[-2] if len(observed) > 1 else None)
                    actuator.ledger.audit(actuator.actor, plan.id, a.id, "verify", a.verification.model_dump())
                    if a.verification.verdict == "harmful":
                        a.verification.detail += "; " + actuator.revert(plan, a)
            if rec is not None:
                rec.verified(plan)
        if recovered_at is not None and verified:
            break
    if rec is not None:
        rec.finished(recovered_at is not None)
    onset = fleet.ground_truth.onset
    result = drill.result(seed, until=drill.answer[0] if drill.answer is not None else None)
    return ActResult(drill=result, actions=[_summary(a) for a in (plan.actions if plan else [])],
                     recovered=recovered_at is not None,
                     seconds_to_recovery=(round(recovered_at - onset, 1)
                                          if recovered_at is not None and onset is not None else None),
                     acted_at=acted_at, plan=plan.to_json() if plan else {},
                     audit=actuator.ledger.audit_trail())


def _run_args(args: tuple[str, int] | tuple[str, int, Path]) -> ActResult:
    """A job with a third element writes the incident record and its postmortem under that directory."""
    if len(args) == 2:
        return run_act(args[0], args[1])
    from llm_oncall.postmortem.write import write_postmortem

    out = args[2]
    r = run_act(args[0], args[1], record=out / "record.db")
    if r.incident_id is not None:
        r.postmortem = write_postmortem(out / "record.db", r.incident_id, out).to_json()
    return r


def run_many(jobs: Sequence[tuple[str, int] | tuple[str, int, Path]], workers: int | None = None,
             progress: Callable[[ActResult], None] | None = None) -> list[ActResult]:
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers <= 1:
        out = []
        for job in jobs:
            r = _run_args(job)
            if progress:
                progress(r)
            out.append(r)
        return out
    results = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for r in pool.map(_run_args, jobs):
            if progress:
                progress(r)
            results.append(r)
    return results


__all__ = ["ActResult", "run_act", "run_many", "run_one"]
