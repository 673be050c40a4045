"""The loop's recent raw telemetry, kept in the store's file so that a restart (kill -9, a new leader on the same
disk, an upgrade) diagnoses on the history it had, not on two fresh scrapes.

A hang is "requests held while the heartbeat is flat for two scrapes", a surge is "arrivals ×2 against the
baseline": both need the past. The telemetry log (postmortem/telemetry.py) keeps features for charts, not the
counters that features are computed from, so the selected samples of each round's pages go here, compressed, for
the last `keep` rounds (the autopilot's own history length).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import zlib
from pathlib import Path
from typing import Any

from llm_oncall.signals.events import Event
from llm_oncall.signals.exposition import Page, Sample
from llm_oncall.signals.source import Batch, Observation, Target

SCHEMA = "CREATE TABLE IF NOT EXISTS raw_rounds (seq INTEGER PRIMARY KEY AUTOINCREMENT, t REAL NOT NULL, " \
         "body BLOB NOT NULL)"


def _page(p: Page) -> dict[str, Any]:
    return {"s": {n: [[list(map(list, s.labels)), s.value, s.timestamp] for s in ss] for n, ss in p.samples.items()},
            "ty": p.types, "e": p.errors, "l": p.lines}


def _unpage(d: dict[str, Any]) -> Page:
    samples = {n: [Sample(n, tuple((str(k), str(v)) for k, v in lab), float(val),
                          None if ts is None else float(ts)) for lab, val, ts in ss]
               for n, ss in d["s"].items()}
    return Page(samples=samples, types=dict(d["ty"]), errors=int(d["e"]), lines=int(d["l"]))


def encode(batch: Batch) -> bytes:
    body = {"o": [{"n": o.target.name, "u": o.target.url, "k": o.target.kind, "lb": dict(o.target.labels),
                   "t": o.t, "p": _page(o.page) if o.page is not None else None, "er": o.error}
                  for o in batch.observations],
            "ev": [e.to_json() for e in batch.events], "lg": batch.logs}
    return zlib.compress(json.dumps(body, separators=(",", ":")).encode(), 6)


def decode(blob: bytes) -> Batch:
    body = json.loads(zlib.decompress(blob))
    obs = [Observation(Target(o["n"], o["u"], o["k"], o["lb"]), float(o["t"]),
                       _unpage(o["p"]) if o["p"] is not None else None, o["er"]) for o in body["o"]]
    return Batch(observations=obs, events=[Event.from_json(e) for e in body["ev"]],
                 logs={str(k): list(v) for k, v in body["lg"].items()})


class History:
    def __init__(self, path: Path | str, keep: int) -> None:
        self.keep = keep
        self.db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=5.0)
        self.db.execute(SCHEMA)
        self.lock = threading.Lock()

    def close(self) -> None:
        self.db.close()

    def append(self, t: float, batch: Batch) -> None:
        blob = encode(batch)
        with self.lock:
            self.db.execute("BEGIN")
            self.db.execute("INSERT INTO raw_rounds (t, body) VALUES (?, ?)", (t, blob))
            self.db.execute("DELETE FROM raw_rounds WHERE seq <= (SELECT MAX(seq) FROM raw_rounds) - ?", (self.keep,))
            self.db.execute("COMMIT")

    def load(self, since: float) -> list[Batch]:
        """The rounds recorded after `since` (older ones describe a fleet that has moved on), oldest first; a row
        that no longer decodes is skipped."""
        out: list[Batch] = []
        with self.lock:
            rows = self.db.execute("SELECT body FROM raw_rounds WHERE t > ? ORDER BY seq", (since,)).fetchall()
        for (blob,) in rows:
            try:
                out.append(decode(blob))
            except (ValueError, KeyError, TypeError, zlib.error):
                continue
        return out
