"""The service over real HTTP: the Alertmanager receiver (dedup, resolved, auth, malformed, oversized, store
unavailable), the incidents API, approvals with the approver in the timeline, /healthz and /metrics."""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.service.conftest import API, APPROVE, WEBHOOK, auth, sample, write_config
from tests.testkit import wait_for

from llm_oncall.service.app import Service
from llm_oncall.service.config import ConfigError, load

KV = {"sim": {"pods": 3, "seed": 3, "fault": "kv-capacity", "at": 120}}


def post_alerts(svc: Service, body: Any, token: str = WEBHOOK, **kw: Any) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{svc.url}/api/v1/alerts", content=data, headers={**auth(token),
                      "Content-Type": "application/json"}, timeout=10, **kw)


def executes(svc: Service) -> dict[str, int]:
    """How many times each action was sent to the cluster (the ledger's audit: one `execute` row per call)."""
    out: dict[str, int] = {}
    for row in svc.ledger.audit_trail():
        if row["step"] == "execute":
            out[row["action_id"]] = out.get(row["action_id"], 0) + 1
    return out


def test_sample_resent_100_times_is_one_incident_and_one_execution(start_service: Any) -> None:
    svc = start_service(source=KV)
    body = sample()

    def send(_: int) -> int:
        return post_alerts(svc, body).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(send, range(100)))
    assert codes == [200] * 100
    incidents = svc.store.incidents()
    assert len(incidents) == 1 and incidents[0]["alerts"] == 2
    iid = incidents[0]["id"]
    # the loop diagnoses kv-capacity on the same incident and scales out once (auto, policy: scale_out)
    wait_for(lambda: any(n for n in executes(svc).values()), 60, "the scale-out to execute")
    rounds = svc.watcher.rounds
    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(send, range(100))) == {200}
    wait_for(lambda: svc.watcher.rounds >= rounds + 20, 60, "20 more rounds")
    assert all(n == 1 for n in executes(svc).values()), executes(svc)
    assert len(svc.store.incidents()) == 1
    inc = svc.store.get(iid)
    assert inc is not None and inc["incident"] == "kv-capacity"
    assert any(e["kind"] == "status" and e["detail"]["status"] == "mitigating" for e in inc["timeline"])
    kinds = [e["kind"] for e in inc["timeline"]]
    assert kinds.count("alert") == 2 and "diagnosis" in kinds and "plan" in kinds and "action" in kinds
    executed = [e for e in inc["timeline"] if e["kind"] == "action" and e["detail"]["status"] == "executed"]
    assert len(executed) == 1 and executed[0]["detail"]["kind"] == "scale_out"


def test_resolved_webhook_triggers_nothing(start_service: Any) -> None:
    svc = start_service()  # a healthy fleet, auto mode
    body = sample()
    body["status"] = "resolved"
    for a in body["alerts"]:
        a["status"] = "resolved"
    for _ in range(5):
        r = post_alerts(svc, body)
        assert r.status_code == 200 and r.json()["incident"] is None
    rounds = svc.watcher.rounds
    wait_for(lambda: svc.watcher.rounds >= rounds + 10, 60, "10 rounds")
    assert svc.store.incidents() == []
    assert executes(svc) == {}


def test_auth_roles(start_service: Any) -> None:
    svc = start_service()
    u = svc.url
    r = httpx.post(f"{u}/api/v1/alerts", json=sample())
    assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
    assert post_alerts(svc, sample(), token="not-a-known-token-000").status_code == 401
    assert post_alerts(svc, sample(), token=API).status_code == 403
    assert post_alerts(svc, sample(), token=APPROVE).status_code == 403
    assert httpx.get(f"{u}/api/v1/incidents").status_code == 401
    assert httpx.get(f"{u}/api/v1/incidents", headers=auth(WEBHOOK)).status_code == 403
    assert httpx.get(f"{u}/api/v1/incidents", headers=auth(API)).status_code == 200
    assert httpx.get(f"{u}/api/v1/incidents", headers=auth(APPROVE)).status_code == 200
    assert httpx.post(f"{u}/api/v1/actions/a-1/approve").status_code == 401
    assert httpx.post(f"{u}/api/v1/actions/a-1/approve", headers=auth(API)).status_code == 403
    assert httpx.post(f"{u}/api/v1/actions/a-1/reject", headers=auth(WEBHOOK)).status_code == 403
    assert httpx.get(f"{u}/healthz").status_code == 200
    assert svc.store.incidents() == []  # nothing refused got stored


