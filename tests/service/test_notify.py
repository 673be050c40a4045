"""Notifications from the running service (its watch loop on the simulator) to local receivers of every kind: each
payload validated against its vendor's schema, retries with back-off, each delivery on the incident's timeline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.service.receivers import PagerDutyService, Receiver
from tests.service.test_api import KV
from tests.testkit import wait_for

KEY = "0123456789abcdef0123456789ABCDEF"


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.close()


def test_every_kind_from_the_running_loop(start_service: Any, receivers: list[Receiver]) -> None:
    hook = Receiver("webhook", script=[503, 503])
    slack, teams, mm = Receiver("slack"), Receiver("teams"), Receiver("mattermost")
    pd_service = PagerDutyService()
    pd = Receiver("pagerduty", default=(202, {}, '{"status":"success"}'), on_accept=pd_service)
    refuse = Receiver("webhook", default=400)
    receivers += [hook, slack, teams, mm, pd, refuse]
    svc = start_service(source=KV, mode="approve", notify=[
        {"kind": "webhook", "url": hook.url, "retries": 4},
        {"kind": "slack", "url": slack.url, "console_url": "https://oncall.example.com"},
        {"kind": "teams", "url": teams.url},
        {"kind": "mattermost", "url": mm.url},
        {"kind": "pagerduty", "url": pd.url, "routing_key": KEY},
        {"kind": "webhook", "url": refuse.url}])
    svc.notifier.base_delay_s = 0.05
    wait_for(lambda: any(b["event"] == "plan" for b in hook.bodies), 60, "the plan notification (webhook)")
    wait_for(lambda: len(slack.bodies) >= 3 and len(teams.bodies) >= 3 and len(mm.bodies) >= 3
             and len(pd.bodies) >= 3, 30, "opened, diagnosis and plan at every chat target and PagerDuty")
    for r in (slack, teams, mm, pd):
        assert r.invalid == [], r.invalid[:3]
    opened = hook.bodies[0]
    iid = opened["incident_id"]
    assert opened["event"] == "opened" and iid.startswith("inc-") and "kv-capacity" in opened["text"]
    plan = next(b for b in hook.bodies if b["event"] == "plan")
    assert "awaiting approval" in plan["text"]
    # the loop's note names the actions by id; the message shows each one's kind, target, dry-run and guard
    assert any(line.startswith("scale_out ") and "dry-run" in line and "guard" in line
               for line in plan["message"]["plan"]), plan["message"]["plan"]
    assert plan["message"]["evidence"] and plan["message"]["summary"]  # the diagnosis rides along
    assert opened["console_url"] == f"{svc.url}/incidents/{iid}"
    assert f"https://oncall.example.com/incidents/{iid}" in str(slack.bodies[0])
    assert pd_service.pages == 1 and {b["dedup_key"] for b in pd.bodies} == {iid}
    notes = [e["detail"] for e in svc.store.timeline(iid) if e["kind"] == "notification"]
    port = hook.url.split(":")[2].split("/")[0]
    first_hook = next(n for n in notes if n["target"] == f"webhook http://127.0.0.1:{port}")
    assert first_hook["outcome"] == "sent" and first_hook["attempts"] == 3  # two 503s, then taken
    rport = refuse.url.split(":")[2].split("/")[0]
    refused = [n for n in notes if n["target"] == f"webhook http://127.0.0.1:{rport}"]
    assert refused and all(n["outcome"] == "failed" and n["attempts"] == 1 and n["code"] == 400 for n in refused)
    assert refuse.bodies == []
    assert svc.notifier.counts["failed"] >= 1 and svc.notifier.counts["sent"] >= 12


def test_no_notify_targets_sends_nothing(start_service: Any) -> None:
    svc = start_service()
    assert svc.notifier.thread is None
