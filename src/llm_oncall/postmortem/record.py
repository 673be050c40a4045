"""The incident record a postmortem is written from: the incident store (incident, diagnosis, timeline, alerts,
approvals), the plan the actions ledger saved in the same file, and the telemetry kept for the window."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from llm_oncall.incidents import IncidentStore, StoreError
from llm_oncall.postmortem import telemetry
from llm_oncall.postmortem.telemetry import FLEET, ClusterEvent, Sample

LOOKBACK_S = 900.0
"""Telemetry before the page that the postmortem reads (the baseline and the first symptom)."""
AFTER_S = 300.0
"""Telemetry after the end of the incident."""


class RecordError(Exception):
    """No such file, not an incident store, or no such incident."""

    def __init__(self, message: str, code: int = 3) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Event:
    t: float
    kind: str
    actor: str
    detail: dict[str, Any]


@dataclass
class Record:
    id: str
    incident: str
    status: str
    title: str
    opened_at: float
    resolved_at: float | None
    diagnosis: dict[str, Any]
    timeline: list[Event]
    plan: dict[str, Any] | None
    alerts: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    cluster_events: list[ClusterEvent] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def end(self) -> float:
        last = max((e.t for e in self.timeline), default=self.opened_at)
        return self.resolved_at if self.resolved_at is not None else last

    def times(self) -> list[float]:
        return sorted({s.t for s in self.samples if s.scope == FLEET})

    def series(self, signal: str, scope: str = FLEET) -> list[tuple[float, float]]:
        return [(s.t, s.value) for s in self.samples if s.scope == scope and s.signal == signal]

    def scopes(self) -> list[str]:
        return sorted({s.scope for s in self.samples if s.scope not in (FLEET, telemetry.DIAGNOSIS)})

    def diagnoses(self) -> dict[float, tuple[str, float]]:
        """Per scrape: (incident, severity rank 2 page / 1 warn / 0 none)."""
        return {s.t: (s.signal, s.value) for s in self.samples if s.scope == telemetry.DIAGNOSIS}

    def decided(self) -> dict[str, Any]:
        """The diagnosis the response acted on (the plan's, at the page), else the incident's latest (the store
        keeps the latest: after a fix the fleet may page something else, e.g. cold caches after a restart)."""
        planned = (self.plan or {}).get("diagnosis")
        return dict(planned) if isinstance(planned, dict) and planned.get("incident") else self.diagnosis

    @property
    def kind(self) -> str:
        """The incident this postmortem is about: the one acted on."""
        return str(self.decided().get("incident") or self.incident)

    def events(self, kind: str) -> list[Event]:
        return [e for e in self.timeline if e.kind == kind]


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _has(db: sqlite3.Connection, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None


def load(path: Path | str, incident_id: str) -> Record:
    """Read one incident; RecordError (code 3) for a missing file, a file that is no store, an unknown id."""
    p = Path(path)
    if not p.is_file():
        raise RecordError(f"--db {p}: no such file")
    try:
        probe = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            ok = _has(probe, "incidents")
        finally:
            probe.close()
    except sqlite3.DatabaseError as exc:
        raise RecordError(f"--db {p}: not an SQLite incident store ({exc})") from exc
    if not ok:
        raise RecordError(f"--db {p}: no incidents table (not an llm-oncall incident store)")
    try:
        store = IncidentStore(p)
    except (StoreError, RuntimeError, OSError, sqlite3.DatabaseError) as exc:
        raise RecordError(f"--db {p}: {exc}") from exc
    try:
        inc = store.get(incident_id)
        if inc is None:
            known = [r["id"] for r in store.incidents()][:5]
            hint = f"; incidents in it: {', '.join(known)}" if known else "; it holds no incidents"
            raise RecordError(f"no incident {incident_id} in {p}{hint}")
        db = store.db
        plan = None
        if inc.get("plan_id") and _has(db, "plans"):
            row = db.execute("SELECT body FROM plans WHERE id = ?", (inc["plan_id"],)).fetchone()
            plan = json.loads(row[0]) if row else None
        timeline = [Event(_epoch(e["at"]), e["kind"], e["actor"], e["detail"] if isinstance(e["detail"], dict)
                          else {"detail": e["detail"]}) for e in inc.get("timeline", [])]
        if plan is None:  # no ledger in the file: the plan as the timeline has it
            ev = next((e for e in timeline if e.kind == "plan"), None)
            plan = dict(ev.detail) if ev is not None else None
        approvals = [{"action_id": a, "decision": d, "actor": who, "at": at} for a, d, who, at in db.execute(
            "SELECT action_id, decision, actor, at FROM approvals WHERE incident_id = ? ORDER BY at",
            (incident_id,))]
        opened = float(inc["opened_at_s"])
        resolved = _epoch(inc["resolved_at"]) if inc.get("resolved_at") else None
        rec = Record(id=inc["id"], incident=inc["incident"], status=inc["status"], title=inc["title"] or "",
                     opened_at=opened, resolved_at=resolved, diagnosis=inc.get("diagnosis") or {},
                     timeline=timeline, plan=plan, alerts=inc.get("alert_list", []), approvals=approvals)
        rec.samples, rec.cluster_events = telemetry.read(db, opened - LOOKBACK_S, rec.end + AFTER_S)
        rec.notes = telemetry.notes(db)
        return rec
    except sqlite3.DatabaseError as exc:
        raise RecordError(f"--db {p}: {exc}") from exc
    finally:
        store.close()
