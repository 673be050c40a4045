"""The incident store: one SQLite file (WAL) shared with the actions ledger, each with its own tables.

Lifecycle: open → mitigating (an action was executed) → mitigated (the symptoms are gone) → resolved (gone for
long enough, or every alert resolved).  Every event an incident sees goes to its timeline: alert, diagnosis change,
plan, approval, action, verification, notification, status.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llm_oncall.incident_ids import FAULTS
from llm_oncall.incidents.schema import migrate

STATUSES = ("open", "mitigating", "mitigated", "resolved")
EVENT_KINDS = ("alert", "diagnosis", "plan", "approval", "action", "verification", "notification", "status", "effect",
               "note", "suppressed")
_ORDER = {s: i for i, s in enumerate(STATUSES)}
UNNAMED = ("unknown", "healthy")
"""Answers that name no runbook: they never rename an incident a runbook named."""


class StoreError(Exception):
    """The store cannot take the write now (locked, read-only, disk full): the caller answers 5xx / retries."""


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


class IncidentStore:
    def __init__(self, path: Path | str, clock: Callable[[], float] = time.time, busy_timeout_s: float = 5.0) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_s)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        self.lock = threading.RLock()
        self.clock = clock
        with self.lock:
            self.schema_version = migrate(self.db)

    def close(self) -> None:
        self.db.close()

    # ---- low level ------------------------------------------------------------------------------------
    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            try:
                return list(self.db.execute(sql, args).fetchall())
            except sqlite3.OperationalError as exc:
                raise StoreError(str(exc)) from exc

    def _tx(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        with self.lock:
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise StoreError(str(exc)) from exc
            try:
                out = fn(self.db)
                self.db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                self.db.execute("ROLLBACK")
                raise StoreError(str(exc)) from exc
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            return out

    @staticmethod
    def _event(db: sqlite3.Connection, incident_id: str, at: float, kind: str, actor: str, detail: Any) -> None:
        if kind not in EVENT_KINDS:
            raise ValueError(f"unknown timeline event kind {kind!r}")
        db.execute("INSERT INTO timeline (incident_id, at, kind, actor, detail) VALUES (?, ?, ?, ?, ?)",
                   (incident_id, at, kind, actor, json.dumps(detail, default=str)))

    # ---- incidents ------------------------------------------------------------------------------------
    def _open(self, db: sqlite3.Connection, incident: str, title: str, actor: str, at: float) -> str:
        iid = "inc-" + datetime.fromtimestamp(at, UTC).strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:4]
        db.execute("INSERT INTO incidents (id, incident, status, opened_at, updated_at, title) VALUES "
                   "(?, ?, 'open', ?, ?, ?)", (iid, incident, at, at, title))
        self._event(db, iid, at, "status", actor, {"status": "open", "incident": incident, "title": title})
        return iid

    def open_incident(self, incident: str, title: str = "", actor: str = "watch") -> str:
        at = self.clock()
        return str(self._tx(lambda db: self._open(db, incident, title, actor, at)))

    def active(self) -> dict[str, Any] | None:
        """The incident not yet resolved (the fleet has at most one at a time), newest first."""
        rows = self._rows("SELECT id FROM incidents WHERE status != 'resolved' ORDER BY opened_at DESC LIMIT 1")
        return self.get(rows[0][0], timeline=False) if rows else None

    def event(self, incident_id: str, kind: str, actor: str, detail: Any) -> None:
        at = self.clock()

        def go(db: sqlite3.Connection) -> None:
            self._event(db, incident_id, at, kind, actor, detail)
            db.execute("UPDATE incidents SET updated_at = ? WHERE id = ?", (at, incident_id))
        self._tx(go)

    def set_status(self, incident_id: str, status: str, actor: str, why: str) -> bool:
        """Move forward in the lifecycle (or back to open when symptoms return); False when already there."""
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
        at = self.clock()

        def go(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT status FROM incidents WHERE id = ?", (incident_id,)).fetchone()
            if row is None:
                raise KeyError(incident_id)
            cur = row[0]
            if cur == status or cur == "resolved":
                return False
            if _ORDER[status] < _ORDER[cur] and status != "open":
                return False
            db.execute("UPDATE incidents SET status = ?, updated_at = ?, resolved_at = ? WHERE id = ?",
                       (status, at, at if status == "resolved" else None, incident_id))
            self._event(db, incident_id, at, "status", actor, {"status": status, "from": cur, "why": why})
            return True
        return bool(self._tx(go))

    def set_diagnosis(self, incident_id: str, diagnosis: Mapping[str, Any], actor: str = "watch") -> bool:
        """Keep the latest diagnosis; the timeline gets an event only when what it says changes."""
        at = self.clock()

        def go(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT incident, diagnosis FROM incidents WHERE id = ?", (incident_id,)).fetchone()
            if row is None:
                raise KeyError(incident_id)
            old = json.loads(row[1]) if row[1] else None
            changed = old is None or old.get("incident") != diagnosis.get("incident") or \
                old.get("severity") != diagnosis.get("severity")
            title = str(diagnosis.get("title") or diagnosis.get("summary") or "")[:200]
            kind = diagnosis.get("incident", row[0])
            # An incident a runbook named keeps its name when a later scrape says less (`unknown` while the fix
            # restarts pods, `healthy` as it recovers): the timeline records the change, the incident stays what
            # it was diagnosed as and acted on.
            if row[0] not in UNNAMED and kind in UNNAMED:
                kind, title = row[0], ""
            db.execute("UPDATE incidents SET incident = ?, diagnosis = ?, updated_at = ?, "
                       "title = CASE WHEN ? != '' THEN ? ELSE title END WHERE id = ?",
                       (kind, json.dumps(diagnosis, default=str), at, title, title, incident_id))
            if changed:
                self._event(db, incident_id, at, "diagnosis", actor,
                            {"incident": diagnosis.get("incident"), "from": old.get("incident") if old else None,
                             "confidence": diagnosis.get("confidence"), "severity": diagnosis.get("severity"),
                             "summary": diagnosis.get("summary")})
            return changed
        return bool(self._tx(go))

    def set_plan(self, incident_id: str, plan_id: str, detail: Any, actor: str = "watch") -> None:
        at = self.clock()

        def go(db: sqlite3.Connection) -> None:
            db.execute("UPDATE incidents SET plan_id = ?, updated_at = ? WHERE id = ?", (plan_id, at, incident_id))
            self._event(db, incident_id, at, "plan", actor, detail)
        self._tx(go)

    # ---- alerts -------------------------------------------------------------------------------------
    def add_alerts(self, group_key: str, alerts: Iterable[Mapping[str, Any]], actor: str = "alertmanager",
                   ) -> tuple[str | None, int]:
        """Record a webhook's alerts, keyed on (fingerprint, startsAt): a re-sent alert updates its row, a new
        firing one opens an incident when none is open (or joins the open one).  (incident id, new alerts)."""
        at = self.clock()
        items = list(alerts)

        def go(db: sqlite3.Connection) -> tuple[str | None, int]:
            # llm-oncall's own exported rules label their alerts with the runbook (`incident`): such an alert joins
            # the open incident of that runbook, else an open one not yet named, else opens one named so. Any
            # other alert (the user's own rules) joins the open incident, else opens an `unknown` one.
            named = next((str(a["labels"]["incident"]) for a in items if a["labels"].get("incident") in FAULTS),
                         None)
            open_sql = "SELECT id FROM incidents WHERE status != 'resolved'"
            row = None
            for a in items:  # by fingerprint: an alert seen before stays with its incident while that is open
                row = row or db.execute("SELECT a.incident_id FROM alerts a JOIN incidents i ON i.id = a.incident_id "
                                        "WHERE a.fingerprint = ? AND a.starts_at = ? AND i.status != 'resolved'",
                                        (a["fingerprint"], a["startsAt"])).fetchone()
            if row is None and named is not None:
                row = db.execute(open_sql + " AND incident = ? ORDER BY opened_at DESC LIMIT 1", (named,)).fetchone() \
                    or db.execute(open_sql + " AND incident IN ('unknown', 'healthy') ORDER BY opened_at DESC LIMIT 1"
                                  ).fetchone()
            elif row is None:
                row = db.execute(open_sql + " ORDER BY opened_at DESC LIMIT 1").fetchone()
            iid: str | None = row[0] if row else None
            if iid is None:
                known = db.execute("SELECT a.incident_id FROM alerts a JOIN incidents i ON i.id = a.incident_id "
                                   "WHERE a.group_key = ? ORDER BY a.received_at DESC LIMIT 1", (group_key,)).fetchone()
                if any(a["status"] == "firing" for a in items):
                    first = next(a for a in items if a["status"] == "firing")
                    iid = self._open(db, named or "unknown", str(first["labels"].get("alertname", "")), actor, at)
                elif known is not None:
                    iid = known[0]
                else:
                    return None, 0  # resolved alerts nobody has seen firing: nothing to record
            new = 0
            for a in items:
                key = (a["fingerprint"], a["startsAt"])
                old = db.execute("SELECT status, incident_id FROM alerts WHERE fingerprint = ? AND starts_at = ?",
                                 key).fetchone()
                if old is None:
                    db.execute("INSERT INTO alerts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               (*key, group_key, iid, a["status"], a["labels"].get("alertname", ""),
                                json.dumps(a["labels"], sort_keys=True), json.dumps(a.get("annotations") or {}),
                                a.get("endsAt"), at, at))
                    new += 1
                    self._event(db, iid, at, "alert", actor, {"fingerprint": key[0], "startsAt": key[1],
                                                             "status": a["status"], "labels": a["labels"],
                                                             "group_key": group_key})
                elif old[0] != a["status"]:
                    db.execute("UPDATE alerts SET status = ?, ends_at = ?, updated_at = ? WHERE fingerprint = ? "
                               "AND starts_at = ?", (a["status"], a.get("endsAt"), at, *key))
                    self._event(db, old[1], at, "alert", actor, {"fingerprint": key[0], "startsAt": key[1],
                                                                "status": a["status"], "group_key": group_key})
            db.execute("UPDATE incidents SET updated_at = ? WHERE id = ?", (at, iid))
            return iid, new
        out: tuple[str | None, int] = self._tx(go)
        return out

    def firing_alerts(self, incident_id: str) -> int:
        return int(self._rows("SELECT COUNT(*) FROM alerts WHERE incident_id = ? AND status = 'firing'",
                              (incident_id,))[0][0])

    # ---- approvals ----------------------------------------------------------------------------------
    def decide(self, incident_id: str, plan_id: str, action_id: str, decision: str, actor: str,
               override: str | None = None) -> bool:
        """The first decision on an action wins (an approval re-sent is not a second one); False if decided.
        `override`: the reason an override-role approver gave for approving a guard-blocked action."""
        at = self.clock()

        def go(db: sqlite3.Connection) -> bool:
            try:
                db.execute("INSERT INTO approvals (action_id, plan_id, incident_id, decision, actor, at, override) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)", (action_id, plan_id, incident_id, decision, actor, at,
                                                            override))
            except sqlite3.IntegrityError:
                return False
            detail: dict[str, Any] = {"action_id": action_id, "decision": decision, "plan_id": plan_id}
            if override is not None:
                detail["override"] = override
            self._event(db, incident_id, at, "approval", actor, detail)
            return True
        return bool(self._tx(go))

    def decisions(self, plan_id: str) -> dict[str, dict[str, Any]]:
        rows = self._rows("SELECT action_id, decision, actor, at, override FROM approvals WHERE plan_id = ?",
                          (plan_id,))
        return {a: {"decision": d, "actor": who, "at": at, "override": o} for a, d, who, at, o in rows}

    def incident_of_plan(self, plan_id: str) -> str | None:
        rows = self._rows("SELECT id FROM incidents WHERE plan_id = ? ORDER BY opened_at DESC LIMIT 1", (plan_id,))
        return str(rows[0][0]) if rows else None

    # ---- reading ------------------------------------------------------------------------------------
    def incidents(self, status: str | None = None) -> list[dict[str, Any]]:
        sql = ("SELECT i.id, i.incident, i.status, i.opened_at, i.updated_at, i.resolved_at, i.title, i.plan_id, "
               "(SELECT COUNT(*) FROM alerts a WHERE a.incident_id = i.id) FROM incidents i")
        rows = self._rows(sql + (" WHERE i.status = ?" if status else "") + " ORDER BY i.opened_at DESC",
                          (status,) if status else ())
        return [{"id": r[0], "incident": r[1], "status": r[2], "opened_at": iso(r[3]), "updated_at": iso(r[4]),
                 "resolved_at": iso(r[5]), "title": r[6], "plan_id": r[7], "alerts": int(r[8]),
                 "opened_at_s": r[3], "resolved_at_s": r[5]} for r in rows]

    def get(self, incident_id: str, timeline: bool = True) -> dict[str, Any] | None:
        rows = self._rows("SELECT id, incident, status, opened_at, updated_at, resolved_at, title, plan_id, diagnosis "
                          "FROM incidents WHERE id = ?", (incident_id,))
        if not rows:
            return None
        r = rows[0]
        alerts = self._rows("SELECT fingerprint, starts_at, group_key, status, alertname, labels, ends_at FROM alerts "
                            "WHERE incident_id = ? ORDER BY received_at", (incident_id,))
        out: dict[str, Any] = {
            "id": r[0], "incident": r[1], "status": r[2], "opened_at": iso(r[3]), "updated_at": iso(r[4]),
            "resolved_at": iso(r[5]), "title": r[6], "plan_id": r[7], "opened_at_s": r[3], "resolved_at_s": r[5],
            "diagnosis": json.loads(r[8]) if r[8] else None, "alerts": len(alerts),
            "alert_list": [{"fingerprint": f, "startsAt": s, "group_key": g, "status": st, "alertname": n,
                            "labels": json.loads(lb), "endsAt": e} for f, s, g, st, n, lb, e in alerts]}
        if timeline:
            out["timeline"] = self.timeline(incident_id)
        return out

    def timeline(self, incident_id: str) -> list[dict[str, Any]]:
        rows = self._rows("SELECT seq, at, kind, actor, detail FROM timeline WHERE incident_id = ? ORDER BY seq",
                          (incident_id,))
        return [{"seq": s, "at": iso(at), "kind": k, "actor": who, "detail": json.loads(d)}
                for s, at, k, who, d in rows]

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for status, n in self._rows("SELECT status, COUNT(*) FROM incidents GROUP BY status"):
            out[str(status)] = int(n)
        return out
