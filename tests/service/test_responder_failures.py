"""What `serve` got wrong before the one responder, each as a test: a hung group's restart capped as if it took
capacity, approvals of blocked actions answered 202 then dropped, approvals on a mitigated incident taken, a restart's
cold caches renaming the incident, typos in the policy accepted, and a second fault during recovery not paging."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.service.conftest import API, APPROVE, auth, write_config
from tests.testkit import wait_for
from typer.testing import CliRunner

from llm_oncall.actions.guard import Policy
from llm_oncall.actions.model import Plan
from llm_oncall.cli import app as cli_app
from llm_oncall.drills import act as drill_act
from llm_oncall.incidents import IncidentStore
from llm_oncall.respond import Responder
from llm_oncall.sim import FaultSpec
from llm_oncall.sim import faults as sim_faults

OVERRIDE = "override-token-0123456789"


def _plan(svc: Any) -> dict[str, Any]:
    def planned() -> bool:
        incs = svc.store.incidents()
        return bool(incs and incs[0].get("plan_id"))

    wait_for(planned, 60, "an incident with a plan")
    inc = svc.store.incidents()[0]
    body = svc.ledger.plan(inc["plan_id"])
    assert body is not None
    return {"incident": inc, "actions": {a["kind"]: a for a in body["actions"]}}


def _timeline(svc: Any, iid: str) -> list[dict[str, Any]]:
    return list(svc.store.timeline(iid))


def test_restarting_a_hung_group_takes_no_capacity(start_service: Any) -> None:
    """4 pods, one TP group of 2 hung: the restart deletes 2 of 4 Ready pods, but the hung ones serve nothing."""
    svc = start_service(source={"sim": {"pods": 4, "seed": 7, "fault": "engine-hang"}}, mode="approve", policy=None)
    p = _plan(svc)
    restart = p["actions"]["restart_group"]
    assert restart["guard"]["approvable"], restart["guard"]
    assert restart["params"]["not_serving"], restart["params"]
    r = httpx.post(f"{svc.url}/api/v1/actions/{restart['id']}/approve", headers=auth(APPROVE), json={"by": "alice"})
    assert r.status_code == 202, r.text
    iid = p["incident"]["id"]
    wait_for(lambda: any(e["kind"] == "action" and e["detail"]["action_id"] == restart["id"]
                         for e in _timeline(svc, iid)), 30, "the restart's outcome")
    outcome = next(e["detail"] for e in _timeline(svc, iid) if e["kind"] == "action")
    assert outcome["status"] == "executed", outcome


def test_a_blocked_action_is_409_unless_overridden_with_a_reason(start_service: Any, tmp_path: Path) -> None:
    tight = tmp_path / "tight.yaml"
    tight.write_text("caps: {delete_max_fraction: 0.05}\n")
    svc = start_service(source={"sim": {"pods": 8, "seed": 7, "fault": "gpu-ecc"}}, mode="approve",
                        policy=str(tight), auth={"webhook": ["webhook-token-0123456789"], "api": [API],
                                                 "approve": [APPROVE], "override": [OVERRIDE]})
    p = _plan(svc)
    scale = p["actions"]["evict_pods"]
    assert not scale["guard"]["approvable"] and "serving pods" in scale["guard"]["why"], scale["guard"]
    r = httpx.post(f"{svc.url}/api/v1/actions/{scale['id']}/approve", headers=auth(APPROVE), json={"by": "alice"})
    assert r.status_code == 409 and "serving pods" in r.text and "override" in r.text, r.text
    r = httpx.post(f"{svc.url}/api/v1/actions/{scale['id']}/approve", headers=auth(OVERRIDE), json={"by": "bob"})
    assert r.status_code == 409 and "reason" in r.text, r.text
    r = httpx.post(f"{svc.url}/api/v1/actions/{scale['id']}/approve", headers=auth(OVERRIDE),
                   json={"by": "bob", "reason": "the bad GPU answers wrong: take its pod out"})
    assert r.status_code == 202, r.text
    iid = p["incident"]["id"]
    wait_for(lambda: any(e["kind"] == "action" and e["detail"]["action_id"] == scale["id"]
                         for e in _timeline(svc, iid)), 30, "the override's outcome")
    tl = _timeline(svc, iid)
    outcome = next(e["detail"] for e in tl if e["kind"] == "action" and e["detail"]["action_id"] == scale["id"])
    assert outcome["status"] == "executed" and outcome["guard"]["overridden"].startswith("bob"), outcome
    assert any(e["kind"] == "approval" and e["detail"].get("override") for e in tl)
    assert any(row["step"] == "override" for row in svc.ledger.audit_trail()), "the override is audited"


def test_an_approval_on_a_mitigated_incident_is_409(start_service: Any) -> None:
    svc = start_service(source={"sim": {"pods": 8, "seed": 7, "fault": "kv-capacity"}}, mode="approve", policy=None)
    p = _plan(svc)
    r = httpx.post(f"{svc.url}/api/v1/actions/{p['actions']['scale_out']['id']}/approve", headers=auth(APPROVE),
                   json={"by": "alice"})
    assert r.status_code == 202, r.text
    iid = p["incident"]["id"]
    wait_for(lambda: (svc.store.get(iid, timeline=False) or {}).get("status") in ("mitigated", "resolved"), 60,
             "the scale-out to mitigate the incident")
    cap = p["actions"]["gateway_cap_max_tokens"]
    r = httpx.post(f"{svc.url}/api/v1/actions/{cap['id']}/approve", headers=auth(APPROVE), json={"by": "alice"})
    assert r.status_code == 409 and ("mitigated" in r.text or "resolved" in r.text), r.text


def test_a_bodyless_approval_with_x_approver_works(start_service: Any) -> None:
    svc = start_service(source={"sim": {"pods": 8, "seed": 7, "fault": "kv-capacity"}}, mode="approve", policy=None)
    p = _plan(svc)
    r = httpx.post(f"{svc.url}/api/v1/actions/{p['actions']['scale_out']['id']}/approve",
                   headers={**auth(APPROVE), "X-Approver": "carol"})
    assert r.status_code == 202 and "carol" in r.text, r.text


def test_misspelt_policy_keys_are_refused_by_serve_check(tmp_path: Path) -> None:
    for body, key in (("caps: {delete_max_fractoin: 0.5}\n", "delete_max_fractoin"),
                      ("auto: {engine-hangg: [restart_group]}\n", "engine-hangg"),
                      ("auto: {engine-hang: [restart]}\n", "restart"),
                      ("cooldown_s: {scale_ot: 60}\n", "scale_ot"),
                      ("verify_windw_s: 60\n", "verify_windw_s")):
        (tmp_path / "policy.yaml").write_text(body)
        cfg = write_config(tmp_path, mode="approve")
        (tmp_path / "policy.yaml").write_text(body)  # write_config writes a valid one
        out = CliRunner().invoke(cli_app, ["serve", "--config", str(cfg), "--check"])
        assert out.exit_code == 2 and key in out.output, (body, out.output)
        with pytest.raises(ValueError, match=key):
            Policy.load(tmp_path / "policy.yaml")


def test_the_restarts_cold_caches_are_an_expected_effect_not_a_new_incident(tmp_path: Path) -> None:
    r = drill_act.run_act("engine-hang", 7, record=tmp_path / "record.db")
    assert r.recovered
    store = IncidentStore(tmp_path / "record.db")
    try:
        incs = store.incidents()
        assert [i["incident"] for i in incs] == ["engine-hang"]
        tl = store.timeline(incs[0]["id"])
    finally:
        store.close()
    effects = [e["detail"] for e in tl if e["kind"] == "effect"]
    assert effects and all(e["kind"] == "restart_group" for e in effects), effects
    assert sum(1 for e in tl if e["kind"] == "plan") == 1


def test_a_different_fault_during_recovery_still_pages(tmp_path: Path) -> None:
    """An engine hang is fixed by a restart; while it recovers a GPU starts returning wrong answers (not a side
    effect of a restart): a second incident, gpu-ecc, opens and is planned for."""
    injected: list[float] = []

    def second_fault(store: IncidentStore, responder: Responder) -> None:
        fleet = responder.source.fleet  # type: ignore[attr-defined]
        acted = [c for c in (responder.cases or {}).values() if c.acted]
        if acted and not injected:
            sim_faults.install(fleet, FaultSpec("gpu-ecc", at=fleet.now + 30.0))
            injected.append(fleet.now)

    drill_act.run_act("engine-hang", 7, record=tmp_path / "record.db", approver=second_fault)
    assert injected, "the hang was never acted on"
    store = IncidentStore(tmp_path / "record.db")
    try:
        names = sorted(i["incident"] for i in store.incidents())
    finally:
        store.close()
    assert names == ["engine-hang", "gpu-ecc"], names


def test_a_policy_change_replans_the_open_incident(start_service: Any, tmp_path: Path) -> None:
    """The eviction is blocked by a tight cap; the on-call loosens the policy file: the waiting action is guarded
    again on the next round and becomes approvable, with no restart."""
    policy = tmp_path / "tight.yaml"
    policy.write_text("caps: {delete_max_fraction: 0.05}\n")
    svc = start_service(source={"sim": {"pods": 8, "seed": 7, "fault": "gpu-ecc"}}, mode="approve",
                        policy=str(policy))
    p = _plan(svc)
    evict = p["actions"]["evict_pods"]
    assert not evict["guard"]["approvable"], evict["guard"]
    policy.write_text("caps: {delete_max_fraction: 0.5}\n")
    st = policy.stat()
    os.utime(policy, (st.st_atime, st.st_mtime + 5))  # a coarse clock must still see a change

    def approvable() -> bool:
        body = svc.ledger.plan(p["incident"]["plan_id"]) or {}
        return any(a["id"] == evict["id"] and a["guard"]["approvable"] for a in body.get("actions", []))

    wait_for(approvable, 30, "the eviction guarded again under the new policy")
    tl = _timeline(svc, p["incident"]["id"])
    assert any(e["kind"] == "plan" and e["detail"].get("why") == "the policy changed" for e in tl)
    r = httpx.post(f"{svc.url}/api/v1/actions/{evict['id']}/approve", headers=auth(APPROVE), json={"by": "alice"})
    assert r.status_code == 202, r.text


def test_act_apply_on_a_served_plan_joins_the_incident(start_service: Any) -> None:
    """An on-call applies the served plan from a terminal (`act apply --plan ID --db serve's db`): the approval and
    the outcome go on the served incident's timeline, and the loop takes the action as executed (no repeat)."""
    svc = start_service(source={"sim": {"pods": 8, "seed": 7, "fault": "kv-capacity"}}, mode="approve", policy=None)
    p = _plan(svc)
    scale = p["actions"]["scale_out"]
    res = CliRunner().invoke(cli_app, ["act", "apply", "--plan", p["incident"]["plan_id"], "--approve", scale["id"],
                                       "--db", str(svc.cfg.db), "--kubeconfig", str(svc.feed.kubeconfig),
                                       "--max-age", "1e9", "--json"])  # the plan is on the fleet's clock
    assert res.exit_code == 0, res.output
    iid = p["incident"]["id"]
    tl = _timeline(svc, iid)
    assert any(e["kind"] == "action" and e["actor"] == "cli" and e["detail"]["status"] == "executed" for e in tl), tl
    wait_for(lambda: (svc.store.get(iid, timeline=False) or {}).get("status") in ("mitigated", "resolved"), 60,
             "the served incident to be mitigated by the applied action")
    executes = [row for row in svc.ledger.audit_trail() if row["step"] == "execute" and row["action_id"] == scale["id"]]
    assert len(executes) == 1, executes


def test_a_resolved_incident_hands_the_replicas_back_to_the_autoscaler(tmp_path: Path) -> None:
    """kv-capacity's fix raised the HPA's floor; when the incident is resolved the floor goes back, so the HPA owns
    the replicas again (the runbook's "restore the floor once recovered")."""
    r = drill_act.run_act("kv-capacity", 7, record=tmp_path / "record.db")
    assert r.incident_id is not None and r.seconds_to_resolution is not None, r.to_json()
    scale = next(a for a in Plan.from_json(r.plan).actions if a.kind == "scale_out")
    assert scale.status == "executed" and scale.target.kind == "HorizontalPodAutoscaler"
    assert scale.revert is not None and scale.result["minReplicas"] > scale.revert["replicas"], scale
    given_back = [e["detail"] for e in IncidentStore(tmp_path / "record.db").timeline(r.incident_id)
                  if e["kind"] == "action" and e["detail"].get("action_id") == scale.id
                  and e["detail"].get("status") == "reverted"]
    assert len(given_back) == 1 and "the autoscaler's floor restored" in given_back[0]["result"], given_back