@pytest.mark.parametrize("body", [
    b"{not json", b"[]", b'"x"', json.dumps({"version": "4"}).encode(),
    json.dumps({**sample(), "version": "3"}).encode(),
    json.dumps({**sample(), "alerts": []}).encode(),
])
def test_malformed_body_is_400(start_service: Any, body: bytes) -> None:
    svc = start_service()
    assert post_alerts(svc, body).status_code == 400
    assert svc.store.incidents() == []


@pytest.mark.parametrize("labels", [
    {"alertname": "X", "bad-name": "v"}, {"alertname": "X", "pod": "a\nb"}, {"alertname": "X", "pod": "v" * 2000},
    {"alertname": 3},
])
def test_invalid_label_values_are_400(start_service: Any, labels: dict[str, Any]) -> None:
    svc = start_service()
    body = sample()
    body["alerts"][1]["labels"] = labels
    r = post_alerts(svc, body)
    assert r.status_code == 400, r.text
    assert "labels" in r.json()["error"]


def test_bad_fingerprint_and_time_are_400(start_service: Any) -> None:
    svc = start_service()
    body = sample()
    body["alerts"][1]["fingerprint"] = "../../etc"
    assert post_alerts(svc, body).status_code == 400
    body = sample()
    body["alerts"][1]["startsAt"] = "yesterday"
    assert post_alerts(svc, body).status_code == 400


def test_oversized_body_is_413(start_service: Any) -> None:
    svc = start_service(max_body_bytes=4096)
    body = sample()
    body["commonAnnotations"] = {"description": "x" * 8000}
    r = post_alerts(svc, body)
    assert r.status_code == 413
    assert post_alerts(svc, sample()).status_code == 200  # a normal one still goes through


