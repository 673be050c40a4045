"""Mattermost: an incoming-webhook post with one message attachment (fallback, colour, title linking to the
console, Markdown text with the diagnosis, top evidence and plan, short fields), as documented at
https://developers.mattermost.com/integrate/reference/message-attachments/. Mattermost renders Markdown and never
raw HTML; characters that would turn label values into Markdown (`*`, `_`, `` ` ``, `[`, `]`, `#`, `|`, `~`, `<`,
`>`) are backslash-escaped, and text is cut well under the post limit (16383 characters)."""

from __future__ import annotations

import re
from typing import Any

from llm_oncall.service.notifiers.message import Message, clip

TEXT_MAX = 4000
FIELD_MAX = 500
COLOR = {"page": "#D00000", "warn": "#E8A317", "none": "#9E9E9E"}
DONE_COLOR = "#2E7D32"
_MD = re.compile(r"([\\`*_\[\]#|~<>])")


def escape(text: str) -> str:
    return _MD.sub(r"\\\1", text)


def render(m: Message) -> dict[str, Any]:
    parts = [escape(m.text)]
    if m.summary:
        parts.append(escape(m.summary))
    if m.evidence:
        parts.append("**Top evidence**\n" + "\n".join(f"- {escape(e)}" for e in m.evidence))
    if m.plan:
        parts.append(f"**Plan {escape(m.plan_id)}**\n" + "\n".join(f"- {escape(p)}" for p in m.plan))
    parts.append(f"[Open {escape(m.incident_id)} in the console]({m.link}) — approve or reject there")
    color = DONE_COLOR if m.status in ("mitigated", "resolved") else COLOR.get(m.severity, COLOR["page"])
    attachment = {
        "fallback": clip(f"{m.headline} ({m.incident_id}, {m.event}): {m.text}", 500),
        "color": color,
        "pretext": clip(f"llm-oncall · {m.event}", 200),
        "title": clip(f"{m.headline} [{m.status}]", 250),
        "title_link": m.link,
        "text": clip("\n\n".join(parts), TEXT_MAX),
        "fields": [{"short": True, "title": k, "value": clip(escape(v), FIELD_MAX)} for k, v in m.facts()],
        "footer": "llm-oncall",
    }
    return {"text": clip(escape(f"{m.headline}: {m.text}"), 500), "attachments": [attachment]}
