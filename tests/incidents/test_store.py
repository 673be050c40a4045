"""The incident store: migrations from empty and from version 1, lifecycle, alerts keyed on (fingerprint,
startsAt), the timeline, the shared file with the actions ledger, and the `incidents` CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_oncall.actions.ledger import Ledger
from llm_oncall.cli import app
from llm_oncall.incidents import IncidentStore
from llm_oncall.incidents.schema import LATEST, migrate, version

SAMPLE = Path(__file__).parents[1] / "service" / "data" / "alertmanager_webhook_sample.json"
BODY = json.loads(SAMPLE.read_text())


def _body() -> dict:
    return json.loads(json.dumps(BODY))


def test_migrates_from_empty(tmp_path: Path) -> None:
    s = IncidentStore(tmp_path / "a.db")
    assert s.schema_version == LATEST
    mode = s.db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    tables = {r[0] for r in s.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"schema_version", "incidents", "alerts", "timeline", "approvals"} <= tables


def test_migrates_from_version_1_keeping_rows(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    db = sqlite3.connect(path, isolation_level=None)
    assert migrate(db, upto=1) == 1
    db.execute("INSERT INTO incidents (id, incident, status, opened_at, updated_at, title) VALUES "
               "('inc-old', 'kv-capacity', 'open', 1.0, 1.0, 'old one')")
    db.close()
    s = IncidentStore(path)
    assert s.schema_version == LATEST
    assert version(s.db) == LATEST
    inc = s.get("inc-old")
    assert inc is not None and inc["incident"] == "kv-capacity" and inc["plan_id"] is None
    # a second open is a no-op
    assert IncidentStore(path).schema_version == LATEST
    assert s.db.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == LATEST


def test_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    IncidentStore(path).db.execute("INSERT INTO schema_version VALUES (99)")
    with pytest.raises(RuntimeError, match="newer"):
        IncidentStore(path)


def test_shares_the_file_with_the_ledger(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    s = IncidentStore(path)
    ledger = Ledger(path)
    assert ledger.claim("k", "a-1", "scale_out", "Deployment/ns/x")
    s.open_incident("kv-capacity", "q")
    tables = {r[0] for r in s.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"executions", "plans", "audit", "incidents", "timeline"} <= tables
    assert IncidentStore(path).schema_version == LATEST


def test_alerts_dedup_and_group(tmp_path: Path) -> None:
    s = IncidentStore(tmp_path / "a.db")
    body = _body()
    for _ in range(100):
        iid, _new = s.add_alerts(body["groupKey"], body["alerts"])
    assert iid is not None
    rows = s.incidents()
    assert len(rows) == 1 and rows[0]["alerts"] == 2
    alerts = [e for e in s.timeline(iid) if e["kind"] == "alert"]
    assert len(alerts) == 2  # one event per (fingerprint, startsAt), not per delivery
    # a re-fire of the same alert (new startsAt) is a new alert row on the open incident
    refire = dict(body["alerts"][1], startsAt="2026-11-30T05:00:00Z")
    assert s.add_alerts(body["groupKey"], [refire]) == (iid, 1)
    # the firing one resolves: one status event
    resolved = dict(body["alerts"][1], status="resolved")
    s.add_alerts(body["groupKey"], [resolved])
    assert s.firing_alerts(iid) == 1
    assert len([e for e in s.timeline(iid) if e["kind"] == "alert"]) == 4


def test_resolved_only_alerts_open_nothing(tmp_path: Path) -> None:
    s = IncidentStore(tmp_path / "a.db")
    body = _body()
    assert s.add_alerts(body["groupKey"], [body["alerts"][0]]) == (None, 0)
    assert s.incidents() == []


def test_lifecycle_and_timeline(tmp_path: Path) -> None:
    s = IncidentStore(tmp_path / "a.db")
    iid = s.open_incident("unknown", "VLLMQueueBacklog")
    assert s.set_diagnosis(iid, {"incident": "kv-capacity", "severity": "page", "summary": "queue"})
    assert not s.set_diagnosis(iid, {"incident": "kv-capacity", "severity": "page", "summary": "queue 2"})
    s.set_plan(iid, "p-1", {"actions": ["scale_out"]})
    assert s.decide(iid, "p-1", "a-1", "approved", "alice")
    assert not s.decide(iid, "p-1", "a-1", "rejected", "bob")  # the first decision wins
    assert s.decisions("p-1")["a-1"]["actor"] == "alice"
    assert s.set_status(iid, "mitigating", "watch", "scale_out executed")
    assert not s.set_status(iid, "mitigating", "watch", "again")
    assert s.set_status(iid, "mitigated", "watch", "symptoms gone")
    assert s.set_status(iid, "open", "watch", "symptoms back")
    assert s.set_status(iid, "resolved", "watch", "gone for long enough")
    assert not s.set_status(iid, "open", "watch", "resolved stays resolved")
    kinds = [e["kind"] for e in s.timeline(iid)]
    assert kinds == ["status", "diagnosis", "plan", "approval", "status", "status", "status", "status"]
    inc = s.get(iid)
    assert inc is not None and inc["incident"] == "kv-capacity" and inc["resolved_at"] and inc["plan_id"] == "p-1"
    assert s.active() is None
    assert s.counts()["resolved"] == 1


def test_cli_list_and_show(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    s = IncidentStore(db)
    body = _body()
    iid, _ = s.add_alerts(body["groupKey"], body["alerts"])
    runner = CliRunner()
    out = runner.invoke(app, ["incidents", "list", "--db", str(db), "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert rows[0]["id"] == iid and rows[0]["status"] == "open" and rows[0]["alerts"] == 2
    assert {"id", "incident", "status", "opened_at", "alerts"} <= set(rows[0])
    out = runner.invoke(app, ["incidents", "show", str(iid), "--db", str(db), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["timeline"][0]["kind"] == "status"
    assert runner.invoke(app, ["incidents", "show", "nope", "--db", str(db)]).exit_code == 3
    assert runner.invoke(app, ["incidents", "list", "--db", str(tmp_path / "missing.db")]).exit_code == 3
    out = runner.invoke(app, ["incidents", "show", str(iid), "--db", str(db)])
    assert out.exit_code == 0 and "VLLMQueueBacklog" in out.output


def test_a_named_incident_keeps_its_name_when_a_later_scrape_says_less(tmp_path: Path) -> None:
    s = IncidentStore(tmp_path / "a.db")
    iid = s.open_incident("engine-hang", "Engine hang")
    assert s.set_diagnosis(iid, {"incident": "engine-hang", "severity": "page", "title": "Engine hang"})
    # While the fix restarts the group, TTFT and errors are red and nothing explains them for a scrape.
    assert s.set_diagnosis(iid, {"incident": "unknown", "severity": "page", "title": "Unexplained symptom"})
    got = s.get(iid, timeline=True)
    assert got is not None and got["incident"] == "engine-hang" and got["title"] == "Engine hang"
    assert got["diagnosis"]["incident"] == "unknown"  # the latest answer is kept, and in the timeline
    assert [e["detail"]["incident"] for e in s.timeline(iid) if e["kind"] == "diagnosis"] == ["engine-hang", "unknown"]
    # An incident opened as unknown takes the name of the runbook that explains it later.
    other = s.open_incident("unknown", "VLLMQueueBacklog")
    s.set_diagnosis(other, {"incident": "kv-capacity", "severity": "page", "title": "KV-cache capacity exhausted"})
    assert (s.get(other, timeline=False) or {})["incident"] == "kv-capacity"


def _alert(fp: str, labels: dict[str, str], status: str = "firing") -> dict[str, object]:
    return {"fingerprint": fp, "startsAt": "2026-12-01T03:00:00Z", "status": status,
            "labels": {"alertname": "LlmOncallIncident", **labels}, "annotations": {}, "endsAt": None}


def test_an_alert_of_llm_oncalls_rules_joins_the_incident_of_its_runbook(tmp_path: Path) -> None:
    s = IncidentStore(tmp_path / "a.db")
    ecc = s.open_incident("gpu-ecc", "GPU ECC errors")
    hang = s.open_incident("engine-hang", "Engine hang")
    # The newest open incident is the hang; an alert naming gpu-ecc joins the ECC incident, not the newest.
    iid, new = s.add_alerts("g1", [_alert("f1", {"incident": "gpu-ecc", "node": "n1"})])
    assert (iid, new) == (ecc, 1)
    # An alert of the user's own rules (no runbook label) joins the open incident.
    assert s.add_alerts("g2", [_alert("f2", {"alertname": "VLLMQueueBacklog"})])[0] == hang
    # A runbook with no open incident opens one under its own name, titled by the alert.
    iid3, _ = s.add_alerts("g3", [_alert("f3", {"incident": "kv-capacity"})])
    assert iid3 not in (ecc, hang) and (s.get(iid3, timeline=False) or {})["incident"] == "kv-capacity"
    # The same alert re-sent, and then resolved, stays with its incident.
    assert s.add_alerts("g1", [_alert("f1", {"incident": "gpu-ecc", "node": "n1"})]) == (ecc, 0)
    assert s.add_alerts("g1", [_alert("f1", {"incident": "gpu-ecc", "node": "n1"}, "resolved")])[0] == ecc
    # A label that is not a runbook id names nothing.
    s.set_status(ecc, "resolved", "test", "done")
    s.set_status(hang, "resolved", "test", "done")
    s.set_status(iid3, "resolved", "test", "done")
    iid4, _ = s.add_alerts("g4", [_alert("f4", {"incident": "../../etc"})])
    assert (s.get(iid4 or "", timeline=False) or {})["incident"] == "unknown"
