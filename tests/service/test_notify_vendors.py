"""Each vendor's body, for every event of an incident, against the vendor's published schema or example
(tests/service/vendor/PROVENANCE.md): Slack Block Kit, a Teams Adaptive Card in its webhook envelope, a Mattermost
attachment, a PagerDuty Events v2 event. Escaping and length limits with hostile and huge text."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from tests.service.receivers import _load, pagerduty_example, problems

from llm_oncall.diagnosis.engine import Diagnosis, EvidenceItem, RuledOut
from llm_oncall.service import notifiers
from llm_oncall.service.config import NotifyConfig
from llm_oncall.service.notifiers import mattermost, slack
from llm_oncall.service.notifiers.message import Context, Note

KEY = "0123456789abcdef0123456789ABCDEF"
IID = "inc-20261201-120000-ab12"
HOSTILE = "<script>alert(1)</script> & <@U123|x> *bold* _it_ [link](http://evil)"


def diagnosis(summary: str = "KV-cache capacity exhausted: waiting queue 326 (40.8 per pod)") -> dict[str, Any]:
    return Diagnosis(
        incident="kv-capacity", confidence=0.9, summary=summary, t=420.0, scope_pods=("vllm-0", "vllm-1"),
        evidence=(
            EvidenceItem("waiting", 326.0, None, "sum(vllm:num_requests_waiting)", "waiting queue 326 (40.8 per pod)"),
            EvidenceItem("kv_max", 1.0, 0.5, 'max(vllm:kv_cache_usage_perc{pod="<b>"})', "KV-cache usage 100%"),
            EvidenceItem("arrival_rate_ratio", 1.93, 48.2, "sum(rate(gateway_requests_total[1m]))", "arrivals ×1.9"),
            EvidenceItem("extra", 1.0, None, "q", "a fourth item that is not in the top three"),
        ),
        ruled_out=(RuledOut("long-context-starvation", "prompt mix flat"),), title="KV-cache capacity exhausted",
        runbook="kv-capacity", severity="page",
        extra={"runner_up": {"incident": "long-context-starvation", "confidence": 0.1}}).to_json()


PLAN = {"plan_id": "p-1", "incident": "kv-capacity", "actions": [
    {"id": "a-1", "kind": "scale_out", "target": "deployment/llm/vllm", "dry_run": {"ok": True},
     "guard": {"allowed": True, "why": "auto mode allows it"}},
    {"id": "a-2", "kind": "gateway_cap_max_tokens", "target": "configmap/llm/gateway", "dry_run": {"ok": True},
     "guard": {"allowed": False, "why": "cooldown until 12:10"}}], "manual": []}


def notes(diag: dict[str, Any] | None = None) -> list[Note]:
    d = diag or diagnosis()
    return [Note(IID, "opened", "kv-capacity paged: KV-cache capacity exhausted", {"diagnosis": d}),
            Note(IID, "diagnosis", "diagnosis: kv-capacity (90%)", {"diagnosis": d}),
            Note(IID, "plan", "plan p-1: scale_out, gateway_cap_max_tokens (approve mode)",
                 {"plan_id": "p-1", "plan": PLAN}),
            Note(IID, "action", "scale_out deployment/llm/vllm: executed", {"action_id": "a-1", "status": "executed"}),
            Note(IID, "effect", "expected effect of scale_out deployment/llm/vllm: unknown (cold pods)",
                 {"incident": "unknown", "action_id": "a-1"}),
            Note(IID, "status", "mitigated: queue back", {"status": "mitigated"}),
            Note(IID, "status", "resolved", {"status": "resolved"})]


def target(kind: str, **extra: Any) -> NotifyConfig:
    base: dict[str, Any] = {"kind": kind, "console_url": "https://oncall.example.com/"}
    base.update({"routing_key": KEY} if kind == "pagerduty" else {"url": "https://hooks.example.com/T/B/x"})
    return NotifyConfig.model_validate({**base, **extra})


def bodies(kind: str, seq: list[Note]) -> list[tuple[Note, dict[str, Any] | None]]:
    t, ctx, out = target(kind), Context(), []
    for n in seq:
        ctx.update(n)
        out.append((n, notifiers.body(t, notifiers.build(n, ctx, t.console_url or ""), n.detail,
                                      "http://127.0.0.1:8080")))
    return out


@pytest.mark.parametrize("kind", ["slack", "teams", "mattermost", "pagerduty"])
def test_every_event_validates_against_the_vendor_schema(kind: str) -> None:
    sent = [(n, b) for n, b in bodies(kind, notes()) if b is not None]
    assert sent
    for n, b in sent:
        assert problems(kind, b) == [], (n.event, json.dumps(b)[:2000])
        text = json.dumps(b)
        if n.event != "status" or kind != "pagerduty":
            assert "https://oncall.example.com/incidents/" + IID in text  # the console's incident page


@pytest.mark.parametrize("kind", ["slack", "teams", "mattermost", "pagerduty"])
def test_messages_carry_diagnosis_evidence_plan_and_link(kind: str) -> None:
    by_event = {n.event: b for n, b in bodies(kind, notes()) if b is not None}
    plan = json.dumps(by_event["plan"])
    for needle in ("KV-cache capacity exhausted", "90%", "waiting queue 326", "KV-cache usage 100%",
                   "scale_out", "cooldown until 12:10", "p-1", f"/incidents/{IID}"):
        assert needle in plan, (kind, needle)
    assert "a fourth item" not in plan  # top evidence only
    opened = json.dumps(by_event["opened"])
    assert "waiting queue 326" in opened and "long-context-starvation" in opened


@pytest.mark.parametrize("kind", ["slack", "teams", "mattermost", "webhook"])
def test_an_effect_keeps_the_incidents_name(kind: str) -> None:
    by_event = {n.event: b for n, b in bodies(kind, notes()) if b is not None}
    effect = json.dumps(by_event["effect"])
    assert "expected effect of scale_out" in effect and "kv-capacity" in effect
    assert "unknown: " not in effect and "[unknown]" not in effect
    plan = json.dumps(by_event["plan"])
    assert "guard: allowed" in plan and "guard: blocked (cooldown until 12:10)" in plan


def test_schemas_accept_the_vendors_examples_and_refuse_broken_bodies() -> None:
    # the checks can fail: the vendors' own examples pass, a broken copy of each does not
    pd = pagerduty_example()
    assert problems("pagerduty", pd) == []
    bad = copy.deepcopy(pd)
    bad["payload"]["severity"] = "page"
    assert problems("pagerduty", bad)
    del bad["routing_key"]
    assert len(problems("pagerduty", bad)) >= 2
    teams = _load("teams-webhook-example.json")
    assert problems("teams", teams) == []
    teams["attachments"][0]["content"]["body"][0]["colour"] = "red"
    assert problems("teams", teams)
    mm = _load("mattermost-attachment-example.json")
    assert problems("mattermost", mm) == []
    mm["attachments"][0]["color"] = "orange"
    assert problems("mattermost", mm)
    sl = _load("slack-section-example.json")
    assert problems("slack", sl) == []
    sl["blocks"][0]["text"]["text"] = "x" * 151
    assert problems("slack", sl)


def test_pagerduty_trigger_resolve_and_dedup_key() -> None:
    sent = bodies("pagerduty", notes())
    actions = [(n.event, b["event_action"] if b else None) for n, b in sent]
    assert actions == [("opened", "trigger"), ("diagnosis", "trigger"), ("plan", "trigger"), ("action", None),
                       ("effect", None), ("status", None), ("status", "resolve")]
    assert {b["dedup_key"] for _, b in sent if b} == {IID}
    opened = sent[0][1]
    assert opened is not None
    assert opened["payload"]["severity"] == "critical" and opened["routing_key"] == KEY
    assert opened["links"][0]["href"] == f"https://oncall.example.com/incidents/{IID}"
    assert sent[-1][1] == {"routing_key": KEY, "event_action": "resolve", "dedup_key": IID}


def test_pagerduty_severity_mapping() -> None:
    d = diagnosis()
    d["severity"] = "warn"
    n = Note(IID, "opened", "x", {"diagnosis": d})
    ctx = Context()
    ctx.update(n)
    default = notifiers.body(target("pagerduty"), notifiers.build(n, ctx, "http://c"), {}, "")
    mapped = notifiers.body(target("pagerduty", severities={"warn": "error"}), notifiers.build(n, ctx, "http://c"),
                            {}, "")
    assert default is not None and mapped is not None
    assert default["payload"]["severity"] == "warning" and mapped["payload"]["severity"] == "error"


def test_slack_escapes_control_characters() -> None:
    d = diagnosis(summary=HOSTILE)
    sent = bodies("slack", [Note(IID, "opened", HOSTILE, {"diagnosis": d})])
    b = sent[0][1]
    assert b is not None and problems("slack", b) == []
    texts = [b["text"]] + [blk["text"]["text"] for blk in b["blocks"] if blk["type"] == "section" and "text" in blk]
    joined = "\n".join(texts)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;@U123|x&gt;" in joined
    # the only raw `<…>` left is our own console link
    raw = [seg for seg in joined.split("<")[1:]]
    assert all(seg.startswith("https://oncall.example.com/incidents/") for seg in raw), raw
    assert slack.escape("a & b < c > d") == "a &amp; b &lt; c &gt; d"


def test_mattermost_and_teams_escape_markdown() -> None:
    for kind in ("mattermost", "teams"):
        b = bodies(kind, [Note(IID, "opened", HOSTILE, {"diagnosis": diagnosis(summary=HOSTILE)})])[0][1]
        assert b is not None and problems(kind, b) == []
        if kind == "mattermost":  # what Mattermost renders as Markdown: the post text, the attachment's text
            rendered = [b["text"], b["attachments"][0]["text"]]
        else:  # every TextBlock of the card
            rendered = [x["text"] for x in b["attachments"][0]["content"]["body"] if x["type"] == "TextBlock"]
        assert all("[link](http://evil)" not in r for r in rendered), kind
        assert any("\\[link\\](http://evil)" in r for r in rendered), kind
    assert mattermost.escape("*a* [b](c)") == "\\*a\\* \\[b\\](c)"


@pytest.mark.parametrize("kind", ["slack", "teams", "mattermost", "pagerduty"])
def test_huge_text_stays_within_limits(kind: str) -> None:
    huge = "x" * 50_000
    d = diagnosis(summary=huge)
    d["title"] = "T" * 5000
    d["evidence"] = [{"signal": "s", "value": 1, "baseline": None, "source": "q" * 9000, "text": "e" * 9000}] * 3
    plan = copy.deepcopy(PLAN)
    plan["actions"] = [dict(PLAN["actions"][0], id=f"a-{i}", target="deployment/llm/" + "n" * 300)
                       for i in range(40)]
    seq = [Note(IID, "opened", huge, {"diagnosis": d}), Note(IID, "plan", huge, {"plan_id": "p-1", "plan": plan})]
    for n, b in bodies(kind, seq):
        assert b is not None
        assert problems(kind, b) == [], (n.event, problems(kind, b)[:3])
        assert len(json.dumps(b)) < 28_000  # Teams' message limit is the smallest (28 KB)