def test_store_unavailable_is_503_then_accepted(start_service: Any, tmp_path: Path) -> None:
    svc = start_service()
    other = sqlite3.connect(tmp_path / "incidents.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another writer holds the file: the store cannot take the alert
    try:
        r = post_alerts(svc, sample())
        assert r.status_code == 503 and r.headers.get("Retry-After")
    finally:
        other.execute("ROLLBACK")
        other.close()
    r = post_alerts(svc, sample())  # Alertmanager's re-send
    assert r.status_code == 200 and r.json()["new"] == 2
    assert len(svc.store.incidents()) == 1


def test_approve_mode_waits_for_a_human(start_service: Any) -> None:
    svc = start_service(source=KV, mode="approve")
    wait_for(lambda: bool(svc.store.active() and svc.store.active()["plan_id"]), 60, "an incident with a plan")
    active = svc.store.active()
    assert active is not None
    iid = active["id"]
    inc = httpx.get(f"{svc.url}/api/v1/incidents/{iid}", headers=auth(API)).json()
    actions = {a["kind"]: a["id"] for a in inc["plan"]["actions"]}
    assert "scale_out" in actions
    rounds = svc.watcher.rounds
    wait_for(lambda: svc.watcher.rounds >= rounds + 5, 30, "5 rounds")
    assert executes(svc) == {}  # nothing runs without an approval
    scale = actions["scale_out"]
    r = httpx.post(f"{svc.url}/api/v1/actions/{scale}/approve", headers=auth(APPROVE), json={"by": "alice"})
    assert r.status_code == 202, r.text
    assert httpx.post(f"{svc.url}/api/v1/actions/{scale}/approve", headers=auth(APPROVE)).status_code == 409
    assert httpx.post(f"{svc.url}/api/v1/actions/a-nope/approve", headers=auth(APPROVE)).status_code == 404
    other = [a for k, a in actions.items() if k != "scale_out"]
    for a in other:
        r = httpx.post(f"{svc.url}/api/v1/actions/{a}/reject", headers={**auth(APPROVE), "X-Approver": "bob"})
        assert r.status_code == 202, r.text
    wait_for(lambda: any(e["kind"] == "action" and e["detail"]["status"] == "executed"
                         for e in svc.store.timeline(iid)), 60, "the approved scale-out to execute")
    tl = svc.store.timeline(iid)
    approvals = [e for e in tl if e["kind"] == "approval"]
    assert approvals[0]["actor"].startswith("alice (token:") and approvals[0]["detail"]["decision"] == "approved"
    assert all(e["actor"].startswith("bob (token:") and e["detail"]["decision"] == "rejected" for e in approvals[1:])
    assert len(approvals) == 1 + len(other)
    assert executes(svc) == {scale: 1}
    assert [e["detail"]["action_id"] for e in tl if e["kind"] == "action" and e["detail"]["status"] == "executed"
            ] == [scale]


def test_propose_mode_plans_and_dry_runs_only(start_service: Any) -> None:
    svc = start_service(source=KV, mode="propose")
    wait_for(lambda: bool(svc.store.active() and svc.store.active()["plan_id"]), 60, "an incident with a plan")
    active = svc.store.active()
    assert active is not None
    plan = svc.ledger.plan(active["plan_id"])
    assert plan is not None and all(a["dry_run"]["ok"] for a in plan["actions"] if a["kind"] == "scale_out")
    r = httpx.post(f"{svc.url}/api/v1/actions/{plan['actions'][0]['id']}/approve", headers=auth(APPROVE))
    assert r.status_code == 409
    assert executes(svc) == {}


def test_healthz_and_metrics(start_service: Any) -> None:
    svc = start_service()
    wait_for(lambda: svc.watcher.rounds >= 3, 30, "3 rounds")
    h = httpx.get(f"{svc.url}/healthz").json()
    assert h["ok"] and h["rounds"] >= 3 and h["source"] == "sim"
    post_alerts(svc, sample())
    text = httpx.get(f"{svc.url}/metrics").text
    for name in ("llm_oncall_loop_duration_seconds_bucket", "llm_oncall_scrape_failures_total",
                 'llm_oncall_incidents{status="open"} 1.0', 'llm_oncall_webhooks_total{code="200"}'):
        assert name in text, name


def test_config_errors_are_clear(tmp_path: Path) -> None:
    path = write_config(tmp_path, source={"sim": {"pods": 2}, "targets": ["http://x"]}, interval="-1s",
                        mode="sometimes")
    with pytest.raises(ConfigError) as err:
        load(path)
    text = str(err.value)
    assert "source: " in text and "exactly one of" in text
    assert "interval" in text and "mode" in text
    (tmp_path / "bad.yaml").write_text("listen: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing.yaml")
    path = write_config(tmp_path, mode="approve", auth={"webhook": ["webhook-token-0123456789"]})
    with pytest.raises(ConfigError, match="nobody could approve"):
        load(path)


def test_a_stale_diagnosis_is_rechecked_before_executing(start_service: Any) -> None:
    svc = start_service(source=KV, mode="approve")
    wait_for(lambda: bool(svc.store.active() and svc.store.active()["plan_id"]), 60, "an incident with a plan")
    w = svc.watcher
    with w.lock:  # no round runs meanwhile
        active = svc.store.active()
        r = w.responder
        case = r.open_cases()[active["id"]] if active is not None else None
        assert case is not None and case.plan is not None
        scale = next(a for a in case.plan.actions if a.kind == "scale_out")
        assert svc.store.decide(case.id, case.plan.id, scale.id, "approved", "test")
        calls: list[int] = []

        def gone() -> None:
            calls.append(1)
            return None  # the fresh look says the page is gone

        r.recheck = gone  # type: ignore[method-assign]
        r.last_at = 0.0  # the diagnosis is far older than two intervals
        r._act(case)
        assert calls == [1]
        assert scale.status == "blocked" and "stale" in str(scale.result)
    assert executes(svc) == {}


def test_auto_mode_fix_then_mitigated(start_service: Any, tmp_path: Path) -> None:
    """The drill fleet (8 pods, seed 7): auto mode scales out and caps max_tokens; the queue comes back while the
    demand stays doubled, so the incident is mitigated (not resolved) with a verification event."""
    policy = tmp_path / "both.yaml"
    policy.write_text("auto: {kv-capacity: [scale_out, gateway_cap_max_tokens]}\n")
    svc = start_service(source={"sim": {"pods": 8, "seed": 7, "fault": "kv-capacity"}}, policy=str(policy))

    def statuses() -> list[str]:
        incs = svc.store.incidents()
        tl = svc.store.timeline(incs[0]["id"]) if incs else []
        return [e["detail"]["status"] for e in tl if e["kind"] == "status"]

    wait_for(lambda: "mitigated" in statuses(), 120, "the incident to be mitigated after the fix")
    assert statuses()[:3] == ["open", "mitigating", "mitigated"]
    iid = svc.store.incidents()[0]["id"]
    ver = [e for e in svc.store.timeline(iid) if e["kind"] == "verification"]
    assert ver and ver[0]["detail"]["verdict"] == "helped"
    assert ver[0]["detail"]["signals"]["waiting_per_pod"]["value"] <= 5
    ex = executes(svc)
    assert len(ex) == 2 and all(n == 1 for n in ex.values())


def test_alert_incident_resolves_when_alerts_resolve_and_nothing_pages(start_service: Any) -> None:
    svc = start_service(resolve_after=3)  # a healthy fleet
    body = sample()
    assert post_alerts(svc, body).status_code == 200
    iid = svc.store.incidents()[0]["id"]
    rounds = svc.watcher.rounds
    wait_for(lambda: svc.watcher.rounds >= rounds + 6, 60, "6 rounds")
    assert svc.store.get(iid, timeline=False)["status"] == "open"  # an alert still fires
    body["status"] = "resolved"
    for a in body["alerts"]:
        a["status"] = "resolved"
    assert post_alerts(svc, body).status_code == 200
    wait_for(lambda: svc.store.get(iid, timeline=False)["status"] == "resolved", 60, "the incident to resolve")
    assert executes(svc) == {}
    # a re-fire of the same alert later opens a new incident
    body = sample()
    body["alerts"][1]["startsAt"] = "2026-11-30T06:00:00Z"
    r = post_alerts(svc, body)
    assert r.status_code == 200 and r.json()["incident"] != iid and r.json()["new"] == 1  # the re-fired one


def test_a_served_incident_has_the_telemetry_of_its_postmortem(start_service: Any, tmp_path: Path) -> None:
    """Every round's features go to the store's file: a postmortem of a served incident has its impact and charts."""
    from llm_oncall.postmortem.write import write_postmortem

    svc = start_service(source={"sim": {"pods": 8, "seed": 7, "fault": "kv-capacity"}})
    wait_for(lambda: any(e["kind"] == "action" for i in svc.store.incidents() for e in svc.store.timeline(i["id"])),
             120, "an executed action")
    iid = svc.store.incidents()[0]["id"]
    rounds = svc.watcher.rounds
    wait_for(lambda: svc.watcher.rounds >= rounds + 5, 60, "5 more rounds")
    out = write_postmortem(svc.cfg.db, iid, tmp_path / "pm")
    md = (tmp_path / "pm" / "postmortem.md").read_text(encoding="utf-8")
    assert (tmp_path / "pm" / "golden-signals.png").is_file(), md
    assert "impact unknown" not in md.lower(), md.split("## Impact")[1][:600]
    assert out is not None
