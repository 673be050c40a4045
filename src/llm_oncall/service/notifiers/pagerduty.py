"""PagerDuty Events API v2 (https://developer.pagerduty.com/docs/events-api-v2/overview/, request schema:
PagerDuty/api-schema reference/events-v2/openapiv3.json): `trigger` when the incident opens and on the updates that
matter to the responder (a new diagnosis, the plan, open again), `resolve` when it is resolved. `dedup_key` is the
incident id, so a re-send — or a retry after a lost answer — is the same PagerDuty alert, never a second page; the
resolve closes exactly that alert. Severity: page → critical, warn → warning, none → info (configurable). The
console's incident page goes in `links`."""

from __future__ import annotations

import time
from typing import Any

from llm_oncall.service.notifiers.message import Message, clip

SUMMARY_MAX = 1024
DEDUP_MAX = 255
DEFAULT_SEVERITIES = {"page": "critical", "warn": "warning", "none": "info"}
DEFAULT_EVENTS = ("opened", "diagnosis", "plan", "status")


def action(m: Message) -> str | None:
    """trigger | resolve, or None when this event is not one PagerDuty needs."""
    if m.event == "status":
        if m.status == "resolved":
            return "resolve"
        return "trigger" if m.status == "open" else None  # mitigated/mitigating: the page stays until resolved
    return "trigger" if m.event in ("opened", "diagnosis", "plan") else None


def render(m: Message, routing_key: str, severities: dict[str, str] | None = None,
           now: float | None = None) -> dict[str, Any] | None:
    what = action(m)
    if what is None:
        return None
    body: dict[str, Any] = {"routing_key": routing_key, "event_action": what,
                            "dedup_key": clip(m.incident_id, DEDUP_MAX)}
    if what == "resolve":
        return body
    sev = {**DEFAULT_SEVERITIES, **(severities or {})}.get(m.severity, "critical")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    conf = f" ({m.confidence_text})" if m.confidence is not None else ""
    details: dict[str, Any] = {"event": m.event, "update": m.text, "status": m.status, "incident_id": m.incident_id,
                               "diagnosis": m.summary, "confidence": m.confidence_text}
    if m.runner_up:
        details["runner_up"] = m.runner_up
    if m.scope:
        details["scope"] = m.scope
    if m.evidence:
        details["evidence"] = list(m.evidence)
    if m.plan:
        details["plan"] = {"id": m.plan_id, "actions": list(m.plan)}
    details["console"] = m.link
    body.update({
        "payload": {"summary": clip(f"[{m.incident or 'incident'}] {m.title or m.text}{conf}", SUMMARY_MAX),
                    "source": clip(m.scope or "llm-oncall", 255), "severity": sev, "timestamp": stamp,
                    "component": m.incident or "unknown", "group": "llm-oncall", "class": m.incident or "unknown",
                    "custom_details": details},
        "client": "llm-oncall",
        "client_url": m.link,
        "links": [{"href": m.link, "text": f"llm-oncall incident {m.incident_id} (approve the plan here)"}],
    })
    return body
