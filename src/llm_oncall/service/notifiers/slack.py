"""Slack: an incoming-webhook message in Block Kit (header, sections, context) with a plain `text` fallback for
notifications. Text is mrkdwn-escaped (`&`, `<`, `>` — the three characters Slack reserves for its control
sequences, https://api.slack.com/reference/surfaces/formatting#escaping) and cut to the documented limits
(https://docs.slack.dev/reference/block-kit/blocks): header 150, section text 3000, a field 2000, 10 fields."""

from __future__ import annotations

from typing import Any

from llm_oncall.service.notifiers.message import Message, clip

HEADER_MAX = 150
SECTION_MAX = 3000
FIELD_MAX = 2000
FIELDS_MAX = 10
FALLBACK_MAX = 3000
URL_MAX = 3000

ICON = {"page": ":red_circle:", "warn": ":large_orange_circle:", "none": ":white_circle:"}
DONE = {"mitigated": ":large_green_circle:", "resolved": ":white_check_mark:"}


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _mrkdwn(text: str, limit: int = SECTION_MAX) -> dict[str, str]:
    return {"type": "mrkdwn", "text": clip(text, limit) or " "}


def _link(url: str, label: str) -> str:
    # <url|label>: the URL must not carry a raw `|` or `>`; ours is built from a config URL and a quoted id
    return f"<{url.replace('|', '%7C').replace('>', '%3E')}|{escape(label).replace('|', '/')}>"


def render(m: Message) -> dict[str, Any]:
    icon = DONE.get(m.status, ICON.get(m.severity, ICON["page"]))
    header = clip(f"{m.headline} [{m.status}]", HEADER_MAX)
    lines = [f"*{escape(m.incident_id)}* · {escape(m.event)}: {escape(m.text)}"]
    if m.summary:
        lines.append(escape(m.summary))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": header, "emoji": True}},
        {"type": "section", "text": _mrkdwn(f"{icon} " + "\n".join(lines))},
        {"type": "section", "fields": [_mrkdwn(f"*{escape(k)}*\n{escape(v)}", FIELD_MAX)
                                       for k, v in m.facts()[:FIELDS_MAX]]},
    ]
    if m.evidence:
        blocks.append({"type": "section", "text": _mrkdwn("*Top evidence*\n" + "\n".join(
            f"• {escape(e)}" for e in m.evidence))})
    if m.plan:
        title = f"*Plan {escape(m.plan_id)}*" if m.plan_id else "*Plan*"
        blocks.append({"type": "section", "text": _mrkdwn(title + "\n" + "\n".join(f"• {escape(p)}" for p in m.plan))})
    link = m.link if len(m.link) <= URL_MAX else m.link[:URL_MAX]
    blocks.append({"type": "section", "text": _mrkdwn(
        _link(link, f"Open {m.incident_id} in the console") + " — diagnosis, evidence, plan; approve or reject there")})
    blocks.append({"type": "context", "elements": [_mrkdwn("llm-oncall")]})
    fallback = clip(f"{m.headline} ({m.incident_id}, {m.event}): {m.text}", FALLBACK_MAX)
    return {"text": escape(fallback), "blocks": blocks}
