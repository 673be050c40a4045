"""`drill --act`: the on-call loop of `serve` (respond/responder.py) on the simulator's virtual clock. It plans,
guards (auto mode, the drill policy), executes the runbook's emergency fix against the simulator's Kubernetes API
through lightkube, verifies recovery and reverts what harmed, writing the same incident record `serve` writes.

The fleet, its API server and the client live in this process; the API runs on 127.0.0.1 over HTTP, so the
actions go through exactly the code that talks to a real cluster. Times are the fleet's virtual clock on the
simulator's epoch (t = 0 is 2026-01-01T00:00:00Z), so a seeded drill writes the same record every time apart from
the incident id's random suffix. The injected fault (the ground truth the loop never reads) goes to the telemetry
notes only, for the scorer and the postmortem's drill footnote.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_oncall.actions import verify
from llm_oncall.actions.guard import DRILL_POLICY, Mode, Policy
from llm_oncall.actions.kube import Kube
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action
from llm_oncall.actions.run import Actuator
from llm_oncall.drills.manual import Human, ManualApprover
from llm_oncall.drills.runner import INTERVAL_S, DrillLoop, DrillResult, run_one
from llm_oncall.incidents import IncidentStore
from llm_oncall.postmortem.telemetry import TelemetryLog
from llm_oncall.respond import Case, Responder
from llm_oncall.respond.responder import Predictor
from llm_oncall.respond.twin import Twin
from llm_oncall.sim import FaultSpec, Fleet, FleetConfig, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

ACTOR = "drill-autopilot"
AFTER_ACTION_S = 900.0
"""How long a drill waits for recovery after acting."""
RECOVERED_SCRAPES = 2
"""Consecutive scrapes with the user-facing symptoms back before `seconds_to_slo` counts them back."""


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
    seconds_to_slo: float | None = None
    """When the user-facing symptoms (TTFT p99, ITL p99, errors: actions/verify.py) were back within their baseline
    or SLO for RECOVERED_SCRAPES rounds after acting, from onset; None: not within the drill. Recovery
    (`seconds_to_recovery`) needs these *and* the incident's own recovery signal."""
    seconds_to_resolution: float | None = None
    """When the incident was resolved (no page for a few rounds), from onset; recovery may come first."""
    manual_seconds_to_recovery: float | None = None
    """The same incident worked by a simulated on-call human (drills/manual.py), seconds from onset."""
    manual_decision_s: float | None = None
    """That human's page → approval (acknowledge, triage, decide)."""
    twin: dict[str, Any] | None = None
    """The twin's forecast for the executed plan (`simulate`): respond/twin.py."""

    @property
    def predicted_seconds_to_recovery(self) -> float | None:
        """The twin's predicted time to recovery from onset: its estimate of the fault's age at plan time plus its
        predicted seconds from the plan's action to recovery (None: no recovery predicted, or no twin)."""
        whole = (self.twin or {}).get("plan") or {}
        v = whole.get("predicted_seconds_from_onset")
        return float(v) if isinstance(v, int | float) else None

    def twin_json(self) -> dict[str, Any]:
        """Prediction against observation, from onset and from the action."""
        whole = (self.twin or {}).get("plan") or {}
        after = whole.get("predicted_seconds_to_recovery")
        observed_after = (round(self.drill.onset + self.seconds_to_recovery - self.acted_at, 1)
                          if self.seconds_to_recovery is not None and self.acted_at is not None
                          and self.drill.onset is not None else None)
        pred = self.predicted_seconds_to_recovery

        def err(p: float | None, o: float | None) -> float | None:
            return round(abs(p - o) / o, 3) if p is not None and o is not None and o > 0 else None
        return {"predicted_seconds_to_recovery": pred,
                "predicted_seconds_after_action": after,
                "observed_seconds_after_action": observed_after,
                "prediction_error": err(pred, self.seconds_to_recovery),
                "prediction_error_after_action": err(after, observed_after),
                "twin": self.twin}

    @property
    def correct(self) -> bool:
        return self.drill.correct

    def to_json(self) -> dict[str, Any]:
        out = self.drill.to_json()
        out.update({"actions": self.actions, "recovered": self.recovered,
                    "seconds_to_recovery": self.seconds_to_recovery,
                    "manual_seconds_to_recovery": self.manual_seconds_to_recovery,
                    "manual_decision_s": self.manual_decision_s,
                    "seconds_to_resolution": self.seconds_to_resolution,
                    "seconds_to_slo": self.seconds_to_slo,
                    "acted_at": self.acted_at,
                    "seconds_to_first_action": (round(self.acted_at - self.drill.onset, 1)
                                                if self.acted_at is not None and self.drill.onset is not None
                                                else None), "plan_id": self.plan.get("id")})
        if self.twin is not None:
            out.update(self.twin_json())
        if self.incident_id is not None:
            out["incident_id"] = self.incident_id
        if self.postmortem is not None:
            out["postmortem"] = self.postmortem
        return out


