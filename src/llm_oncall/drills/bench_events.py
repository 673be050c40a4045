"""`bench events`: does the service keep up with a GPU event storm? One GPU-health tool fell hours behind at 10+
events/s; the goal here is 100 events/s.

The storm: Alertmanager webhook bodies (one firing alert each, as a per-event rule fires them), `rate` per second
for `seconds` of the storm's own clock, most of them from a few failing GPUs (each event a new `startsAt`: a new
alert to Alertmanager, so its fingerprint dedup does not help), the rest spread over the fleet. The same bodies go
through the service's alert path twice, each on a fresh SQLite store: as before (every event written) and through
the storm gate (deduplicated per node+GPU, one incident per node per cooldown). The handler is given by the caller
(the CLI builds the service's own: webhook validation, the gate, the store), so what is measured is what `serve`
does for POST /api/v1/alerts minus HTTP. Capacity = events per wall second of the serial handler (SQLite commits
wait on the disk, which CPU time does not see); the CPU share at the target rate is reported beside it.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TARGET_RATE = 100.0
Handler = Callable[[bytes], Any]
Factory = Callable[[Path, Callable[[], float], bool], Handler]
"""(db path, clock, gated) → the service's alert handler on that store."""


def storm(rate: float = TARGET_RATE, seconds: float = 60.0, nodes: int = 16, gpus: int = 8, failing: int = 3,
          storm_share: float = 0.9, seed: int = 7) -> list[tuple[float, bytes]]:
    """(t, webhook body) in time order."""
    rng = random.Random(seed)  # noqa: S311 - a benchmark's workload
    bad = [(f"gpu-node-{rng.randrange(nodes):02d}", str(rng.randrange(gpus))) for _ in range(failing)]
    out = []
    n = int(rate * seconds)
    for i in range(n):
        t = i / rate
        node, gpu = bad[i % failing] if rng.random() < storm_share else (
            f"gpu-node-{rng.randrange(nodes):02d}", str(rng.randrange(gpus)))
        xid = 48 if (node, gpu) in bad else rng.choice((13, 31, 43, 94))
        starts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_767_225_600 + t)) + f".{i % 1000:03d}Z"
        labels = {"alertname": "GpuXidError", "incident": "gpu-ecc", "node": node, "gpu": gpu, "xid": str(xid),
                  "namespace": "llm", "severity": "page"}
        alert = {"status": "firing", "labels": labels, "annotations": {"summary": f"Xid {xid} on {node} GPU {gpu}"},
                 "startsAt": starts, "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://prometheus/graph",
                 "fingerprint": hashlib.sha256(f"{node}/{gpu}/{i}".encode()).hexdigest()[:16]}
        body = {"version": "4", "groupKey": f'{{}}:{{alertname="GpuXidError", node="{node}"}}', "truncatedAlerts": 0,
                "status": "firing", "receiver": "llm-oncall", "groupLabels": {"alertname": "GpuXidError",
                                                                              "node": node},
                "commonLabels": labels, "commonAnnotations": {}, "externalURL": "http://alertmanager:9093",
                "alerts": [alert]}
        out.append((t, json.dumps(body).encode()))
    return out


@dataclass
class PathResult:
    cpu_s: float
    wall_s: float
    events: int
    incidents: int
    alert_rows: int
    timeline_rows: int

    @property
    def capacity(self) -> float:
        """Events per wall second: the handler is serial, and SQLite's commits wait on the disk (not CPU)."""
        return self.events / self.wall_s if self.wall_s > 0 else float("inf")

    @property
    def cpu_capacity(self) -> float:
        return self.events / self.cpu_s if self.cpu_s > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {"cpu_s": round(self.cpu_s, 3), "wall_s": round(self.wall_s, 3),
                "events_per_s": round(self.capacity, 1), "events_per_cpu_s": round(self.cpu_capacity, 1),
                "core_share_at_target": round(TARGET_RATE / self.cpu_capacity, 4),
                "keeps_up": self.capacity >= TARGET_RATE, "incidents": self.incidents, "alert_rows": self.alert_rows,
                "timeline_rows": self.timeline_rows}


def _measure(bodies: list[tuple[float, bytes]], factory: Factory, gated: bool) -> PathResult:
    with tempfile.TemporaryDirectory(prefix="llm-oncall-bench-events-") as tmp:
        db = Path(tmp) / "events.db"
        now = [0.0]
        handle = factory(db, lambda: 1_767_225_600.0 + now[0], gated)
        c0, w0 = time.process_time(), time.perf_counter()
        for t, body in bodies:
            now[0] = t
            handle(body)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        con = sqlite3.connect(db)
        try:
            counts = [int(con.execute(f"SELECT COUNT(*) FROM {tbl}").fetchone()[0])  # noqa: S608 - fixed names
                      for tbl in ("incidents", "alerts", "timeline")]
        finally:
            con.close()
    return PathResult(cpu, wall, len(bodies), *counts)


def run(factory: Factory, rate: float = TARGET_RATE, seconds: float = 60.0, seed: int = 7) -> dict[str, Any]:
    bodies = storm(rate, seconds, seed=seed)
    ungated = _measure(bodies, factory, gated=False)
    gated = _measure(bodies, factory, gated=True)
    return {"events": len(bodies), "offered_rate": rate, "storm_seconds": seconds, "target_rate": TARGET_RATE,
            "ungated": ungated.to_json(), "gated": gated.to_json(),
            "capacity_ratio": round(gated.capacity / ungated.capacity, 2) if ungated.capacity else None,
            "keeps_up": gated.capacity >= TARGET_RATE}
