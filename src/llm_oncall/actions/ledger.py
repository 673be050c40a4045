"""What the actions remember across restarts (SQLite, the incident store's file): plans, executions keyed by
idempotency key, cooldowns per (kind, target), the audit trail, and the ConfigMap versions seen."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS plans (id TEXT PRIMARY KEY, incident TEXT, created_at REAL, body TEXT);
CREATE TABLE IF NOT EXISTS executions (idempotency_key TEXT PRIMARY KEY, action_id TEXT, kind TEXT, target TEXT,
    status TEXT, at REAL, result TEXT);
CREATE TABLE IF NOT EXISTS cooldowns (kind TEXT, target TEXT, until REAL, PRIMARY KEY (kind, target));
CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL, actor TEXT, plan_id TEXT,
    action_id TEXT, step TEXT, detail TEXT);
CREATE TABLE IF NOT EXISTS configmap_versions (namespace TEXT, name TEXT, resource_version TEXT, seen_at REAL,
    data TEXT, PRIMARY KEY (namespace, name, resource_version));
CREATE TABLE IF NOT EXISTS gpu_incidents (node TEXT, gpu TEXT, incident_key TEXT, at REAL, rung TEXT,
    PRIMARY KEY (node, gpu, incident_key));
"""


class Ledger:
    def __init__(self, path: Path | str = ":memory:", clock: Any = time.time) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.executescript(SCHEMA)
        self.lock = threading.Lock()
        self.clock = clock

    def close(self) -> None:
        self.db.close()

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            return list(self.db.execute(sql, args).fetchall())

    # ---- plans and executions -------------------------------------------------------------------------
    def save_plan(self, plan_id: str, incident: str, body: dict[str, Any]) -> None:
        self._exec("INSERT OR REPLACE INTO plans VALUES (?, ?, ?, ?)", (plan_id, incident, self.clock(),
                                                                         json.dumps(body)))

    def plan(self, plan_id: str) -> dict[str, Any] | None:
        rows = self._exec("SELECT body FROM plans WHERE id = ?", (plan_id,))
        return json.loads(rows[0][0]) if rows else None

    def execution(self, key: str) -> dict[str, Any] | None:
        rows = self._exec("SELECT action_id, status, at, result FROM executions WHERE idempotency_key = ?", (key,))
        if not rows:
            return None
        a, s, at, r = rows[0]
        return {"action_id": a, "status": s, "at": at, "result": json.loads(r) if r else None}

    def claim(self, key: str, action_id: str, kind: str, target: str) -> bool:
        """Reserve the idempotency key before the call: False if an execution with it exists (no duplicate)."""
        try:
            self._exec("INSERT INTO executions VALUES (?, ?, ?, ?, 'started', ?, NULL)",
                       (key, action_id, kind, target, self.clock()))
        except sqlite3.IntegrityError:
            return False
        return True

    def finish(self, key: str, status: str, result: Any) -> None:
        self._exec("UPDATE executions SET status = ?, result = ?, at = ? WHERE idempotency_key = ?",
                   (status, json.dumps(result, default=str), self.clock(), key))

    def release(self, key: str) -> None:
        """A failed attempt gives its key back (a later run may try again)."""
        self._exec("DELETE FROM executions WHERE idempotency_key = ? AND status != 'executed'", (key,))

    # ---- cooldowns ----------------------------------------------------------------------------------
    def cooldown_until(self, kind: str, target: str) -> float | None:
        rows = self._exec("SELECT until FROM cooldowns WHERE kind = ? AND target = ?", (kind, target))
        return float(rows[0][0]) if rows else None

    def start_cooldown(self, kind: str, target: str, seconds: float, now: float) -> None:
        self._exec("INSERT OR REPLACE INTO cooldowns VALUES (?, ?, ?)", (kind, target, now + seconds))

    def recent(self, kind: str, since: float) -> list[dict[str, Any]]:
        rows = self._exec("SELECT target, at FROM executions WHERE kind = ? AND status = 'executed' AND at >= ?",
                          (kind, since))
        return [{"target": t, "at": at} for t, at in rows]

    # ---- audit --------------------------------------------------------------------------------------
    def audit(self, actor: str, plan_id: str, action_id: str, step: str, detail: Any) -> None:
        self._exec("INSERT INTO audit (at, actor, plan_id, action_id, step, detail) VALUES (?, ?, ?, ?, ?, ?)",
                   (self.clock(), actor, plan_id, action_id, step, json.dumps(detail, default=str)))

    def audit_trail(self, plan_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT seq, at, actor, plan_id, action_id, step, detail FROM audit"
        rows = self._exec(sql + " WHERE plan_id = ? ORDER BY seq", (plan_id,)) if plan_id else self._exec(
            sql + " ORDER BY seq")
        return [{"seq": s, "at": at, "actor": who, "plan_id": p, "action_id": a, "step": st,
                 "detail": json.loads(d)} for s, at, who, p, a, st, d in rows]

    # ---- ConfigMap history --------------------------------------------------------------------------
    def saw_configmap(self, namespace: str, name: str, resource_version: str, data: dict[str, str],
                      at: float) -> None:
        self._exec("INSERT OR IGNORE INTO configmap_versions VALUES (?, ?, ?, ?, ?)",
                   (namespace, name, resource_version, at, json.dumps(data, sort_keys=True)))

    def configmap_versions(self, namespace: str, name: str) -> list[dict[str, Any]]:
        rows = self._exec("SELECT resource_version, seen_at, data FROM configmap_versions WHERE namespace = ? AND "
                          "name = ? ORDER BY seen_at", (namespace, name))
        return [{"resource_version": rv, "seen_at": at, "data": json.loads(d)} for rv, at, d in rows]

    # ---- GPU history (repeat offenders) -------------------------------------------------------------
    def record_gpu_incident(self, node: str, gpu: str, incident_key: str, at: float, rung: str) -> None:
        """A GPU (node + uuid or index) the repair ladder served for an incident; one row per incident."""
        self._exec("INSERT OR IGNORE INTO gpu_incidents VALUES (?, ?, ?, ?, ?)", (node, gpu, incident_key, at, rung))

    def gpu_incidents(self, node: str, gpu: str | None, since: float, exclude: str = "") -> list[dict[str, Any]]:
        """Earlier incidents on this GPU (gpu given) or on any GPU of this node (gpu None) since `since`."""
        sql = ("SELECT incident_key, MIN(at), MIN(gpu) FROM gpu_incidents WHERE node = ? AND at >= ? AND "
               "incident_key != ?")
        args: tuple[Any, ...] = (node, since, exclude)
        if gpu is not None:
            sql += " AND gpu = ?"
            args += (gpu,)
        rows = self._exec(sql + " GROUP BY incident_key ORDER BY MIN(at)", args)
        return [{"incident_key": k, "at": at, "gpu": g} for k, at, g in rows]