def prediction_summary(results: Sequence[ActResult]) -> dict[str, Any]:
    """The twin's prediction error over drills: |predicted − observed| / observed seconds to recovery, from onset
    and from the action. A drill where neither recovered nor was predicted to is a hit (error 0); one where only one
    side recovered is a miss, counted as error 1 (100 %)."""
    def errors(key: str, pred: str, obs: str) -> list[float]:
        out = []
        for r in results:
            if r.twin is None:
                continue
            j = r.twin_json()
            if j[key] is not None:
                out.append(float(j[key]))
            elif j[pred] is None and j[obs] is None:
                out.append(0.0)
            else:
                out.append(1.0)
        return out
    onset = errors("prediction_error", "predicted_seconds_to_recovery", "observed_seconds_after_action")
    after = errors("prediction_error_after_action", "predicted_seconds_after_action",
                   "observed_seconds_after_action")
    return {"drills": len(onset),
            "median_prediction_error": round(statistics.median(onset), 3) if onset else None,
            "median_prediction_error_after_action": round(statistics.median(after), 3) if after else None,
            "within_30pct": sum(1 for e in onset if e <= 0.3)}


def _summary(a: Action) -> dict[str, Any]:
    v = a.verification
    return {**a.brief(), "runbook_action": a.runbook_action, "why": a.why, "result": a.result,
            "verification": v.model_dump() if v else None, **({"rung": a.params["rung"]} if "rung" in a.params else {})}


def run_act(incident: str, seed: int, policy: Policy = DRILL_POLICY, interval_s: float = INTERVAL_S,
            workdir: Path | None = None, record: Path | None = None, mode: Mode = "auto",
            approver: Callable[[IncidentStore, Responder], None] | None = None, wait_s: float = 0.0,
            cfg: FleetConfig | None = None, fault: FaultSpec | None = None,
            watch_s: float | None = None, params: Mapping[str, Any] | None = None,
            simulate: bool = False, twin: Predictor | None = None) -> ActResult:
    """`record`: the SQLite file of the incident record (store, ledger, telemetry), else a temporary one.
    `approver` (approve mode): called after every round, as a human at the console would be; `wait_s`: how much
    longer than usual the drill watches for the fix (a human who decides later); `watch_s`: run exactly this long
    after the planned onset, whatever happens (two runs compared side by side see the same window). `simulate`: each
    plan is tried on the twin first (respond/twin.py); the result carries its prediction (`twin`: another predictor
    in its place)."""
    if cfg is None:
        cfg, fault = scenario(incident, seed, params=dict(params or {}))
    fleet = Fleet(cfg, seed=seed, fault=fault)
    cluster = KubeCluster(fleet)
    server = KubeApiServer(cluster).start()
    tmp = tempfile.TemporaryDirectory(prefix="llm-oncall-drill-")
    db = record if record is not None else Path(tmp.name) / "record.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)  # a record of an earlier run of the same drill

    def clock() -> float:
        return cfg.epoch + fleet.now

    store, ledger, telemetry = IncidentStore(db, clock=clock), Ledger(db, clock=clock), TelemetryLog(db)
    if record is None:
        # A throwaway record (deleted with the drill): commits need not wait for the disk. The same rows are
        # written; only SQLite's fsync per commit goes.
        for c in (store, ledger, telemetry):
            c.db.execute("PRAGMA synchronous=OFF")
    if fault is not None and fault.params.get("variant") == "repeat":
        seed_repeat_history(ledger, fleet, policy, clock())
    try:
        kc = server.write_kubeconfig(Path(workdir or tmp.name) / f"kubeconfig-{incident}")
        actuator = Actuator(Kube(kc), ledger, policy, mode=mode, actor=ACTOR, clock=clock, sleep=lambda s: None)
        drill = DrillLoop(fleet, incident, interval_s, lock=cluster.lock)
        responder = Responder(drill.source, interval_s, store, ledger, actuator, mode, clock=clock,
                              telemetry=telemetry, namespace=cfg.namespace, actor=ACTOR, pilot=drill.pilot,
                              twin=twin if twin is not None else Twin(interval_s) if simulate else None)
        telemetry.note("drill", {"incident": incident, "seed": seed})
        return _loop(fleet, drill, responder, seed, cfg.epoch, approver, wait_s, watch_s)
    finally:
        gt = fleet.ground_truth
        telemetry.note("ground_truth", {"incident": gt.incident, "onset": None if gt.onset is None
                                        else cfg.epoch + gt.onset, "pods": list(gt.pods)})
        for c in (store, ledger, telemetry):
            c.close()
        server.stop()
        tmp.cleanup()


