"""A small hand-made incident record (store + plan + telemetry) for fast postmortem tests: no simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_oncall.actions.ledger import Ledger
from llm_oncall.incidents import IncidentStore
from llm_oncall.postmortem.telemetry import TelemetryLog

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z
PAGE_T = 300.0
ACT_T = 300.0
RECOVERED_T = 345.0


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return EPOCH + self.t


def make(path: Path, summary: str = "KV-cache capacity exhausted: arrivals ×2", evidence_text: str = "queue 40",
         pods: list[str] | None = None, approver: str | None = None) -> str:
    """Scrapes every 15 s from 15 to 480 s; symptom red 285-390 s; a page at 300 s with a scale-out executed at
    once; the queue back at 345 s; resolved at 480 s.  The incident id."""
    clock = Clock()
    store = IncidentStore(path, clock=clock)
    ledger = Ledger(path, clock=clock)
    log = TelemetryLog(path)
    iid = None
    scope_pods = pods or []
    diagnosis: dict[str, Any] = {
        "incident": "kv-capacity", "confidence": 0.9, "severity": "page", "summary": summary, "title": summary,
        "scope": {"pods": scope_pods, "nodes": [], "revision": None}, "root_cause": "Load surge <b>×2</b>",
        "evidence": [{"signal": "waiting_per_pod", "value": 40.0, "baseline": 0.0, "source": "avg(waiting) | x",
                      "text": evidence_text}],
        "ruled_out": [{"incident": "prefix-cache-drop", "why": "hit rate steady"}],
        "symptoms": [{"signal": "ttft_p99", "value": 2.0, "baseline": 0.2, "red": True}],
        "runbook": "kv-capacity", "long_term": []}
    for i in range(1, 33):
        t = 15.0 * i
        clock.t = t
        red = 285.0 <= t <= 390.0
        fleet = {"ttft_p99": 2.0 if red else 0.2, "waiting_per_pod": 40.0 if 285.0 <= t < 345.0 else 0.5,
                 "kv_max": 0.95 if red else 0.5, "arrival_rate": 20.0 if t >= 270.0 else 10.0,
                 "error_share": 0.1 if red else 0.0, "symptom": red}
        per_pod = {p: {"ttft_p99": (3.0 if red and p in scope_pods else 0.2), "up": True} for p in
                   ["pod-a", "pod-b", "pod-c"]}
        sev = "page" if t >= PAGE_T and red else "none"
        log.record(EPOCH + t, fleet, per_pod, ("kv-capacity" if sev == "page" else "healthy", sev))
        if t == PAGE_T:
            iid = store.open_incident("kv-capacity", summary, actor="test")
            store.set_diagnosis(iid, diagnosis, actor="test")
            action = {"id": "a-1", "kind": "scale_out", "target": {"kind": "Deployment", "namespace": "llm",
                                                                   "name": "vllm"},
                      "why": "8 → 10 replicas", "dry_run": {"ok": True, "detail": {"replicas": 10}},
                      "guard": {"allowed": True, "why": "auto mode"}, "status": "executed",
                      "result": {"replicas": 10}, "revert": {"replicas": 8},
                      "verification": {"verdict": "helped", "signal": "waiting_per_pod", "before": 40.0,
                                       "after": 0.5, "baseline": 0.0, "detail": "recovered"}}
            ledger.save_plan("p-1", "kv-capacity", {"id": "p-1", "incident": "kv-capacity", "diagnosis": diagnosis,
                                                    "actions": [action], "manual": []})
            store.set_plan(iid, "p-1", {"plan_id": "p-1", "incident": "kv-capacity", "actions": [action]},
                           actor="test")
            if approver:
                store.decide(iid, "p-1", "a-1", "approved", approver)
            store.event(iid, "action", "test", {"action_id": "a-1", "kind": "scale_out",
                                                "target": "Deployment/llm/vllm", "status": "executed"})
            store.set_status(iid, "mitigating", "test", "emergency action executed")
        if t == RECOVERED_T + 15.0 and iid is not None:
            store.set_status(iid, "mitigated", "test", "recovery signal back")
            store.event(iid, "verification", "test", {"verdict": "helped", "recovered_at": EPOCH + RECOVERED_T,
                                                      "signals": {"waiting_per_pod": 0.5}})
    assert iid is not None
    store.set_status(iid, "resolved", "test", "done")
    for c in (store, ledger, log):
        c.close()
    return iid
