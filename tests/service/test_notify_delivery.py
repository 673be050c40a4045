"""Delivery against local receivers: PagerDuty's dedup (a re-send, even after a lost answer, is one page; the resolve
closes that one), 429 + Retry-After then success delivered once, 500s retried then given up and counted, 4xx not
retried, a full queue drops (counted, logged) without blocking the caller, a slow receiver delays nobody else."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.service.receivers import PagerDutyService, Receiver
from tests.service.test_notify_vendors import KEY, PLAN, diagnosis
from tests.testkit import wait_for

from llm_oncall.incidents import IncidentStore
from llm_oncall.service.config import NotifyConfig
from llm_oncall.service.notify import Notifier, retry_after_seconds
from llm_oncall.service.observability import Log


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[IncidentStore]:
    s = IncidentStore(tmp_path / "incidents.db")
    yield s
    s.close()


def make(store: IncidentStore, targets: list[dict[str, Any]], **kw: Any) -> tuple[Notifier, io.StringIO]:
    out = io.StringIO()
    n = Notifier([NotifyConfig.model_validate(t) for t in targets], store, Log("info", out),
                 "http://127.0.0.1:9", base_delay_s=kw.pop("base_delay_s", 0.02), **kw)
    n.start()
    return n, out


def timeline_notes(store: IncidentStore, iid: str) -> list[dict[str, Any]]:
    return [e["detail"] for e in store.timeline(iid) if e["kind"] == "notification"]


def test_pagerduty_resend_is_one_incident_and_resolve_closes_it(store: IncidentStore,
                                                                receivers: list[Receiver]) -> None:
    pd = PagerDutyService()
    # the first trigger is taken but its answer is lost: the notifier sends it again
    rec = Receiver("pagerduty", script=["drop"], default=(202, {}, '{"status":"success"}'), on_accept=pd)
    receivers.append(rec)
    iid = store.open_incident("kv-capacity", "KV-cache capacity exhausted")
    n, _ = make(store, [{"kind": "pagerduty", "url": rec.url, "routing_key": KEY, "console_url": "https://c.example"}])
    d = diagnosis()
    n(iid, "opened", "kv-capacity paged", {"diagnosis": d})
    n(iid, "opened", "kv-capacity paged", {"diagnosis": d})  # the loop re-sends (a restart, a replay)
    n(iid, "plan", "plan p-1", {"plan_id": "p-1", "plan": PLAN})
    n(iid, "action", "scale_out: executed", {"action_id": "a-1", "status": "executed"})  # not PagerDuty's business
    n(iid, "status", "resolved", {"status": "resolved"})
    wait_for(lambda: len(timeline_notes(store, iid)) == 4, 10, "four PagerDuty deliveries")
    n.stop()
    assert rec.invalid == []
    assert pd.pages == 1 and len(pd.alerts) == 1
    (key, alert), = pd.alerts.items()
    assert key == (KEY, iid) and alert["status"] == "resolved"
    assert [b["event_action"] for b in rec.bodies] == ["trigger", "trigger", "trigger", "trigger", "resolve"]
    assert {b["dedup_key"] for b in rec.bodies} == {iid}
    notes = timeline_notes(store, iid)
    assert notes[0]["attempts"] == 2 and all(x["outcome"] == "sent" for x in notes)
    assert n.counts == {"sent": 4}
    assert KEY not in json.dumps(notes)  # the routing key never reaches the timeline


def test_429_with_retry_after_then_success_is_delivered_once(store: IncidentStore, receivers: list[Receiver]) -> None:
    rec = Receiver("slack", script=[(429, {"Retry-After": "1"}, "rate_limited")], default=(200, {}, "ok"))
    receivers.append(rec)
    iid = store.open_incident("kv-capacity", "t")
    n, _ = make(store, [{"kind": "slack", "url": rec.url}])
    n(iid, "opened", "paged", {"diagnosis": diagnosis()})
    wait_for(lambda: timeline_notes(store, iid), 10, "the Slack delivery")
    n.stop()
    assert len(rec.hits) == 2 and len(rec.bodies) == 1 and rec.invalid == []
    assert rec.hits[1][0] - rec.hits[0][0] >= 1.0  # Retry-After honoured (the back-off alone is ~20 ms)
    note, = timeline_notes(store, iid)
    assert note["outcome"] == "sent" and note["attempts"] == 2 and note["code"] == 200
    assert n.counts == {"sent": 1}


def test_500s_are_retried_then_given_up_and_counted(store: IncidentStore, receivers: list[Receiver]) -> None:
    rec = Receiver("mattermost", default=(500, {}, "boom"))
    refuse = Receiver("teams", default=(400, {}, "bad card"))
    receivers += [rec, refuse]
    iid = store.open_incident("kv-capacity", "t")
    outcomes: list[str] = []
    n, log = make(store, [{"kind": "mattermost", "url": rec.url, "retries": 3},
                          {"kind": "teams", "url": refuse.url, "retries": 3}], on_outcome=outcomes.append)
    n(iid, "opened", "paged", {"diagnosis": diagnosis()})
    wait_for(lambda: len(timeline_notes(store, iid)) == 2, 10, "both deliveries given up")
    n.stop()
    assert len(rec.hits) == 4 and rec.bodies == [] and rec.invalid == []
    assert len(refuse.hits) == 1 and refuse.invalid == []  # a 4xx is not retried
    by_kind = {x["kind"]: x for x in timeline_notes(store, iid)}
    assert by_kind["mattermost"] | {"error": ""} == by_kind["mattermost"] | {
        "outcome": "failed", "attempts": 4, "code": 500, "error": ""}
    assert by_kind["mattermost"]["error"] == "boom"
    assert by_kind["teams"]["outcome"] == "failed" and by_kind["teams"]["attempts"] == 1
    assert n.counts == {"failed": 2} and sorted(outcomes) == ["failed", "failed"]
    logged = [json.loads(line) for line in log.getvalue().splitlines()]
    assert sum(1 for x in logged if x["msg"] == "notification" and x["outcome"] == "failed") == 2


def test_teams_throttling_inside_a_2xx_is_retried(store: IncidentStore, receivers: list[Receiver]) -> None:
    rec = Receiver("teams", script=[(200, {}, "Microsoft Teams endpoint returned HTTP error 429")],
                   default=(200, {}, "1"))
    receivers.append(rec)
    iid = store.open_incident("kv-capacity", "t")
    n, _ = make(store, [{"kind": "teams", "url": rec.url}])
    n(iid, "opened", "paged", {"diagnosis": diagnosis()})
    wait_for(lambda: timeline_notes(store, iid), 10, "the Teams delivery")
    n.stop()
    assert len(rec.hits) == 2 and timeline_notes(store, iid)[0]["attempts"] == 2 and rec.invalid == []


def test_the_caller_never_blocks_and_a_full_queue_is_counted(store: IncidentStore, receivers: list[Receiver]) -> None:
    slow = Receiver("webhook", default=(503, {"Retry-After": "30"}, ""))  # holds its worker in back-off
    fast = Receiver("slack")
    receivers += [slow, fast]
    iid = store.open_incident("kv-capacity", "t")
    n, log = make(store, [{"kind": "webhook", "url": slow.url, "queue_size": 2},
                          {"kind": "slack", "url": fast.url}])
    t0 = time.monotonic()
    for i in range(10):
        n(iid, "action", f"action {i}", {"action_id": f"a-{i}", "status": "executed"})
    assert time.monotonic() - t0 < 0.5  # the loop's thread only queues
    wait_for(lambda: len(fast.bodies) == 10, 10, "the fast target gets all ten while the slow one waits")
    n.stop(timeout_s=2)
    # slow: one in its worker, 2 queued, 7 dropped when queued; at stop the queued ones get one attempt each
    assert n.counts["dropped"] >= 7 and n.counts["sent"] == 10
    assert n.counts["dropped"] + n.counts["failed"] + n.counts["sent"] == 20  # every note accounted for
    assert "the queue is full" in log.getvalue()


def test_a_changed_diagnosis_is_read_from_the_store(store: IncidentStore, receivers: list[Receiver]) -> None:
    rec = Receiver("slack")
    receivers.append(rec)
    iid = store.open_incident("kv-capacity", "t")
    first = diagnosis()
    second = {**diagnosis(summary="Long prompts hold the KV cache: p99 prompt tokens ×11"),
              "incident": "long-context-starvation", "title": "Long-context starvation", "confidence": 0.8}
    store.set_diagnosis(iid, first)
    n, _ = make(store, [{"kind": "slack", "url": rec.url}])
    n(iid, "opened", "kv-capacity paged", {"diagnosis": first})
    wait_for(lambda: len(rec.bodies) == 1, 10, "the opened message")
    store.set_diagnosis(iid, second)  # the loop stores it, then notifies with its name only
    n(iid, "diagnosis", "diagnosis: long-context-starvation (80%)",
      {"incident": "long-context-starvation", "confidence": 0.8})
    wait_for(lambda: len(rec.bodies) == 2, 10, "the diagnosis message")
    n.stop()
    text = json.dumps(rec.bodies[1])
    assert "Long-context starvation" in text and "p99 prompt tokens" in text and "80%" in text
    assert "KV-cache capacity exhausted" not in text  # not the first diagnosis' title


def test_retry_after_parsing() -> None:
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None
