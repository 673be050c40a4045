"""The telemetry of an incident window, kept for its postmortem: per-scrape feature snapshots in the store's file.

The incident store keeps the lifecycle and the timeline, the actions ledger the plans and the audit; neither keeps
the numbers the charts and the impact estimate need.  Whoever runs the autopilot (`drill --act`, the on-call
loop of `serve`) calls `TelemetryLog.record_scrape` after every scrape: every numeric diagnosis feature of the fleet
(booleans as 0/1, unknown values not written), a few values per pod, the diagnosis of that scrape (scope
`diagnosis`, signal = incident id, value = 2 page / 1 warn / 0 none) and the cluster events the snapshot saw.
Times are Unix seconds (UTC), the clock of the incident store.  `prune` bounds a long-running file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_oncall.signals.snapshot import Snapshot

SCHEMA = """
CREATE TABLE IF NOT EXISTS telemetry (t REAL NOT NULL, scope TEXT NOT NULL, signal TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (t, scope, signal));
CREATE TABLE IF NOT EXISTS telemetry_events (t REAL NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL,
    PRIMARY KEY (t, kind, detail));
CREATE TABLE IF NOT EXISTS telemetry_notes (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

FLEET = "fleet"
DIAGNOSIS = "diagnosis"
POD_SIGNALS = ("ttft_p99", "waiting", "running", "kv_usage", "requests_per_s", "errors_per_s", "http_5xx_per_s",
               "prefix_hit_rate")
SEVERITY_RANK = {"page": 2.0, "warn": 1.0, "none": 0.0}


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, int | float) and v == v and abs(float(v)) != float("inf"):
        return float(v)
    return None


@dataclass(frozen=True)
class Sample:
    t: float
    scope: str
    signal: str
    value: float


@dataclass(frozen=True)
class ClusterEvent:
    t: float
    kind: str
    detail: str


class TelemetryLog:
    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=5.0)
        self.db.executescript(SCHEMA)
        self.lock = threading.Lock()

    def close(self) -> None:
        self.db.close()

    def record(self, t: float, fleet: Mapping[str, Any], pods: Mapping[str, Mapping[str, Any]] | None = None,
               diagnosis: tuple[str, str] | None = None, events: list[ClusterEvent] | None = None) -> int:
        """One scrape: fleet features, per-pod values, (incident, severity), events; the rows written."""
        rows = [(t, FLEET, k, x) for k, v in fleet.items() if (x := _num(v)) is not None]
        for pod, values in (pods or {}).items():
            rows += [(t, pod, k, x) for k, v in values.items() if (x := _num(v)) is not None]
        if diagnosis is not None:
            rows.append((t, DIAGNOSIS, diagnosis[0], SEVERITY_RANK.get(diagnosis[1], 0.0)))
        with self.lock:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO telemetry VALUES (?, ?, ?, ?)", rows)
            self.db.executemany("INSERT OR IGNORE INTO telemetry_events VALUES (?, ?, ?)",
                                [(e.t, e.kind, e.detail) for e in events or ()])
            self.db.execute("COMMIT")
        return len(rows)

    def record_scrape(self, t: float, features: Mapping[str, Any], snap: Snapshot | None,
                      diagnosis: tuple[str, str], epoch: float = 0.0) -> int:
        """One round of the on-call loop (or a drill): its features, each pod's values from the snapshot (and its
        golden-probe mismatches), the diagnosis and the events. ``epoch`` shifts the snapshot's clock (a drill's
        simulated seconds) onto the store's Unix time."""
        pods = {p.name: {"up": p.up, **{k: getattr(p, k) for k in POD_SIGNALS}} for p in snap.pods} if snap else {}
        for lab, val in snap.extra_rates("llm_oncall_probe_mismatches_total") if snap else ():
            if lab.get("pod") in pods:
                row = pods[lab["pod"]]
                row["probe_mismatches_per_s"] = float(row.get("probe_mismatches_per_s") or 0.0) + val
        events = [ClusterEvent(epoch + e.t, e.kind, e.detail) for e in snap.events] if snap else []
        return self.record(t, features, pods, diagnosis, events)

    def note(self, key: str, value: Any) -> None:
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO telemetry_notes VALUES (?, ?)", (key, json.dumps(value)))

    def prune(self, before: float, keep: Sequence[tuple[float, float]] = ()) -> None:
        """Drop rows older than ``before``, except those inside the ``keep`` windows (incidents' own)."""
        with self.lock:
            self.db.execute("BEGIN")
            self.db.execute("CREATE TEMP TABLE IF NOT EXISTS keep_windows (a REAL NOT NULL, b REAL NOT NULL)")
            self.db.execute("DELETE FROM temp.keep_windows")
            self.db.executemany("INSERT INTO temp.keep_windows VALUES (?, ?)", list(keep))
            self.db.execute("DELETE FROM telemetry WHERE t < ? AND NOT EXISTS "
                            "(SELECT 1 FROM temp.keep_windows w WHERE t BETWEEN w.a AND w.b)", (before,))
            self.db.execute("DELETE FROM telemetry_events WHERE t < ? AND NOT EXISTS "
                            "(SELECT 1 FROM temp.keep_windows w WHERE t BETWEEN w.a AND w.b)", (before,))
            self.db.execute("COMMIT")


def _has(db: sqlite3.Connection, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None


def read(db: sqlite3.Connection, since: float, until: float) -> tuple[list[Sample], list[ClusterEvent]]:
    """The samples and events in [since, until] (empty when the file holds no telemetry)."""
    if not _has(db, "telemetry"):
        return [], []
    samples = [Sample(float(t), str(s), str(n), float(v)) for t, s, n, v in db.execute(
        "SELECT t, scope, signal, value FROM telemetry WHERE t >= ? AND t <= ? ORDER BY t, scope, signal",
        (since, until))]
    events = [ClusterEvent(float(t), str(k), str(d)) for t, k, d in db.execute(
        "SELECT t, kind, detail FROM telemetry_events WHERE t >= ? AND t <= ? ORDER BY t, kind, detail",
        (since, until))]
    return samples, events


def notes(db: sqlite3.Connection) -> dict[str, Any]:
    if not _has(db, "telemetry_notes"):
        return {}
    return {str(k): json.loads(v) for k, v in db.execute("SELECT key, value FROM telemetry_notes ORDER BY key")}


