"""What a notification says, before any vendor's format: the incident, the diagnosis with its top evidence, the plan
and the link to the console's incident page. Built from the loop's note (incident id, event, text, detail) and what
the notifier remembers of the incident (the last diagnosis and plan it saw, or the store's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

TOP_EVIDENCE = 3
TOP_ACTIONS = 6
TEXT_MAX = 1000
TITLE_MAX = 200
SUMMARY_MAX = 2000
LINE_MAX = 400
"""sizes every format respects before its own limits (a message is read on a phone, not a wall of text)"""


@dataclass(frozen=True)
class Note:
    """One call of the notifier by the loop."""

    incident_id: str
    event: str
    """opened | diagnosis | plan | action | effect | status"""
    text: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class Message:
    incident_id: str
    event: str
    text: str
    """the loop's one line for this event"""
    incident: str
    """the runbook id diagnosed (kv-capacity, …) or "" when unknown yet"""
    title: str
    severity: str
    """page | warn | none"""
    status: str
    """open | mitigating | mitigated | resolved"""
    link: str
    """the console's incident page"""
    confidence: float | None = None
    summary: str = ""
    runner_up: str = ""
    scope: str = ""
    evidence: tuple[str, ...] = ()
    plan_id: str = ""
    plan: tuple[str, ...] = ()

    @property
    def headline(self) -> str:
        what = self.incident or "incident"
        return f"{what}: {self.title}" if self.title and self.title != what else what

    @property
    def confidence_text(self) -> str:
        return f"{self.confidence:.0%}" if self.confidence is not None else "–"

    def facts(self) -> list[tuple[str, str]]:
        """Short labelled values every format shows (a fact set, fields, custom details)."""
        out = [("Incident", self.incident_id), ("Event", self.event), ("Status", self.status),
               ("Severity", self.severity), ("Confidence", self.confidence_text)]
        if self.runner_up:
            out.append(("Runner-up", self.runner_up))
        if self.scope:
            out.append(("Scope", self.scope))
        return out


@dataclass
class Context:
    """What the notifier knows of one incident across its notes (diagnosis and plan come in separate events)."""

    diagnosis: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    status: str = "open"
    actions: dict[str, str] = field(default_factory=dict)
    """action id → last status reported"""

    def update(self, note: Note) -> None:
        d = note.detail
        if isinstance(d.get("diagnosis"), dict):
            self.diagnosis = d["diagnosis"]
        elif note.event == "diagnosis":
            self.diagnosis = None  # a new diagnosis the note only names: the notifier reads it from the store
        if isinstance(d.get("plan"), dict):
            self.plan = d["plan"]
        elif d.get("plan_id") and (self.plan is None or self.plan.get("plan_id") != d["plan_id"]):
            self.plan = {"plan_id": d["plan_id"], "actions": list(d.get("actions") or [])}
        if isinstance(d.get("status"), str) and note.event == "status":
            self.status = d["status"]
        if note.event == "action" and d.get("action_id"):
            self.actions[str(d["action_id"])] = str(d.get("status", ""))


def console_link(base: str, incident_id: str) -> str:
    return f"{base.rstrip('/')}/incidents/{quote(incident_id, safe='')}"


def _evidence_line(e: Any) -> str:
    if not isinstance(e, dict):
        return str(e)
    text = e.get("text") or f"{e.get('signal', '?')} = {e.get('value')}"
    if e.get("baseline") is not None and "baseline" not in str(text):
        text = f"{text} (baseline {e['baseline']})"
    return f"{text} — {e['source']}" if e.get("source") else str(text)


def _action_line(a: Any, statuses: dict[str, str]) -> str:
    if not isinstance(a, dict):
        status = statuses.get(str(a))
        return f"{a}" + (f": {status}" if status else "")
    line = f"{a.get('kind', '?')} {a.get('target', '')}".strip()
    dry, guard = a.get("dry_run"), a.get("guard")
    if isinstance(dry, dict):
        line += f" — dry-run {'ok' if dry.get('ok') else 'FAILED'}"
    if isinstance(guard, dict):
        verdict = "allowed" if guard.get("allowed") else \
            "awaiting approval" if guard.get("approvable") or a.get("approvable") else "blocked"
        line += f"; guard: {verdict}"
        if verdict == "blocked" and guard.get("why"):
            line += f" ({guard['why']})"
    status = statuses.get(str(a.get("id", "")))
    if status:
        line += f" → {status}"
    return line


def _scope(d: dict[str, Any]) -> str:
    scope = d.get("scope") or {}
    if not isinstance(scope, dict):
        return ""
    parts = []
    pods = [str(p) for p in scope.get("pods") or []]
    if pods:
        parts.append("pods " + ", ".join(pods[:4]) + (f" (+{len(pods) - 4})" if len(pods) > 4 else ""))
    nodes = [str(n) for n in scope.get("nodes") or []]
    if nodes:
        parts.append("nodes " + ", ".join(nodes[:3]) + (f" (+{len(nodes) - 3})" if len(nodes) > 3 else ""))
    if scope.get("revision"):
        parts.append(f"revision {scope['revision']}")
    return "; ".join(parts)


def build(note: Note, ctx: Context, console_base: str) -> Message:
    d = ctx.diagnosis or {}
    runner = d.get("runner_up") if isinstance(d.get("runner_up"), dict) else None
    # a "diagnosis" note names the new diagnosis; other notes' `incident` may be something else (an effect's symptom)
    own = note.detail if note.event == "diagnosis" else {}
    conf = own.get("confidence", d.get("confidence"))
    plan = ctx.plan or {}
    actions = plan.get("actions") or []
    manual = [f"manual: {m.get('action', '?')}: {m.get('text', '')}" for m in plan.get("manual") or []
              if isinstance(m, dict)]
    lines = [_action_line(a, ctx.actions) for a in actions[:TOP_ACTIONS]]
    if len(actions) > TOP_ACTIONS:
        lines.append(f"… {len(actions) - TOP_ACTIONS} more")
    return Message(
        incident_id=note.incident_id, event=note.event, text=clip(note.text, TEXT_MAX),
        incident=str(own.get("incident") or d.get("incident") or note.detail.get("incident") or ""),
        title=clip(str(d.get("title") or ""), TITLE_MAX), severity=str(d.get("severity") or "page"), status=ctx.status,
        link=console_link(console_base, note.incident_id),
        confidence=float(conf) if isinstance(conf, int | float) else None,
        summary=clip(str(d.get("summary") or ""), SUMMARY_MAX),
        runner_up=(f"{runner.get('incident')} ({float(runner.get('confidence') or 0):.0%})" if runner else ""),
        scope=clip(_scope(d), LINE_MAX),
        evidence=tuple(clip(_evidence_line(e), LINE_MAX) for e in (d.get("evidence") or [])[:TOP_EVIDENCE]),
        plan_id=str(plan.get("plan_id") or ""),
        plan=tuple(clip(line, LINE_MAX) for line in lines + manual[:2]),
    )


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, an ellipsis marking a cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"
