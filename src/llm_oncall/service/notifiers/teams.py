"""Microsoft Teams: an Adaptive Card (schema 1.4) in the message envelope that Teams incoming webhooks and Workflows
("when a Teams webhook request is received") accept: `{"type": "message", "attachments": [{"contentType":
"application/vnd.microsoft.card.adaptive", "contentUrl": null, "content": CARD}]}`
(https://learn.microsoft.com/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using). The card
carries the headline, the loop's line, a fact set, the top evidence, the plan and an Action.OpenUrl to the console
(Action.Submit is not supported through webhooks). Text is cut so the message stays under Teams' 28 KB."""

from __future__ import annotations

import re
from typing import Any

from llm_oncall.service.notifiers.message import Message, clip

TEXT_MAX = 2000
COLOR = {"page": "Attention", "warn": "Warning", "none": "Default"}
_MD = re.compile(r"([\\`*_\[\]#~<>])")


def escape(text: str) -> str:
    """TextBlock renders a Markdown subset: label values must not turn into links or emphasis."""
    return _MD.sub(r"\\\1", text)


def _text(text: str, **style: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": clip(text, TEXT_MAX), "wrap": True, **style}


def card(m: Message) -> dict[str, Any]:
    color = "Good" if m.status in ("mitigated", "resolved") else COLOR.get(m.severity, "Attention")
    body: list[dict[str, Any]] = [
        _text(escape(f"{m.headline} [{m.status}]"), size="Large", weight="Bolder", color=color),
        _text(escape(m.text)),
    ]
    if m.summary:
        body.append(_text(escape(m.summary), isSubtle=True))
    body.append({"type": "FactSet", "facts": [{"title": k, "value": clip(escape(v), 300)} for k, v in m.facts()]})
    if m.evidence:
        body.append(_text("Top evidence", weight="Bolder", spacing="Medium"))
        body.extend(_text("- " + escape(e), spacing="None") for e in m.evidence)
    if m.plan:
        body.append(_text(escape(f"Plan {m.plan_id}".strip()), weight="Bolder", spacing="Medium"))
        body.extend(_text("- " + escape(p), spacing="None") for p in m.plan)
    return {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard",
            "version": "1.4", "fallbackText": clip(f"{m.headline}: {m.text}", 500), "body": body,
            "actions": [{"type": "Action.OpenUrl", "title": "Open in the console (approve there)", "url": m.link}]}


def render(m: Message) -> dict[str, Any]:
    return {"type": "message", "attachments": [
        {"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None, "content": card(m)}]}
