"""Versioned schema migrations: a `schema_version` table and ordered steps, each applied once in a transaction.

The actions ledger (actions/ledger.py) keeps its own tables (plans, executions, cooldowns, audit,
configmap_versions) in the same file; these migrations never touch them.
"""

from __future__ import annotations

import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # 1: incidents, alerts keyed on (fingerprint, startsAt), the timeline
    """
    CREATE TABLE incidents (id TEXT PRIMARY KEY, incident TEXT NOT NULL, status TEXT NOT NULL,
        opened_at REAL NOT NULL, updated_at REAL NOT NULL, resolved_at REAL, title TEXT NOT NULL DEFAULT '',
        diagnosis TEXT);
    CREATE TABLE alerts (fingerprint TEXT NOT NULL, starts_at TEXT NOT NULL, group_key TEXT NOT NULL,
        incident_id TEXT NOT NULL REFERENCES incidents(id), status TEXT NOT NULL, alertname TEXT NOT NULL,
        labels TEXT NOT NULL, annotations TEXT NOT NULL, ends_at TEXT, received_at REAL NOT NULL,
        updated_at REAL NOT NULL, PRIMARY KEY (fingerprint, starts_at));
    CREATE TABLE timeline (seq INTEGER PRIMARY KEY AUTOINCREMENT, incident_id TEXT NOT NULL REFERENCES incidents(id),
        at REAL NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL, detail TEXT NOT NULL);
    """,
    # 2: indexes, the plan an incident follows, approvals by action id
    """
    CREATE INDEX timeline_incident ON timeline(incident_id, seq);
    CREATE INDEX alerts_group ON alerts(group_key);
    CREATE INDEX incidents_status ON incidents(status);
    ALTER TABLE incidents ADD COLUMN plan_id TEXT;
    CREATE TABLE approvals (action_id TEXT PRIMARY KEY, plan_id TEXT NOT NULL, incident_id TEXT NOT NULL,
        decision TEXT NOT NULL, actor TEXT NOT NULL, at REAL NOT NULL);
    """,
    # 3: an override-role approval of a guard-blocked action carries its reason
    """
    ALTER TABLE approvals ADD COLUMN override TEXT;
    """,
)
LATEST = len(MIGRATIONS)


def version(db: sqlite3.Connection) -> int:
    db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(db: sqlite3.Connection, upto: int = LATEST) -> int:
    """Apply the steps after the file's version (each in its own transaction); the version reached."""
    current = version(db)
    if current > LATEST:
        raise RuntimeError(f"the database is at schema version {current}, newer than this llm-oncall ({LATEST})")
    for n in range(current + 1, upto + 1):
        statements = [s.strip() for s in MIGRATIONS[n - 1].split(";") if s.strip()]
        db.execute("BEGIN IMMEDIATE")
        try:
            if version(db) >= n:  # another process migrated meanwhile
                db.execute("COMMIT")
                continue
            for stmt in statements:
                db.execute(stmt)
            db.execute("INSERT INTO schema_version VALUES (?)", (n,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return version(db)
