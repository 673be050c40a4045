"""Notification formats, one module per vendor: a vendor-neutral message (message.py) rendered as the JSON body each
receiver accepts. Delivery (queue, retries) is service/notify.py."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from llm_oncall.service.config import NOTIFY_EVENTS, NotifyConfig
from llm_oncall.service.notifiers import mattermost, pagerduty, slack, teams, webhook
from llm_oncall.service.notifiers.message import Context, Message, Note, build, console_link

__all__ = ["Context", "Message", "Note", "body", "build", "console_link", "wants"]

ALL_EVENTS = NOTIFY_EVENTS


def wants(target: NotifyConfig, event: str) -> bool:
    default = pagerduty.DEFAULT_EVENTS if target.kind == "pagerduty" else ALL_EVENTS
    return event in (target.events or default)


def body(target: NotifyConfig, m: Message, detail: dict[str, Any], service_url: str) -> dict[str, Any] | None:
    """The JSON to POST to this target, or None when the target has nothing to do with this event."""
    if target.kind == "slack":
        return slack.render(m)
    if target.kind == "teams":
        return teams.render(m)
    if target.kind == "mattermost":
        return mattermost.render(m)
    if target.kind == "pagerduty":
        assert target.routing_key is not None
        severities = {str(k): str(v) for k, v in (target.severities or {}).items()}
        return pagerduty.render(m, target.routing_key.get_secret_value(), severities)
    return webhook.render(m, detail, f"{service_url}/api/v1/incidents/{quote(m.incident_id, safe='')}")
