"""The product does what its drill proves: `serve` (approve mode, the default policy, a human approving every
approvable action through the HTTP API) on the simulated fleet ends each of the 8 incidents as `drill --act` on the
same seed does — the same incident name, the same executed actions, recovered, one incident, and a postmortem that
names both."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.service.conftest import API, APPROVE, auth, write_config
from tests.testkit import wait_for

from llm_oncall.actions.ledger import Ledger
from llm_oncall.drills import act as drill_act
from llm_oncall.drills.runner import DRILL_INCIDENTS
from llm_oncall.incidents import IncidentStore
from llm_oncall.postmortem.write import write_postmortem
from llm_oncall.service.app import Service
from llm_oncall.service.config import load
from llm_oncall.service.observability import Log

SEED = 7


class Approver(threading.Thread):
    """A human at the console: approves what the plan shows approvable, leaves what the guard blocks, and checks
    that every 202 gets an outcome."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.accepted: dict[str, str] = {}
        self.refused: dict[str, str] = {}

    def run(self) -> None:
        with httpx.Client(timeout=10) as c:
            while not self.stop.is_set():
                for inc in c.get(f"{self.url}/api/v1/incidents", headers=auth(API)).json():
                    if inc["status"] in ("resolved", "mitigated") or not inc.get("plan_id"):
                        continue
                    full = c.get(f"{self.url}/api/v1/incidents/{inc['id']}", headers=auth(API)).json()
                    for a in (full.get("plan") or {}).get("actions", []):
                        if a["id"] in self.accepted or a["id"] in self.refused or a["status"] != "dry_run":
                            continue
                        if not (a.get("guard") or {}).get("approvable"):
                            continue
                        r = c.post(f"{self.url}/api/v1/actions/{a['id']}/approve", headers=auth(APPROVE),
                                   json={"by": "alice"})
                        (self.accepted if r.status_code == 202 else self.refused)[a["id"]] = r.text
                time.sleep(0.05)


def _serve(incident: str, tmp: Path) -> dict[str, Any]:
    cfg = load(write_config(tmp, source={"sim": {"seed": SEED, "fault": incident}}, mode="approve", policy=None,
                            interval="0.1s"))
    svc = Service(cfg, Log("error")).start()
    approver = Approver(svc.url)
    approver.start()
    try:
        def settled() -> bool:
            incs = svc.store.incidents()
            if not incs:
                return False
            inc = svc.store.get(incs[-1]["id"]) or {}
            helped = [e for e in inc.get("timeline", []) if e["kind"] == "verification"
                      and e["detail"].get("action_id")]
            return inc.get("status") in ("mitigated", "resolved") and bool(helped)

        wait_for(settled, 120, f"{incident}: served, recovered and its actions verified")
    finally:
        approver.stop.set()
        approver.join(5)
        svc.stop()
    store, ledger = IncidentStore(cfg.db), Ledger(cfg.db)
    try:
        incs = store.incidents()
        plans = {i["id"]: ledger.plan(i["plan_id"]) for i in incs if i.get("plan_id")}
        timelines = {i["id"]: store.timeline(i["id"]) for i in incs}
    finally:
        store.close()
        ledger.close()
    return {"incidents": incs, "plans": plans, "timelines": timelines, "db": cfg.db, "accepted": approver.accepted,
            "refused": approver.refused}


def _ref(t: dict[str, str]) -> str:
    return f"{t['kind']}/{t['namespace']}/{t['name']}" if t.get("namespace") else f"{t['kind']}/{t['name']}"


@pytest.mark.parametrize("incident", DRILL_INCIDENTS)
def test_serve_ends_each_incident_as_its_drill(incident: str, tmp_path: Path) -> None:
    drill = drill_act.run_act(incident, SEED).to_json()
    served = _serve(incident, tmp_path)
    incs = served["incidents"]
    assert len(incs) == 1, [(i["incident"], i["status"]) for i in incs]
    inc = incs[0]
    assert drill["recovered"], drill
    assert inc["incident"] == drill["diagnosed"] == incident
    tl = served["timelines"][inc["id"]]
    assert inc["status"] in ("mitigated", "resolved"), inc
    assert any(e["kind"] == "verification" and e["detail"].get("recovered_at") for e in tl), "no recovery"
    executed = sorted((a["kind"], _ref(a["target"])) for a in served["plans"][inc["id"]]["actions"]
                      if a["status"] == "executed")
    drilled = sorted((a["kind"], a["target"]) for a in drill["actions"] if a["status"] == "executed")
    assert executed == drilled
    # every 202 was followed by an outcome on the timeline
    outcomes = {e["detail"]["action_id"]: e["detail"]["status"] for e in tl if e["kind"] == "action"}
    assert set(served["accepted"]) <= set(outcomes), (served["accepted"], outcomes)
    # no renamed incident, no second plan
    assert {e["detail"].get("incident") for e in tl if e["kind"] == "diagnosis"} <= {incident, "unknown"}
    assert sum(1 for e in tl if e["kind"] == "plan") == 1
    pm = write_postmortem(served["db"], inc["id"], tmp_path / "pm")
    md = (tmp_path / "pm" / "postmortem.md").read_text(encoding="utf-8")
    assert f"`{incident}`" in md
    for kind, _ in executed:
        assert kind in md
    assert "without a human in the loop" not in md and "alice" in md
    assert pm is not None