def seed_repeat_history(ledger: Ledger, fleet: Fleet, policy: Policy, now: float) -> None:
    """The repeat-offender drill's history: each node of the fleet already had N-1 GPU incidents (the policy's N)
    within the policy's window, as the store would remember them."""
    rep = policy.repeat_offender
    for node in fleet.nodes():
        for i in range(rep.incidents - 1):
            at = now - (i + 1) * rep.days * 86_400.0 / (rep.incidents + 1)
            ledger.record_gpu_incident(node, "0", f"gpu-ecc@earlier-{i}", at, "reset_gpu")


def _loop(fleet: Fleet, drill: DrillLoop, responder: Responder, seed: int, epoch: float,
          approver: Callable[[IncidentStore, Responder], None] | None, wait_s: float = 0.0,
          watch_s: float | None = None) -> ActResult:
    """Rounds until the incident that acted has recovered and its actions are verified (or the window ends)."""
    planned = fleet.fault.at if fleet.fault is not None else 300.0
    end = planned + (watch_s if watch_s is not None else 300.0 + wait_s + AFTER_ACTION_S)
    green_since: float | None = None
    slo_back: float | None = None
    # A human who decides later (wait_s > 0) is not credited with a lull: the drill watches until the decision
    # is due and every planned incident has recovered, and the recovery counted is the one that lasted (the users'
    # rule held from it to the end of the watch). A storm that pauses before it forms is still a storm.
    users_green_since: float | None = None
    while fleet.now < end - 1e-9:
        acting = _served(responder)
        if watch_s is None and acting is None and drill.answer is None and fleet.now >= planned + 300.0:
            break  # no named page in the drill's window: nothing to act on
        d = responder.round()
        if d is not None:
            drill.note(d)
        if acting is not None and acting.acted_at is not None and slo_back is None and responder.pilot.features:
            # The user-facing symptoms alone (actions/verify.py, the rule recovery also needs) back for
            # RECOVERED_SCRAPES rounds.
            red = not verify.slo_back(responder.pilot.features[-1].values, acting.incident)
            green_since = None if red else (green_since if green_since is not None else fleet.now)
            if green_since is not None and fleet.now - green_since >= (RECOVERED_SCRAPES - 1) * drill.interval_s:
                slo_back = green_since
        if wait_s > 0 and (served := _served(responder)) is not None and responder.pilot.features:
            red = not verify.slo_back(responder.pilot.features[-1].values, served.incident)
            users_green_since = None if red else (users_green_since if users_green_since is not None else fleet.now)
        if approver is not None:
            approver(responder.store, responder)
        if watch_s is None and acting is not None and acting.recovered_at is not None and acting.verified:
            if wait_s <= 0:
                break
            pending = [c for c in (responder.cases or {}).values() if c.plan is not None and c.recovered_at is None]
            if fleet.now >= planned + wait_s and not pending and users_green_since is not None:
                break
    acting = _served(responder)
    onset = fleet.ground_truth.onset
    result = drill.result(seed, until=drill.answer[0] if drill.answer is not None else None)
    plan = acting.plan if acting is not None else None
    recovered_at = acting.recovered_at - epoch if acting is not None and acting.recovered_at is not None else None
    if wait_s > 0 and recovered_at is not None:
        # the recovery that lasted: none if the users were red at the end, else the start of their last green run
        recovered_at = None if users_green_since is None else max(recovered_at, users_green_since)
    resolved_at = None
    if acting is not None:
        row = responder.store.get(acting.id, timeline=False) or {}
        resolved_at = row["resolved_at_s"] - epoch if row.get("resolved_at_s") is not None else None
        if wait_s > 0 and resolved_at is not None:
            # it resolved, then the users were red again: the resolution that counts is the one that lasted
            resolved_at = None if users_green_since is None else max(resolved_at, users_green_since)
    return ActResult(drill=result, actions=[_summary(a) for a in (plan.actions if plan else [])],
                     recovered=recovered_at is not None,
                     seconds_to_recovery=(round(recovered_at - onset, 1)
                                          if recovered_at is not None and onset is not None else None),
                     acted_at=acting.acted_at - epoch if acting is not None and acting.acted_at is not None else None,
                     plan=plan.to_json() if plan else {}, audit=responder.ledger.audit_trail(),
                     incident_id=acting.id if acting is not None else None,
                     seconds_to_resolution=(round(resolved_at - onset, 1)
                                            if resolved_at is not None and onset is not None else None),
                     seconds_to_slo=round(slo_back - onset, 1) if slo_back is not None and onset is not None else None,
                     twin=plan.twin if plan is not None else None)


