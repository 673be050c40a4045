"""The generic JSON webhook: everything the message has, as data (version 2 adds the structured message and the
console link; the version 1 keys stay)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from llm_oncall.service.notifiers.message import Message


def render(m: Message, detail: dict[str, Any], api_url: str) -> dict[str, Any]:
    return {"version": "2", "source": "llm-oncall", "incident_id": m.incident_id, "event": m.event, "text": m.text,
            "detail": detail, "url": api_url, "console_url": m.link, "message": asdict(m)}