def _served(responder: Responder) -> Case | None:
    """The first incident the loop planned for (the drill's), open or resolved."""
    cases = list((responder.cases or {}).values()) + list(responder.resolved)
    planned = sorted((c for c in cases if c.plan is not None), key=lambda c: c.opened_at)
    return planned[0] if planned else None


def manual_baseline(incident: str, seed: int, cfg: FleetConfig | None = None, fault: FaultSpec | None = None,
                    human: Human | None = None, params: Mapping[str, Any] | None = None
                    ) -> tuple[float | None, float]:
    """The manual baseline, once (`drill --act` and `drill --suite N --act` both use it): the same seeded incident
    worked through the loop in approve mode by the simulated human → (seconds from onset to recovery or None, the
    human's page → approval delay). A human who comes after the incident went away by itself (nothing executed)
    is credited with waiting: its resolution time."""
    delay = (human or Human()).delay_s(incident, seed)
    m = run_act(incident, seed, cfg=cfg, fault=fault, mode="approve", approver=ManualApprover(delay), wait_s=delay,
                params=params)
    if m.seconds_to_recovery is not None:
        return m.seconds_to_recovery, delay
    if not any(a["status"] == "executed" for a in m.actions):
        return m.seconds_to_resolution, delay
    return None, delay


@dataclass(frozen=True)
class Job:
    incident: str
    seed: int
    out: Path | None = None
    """Write the incident record and its postmortem under this directory."""
    manual: bool = False
    """Also run the manual baseline (drills/manual.py) on the same seeded incident."""
    params: tuple[tuple[str, str], ...] = ()
    """Fault parameters (e.g. the gpu-ecc `variant`)."""
    simulate: bool = False
    """Try the plan on the twin first: the result carries its prediction."""


def run_job(job: Job) -> ActResult:
    r = run_act(job.incident, job.seed, record=job.out / "record.db" if job.out is not None else None,
                params=dict(job.params), simulate=job.simulate)
    if job.out is not None and r.incident_id is not None:
        from llm_oncall.postmortem.write import write_postmortem

        r.postmortem = write_postmortem(job.out / "record.db", r.incident_id, job.out).to_json()
    if job.manual:
        manual, delay = manual_baseline(job.incident, job.seed, params=dict(job.params))
        r.manual_seconds_to_recovery = manual
        r.manual_decision_s = round(delay, 1)
    return r


def run_many(jobs: Sequence[Job], workers: int | None = None,
             progress: Callable[[ActResult], None] | None = None) -> list[ActResult]:
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    if workers <= 1:
        out = []
        for job in jobs:
            r = run_job(job)
            if progress:
                progress(r)
            out.append(r)
        return out
    results = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for r in pool.map(run_job, jobs):
            if progress:
                progress(r)
            results.append(r)
    return results


__all__ = ["ActResult", "run_act", "run_many", "run_one"]
