"""The service's own /metrics (prometheus_client, a registry of its own) and JSON-line logs on stderr."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any, TextIO

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.loop_seconds = Histogram("llm_oncall_loop_duration_seconds", "One watch-loop round (collect, diagnose, "
                                      "act)", registry=r, buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.scrape_failures = Counter("llm_oncall_scrape_failures_total", "Targets that failed to answer a round",
                                       registry=r)
        self.loop_errors = Counter("llm_oncall_loop_errors_total", "Rounds that raised", registry=r)
        self.incidents = Gauge("llm_oncall_incidents", "Incidents in the store by status", ["status"], registry=r)
        self.actions = Counter("llm_oncall_actions_total", "Actions by outcome", ["outcome"], registry=r)
        self.webhooks = Counter("llm_oncall_webhooks_total", "Alertmanager deliveries by HTTP code", ["code"],
                                registry=r)
        self.notifications = Counter("llm_oncall_notifications_total", "Notifications by outcome (sent|failed)",
                                     ["outcome"], registry=r)
        self.leader = Gauge("llm_oncall_leader", "1 while this replica may act (it holds the Lease, or leader "
                            "election is off)", registry=r)
        self.leader_transitions = Counter("llm_oncall_leader_transitions_total", "Times this replica became or "
                                          "stopped being the leader", ["to"], registry=r)
        self.requests = Counter("llm_oncall_http_requests_total", "API requests by path and code", ["route", "code"],
                                registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class Log:
    """One JSON object per line: {"ts", "level", "msg", ...fields}."""

    def __init__(self, level: str = "info", stream: TextIO | None = None) -> None:
        self.level = LEVELS[level]
        self.stream = stream or sys.stderr
        self.lock = threading.Lock()

    def _emit(self, level: str, msg: str, fields: dict[str, Any]) -> None:
        if LEVELS[level] < self.level:
            return
        rec = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z",
               "level": level, "msg": msg, **fields}
        line = json.dumps(rec, default=str)
        with self.lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def debug(self, msg: str, **fields: Any) -> None:
        self._emit("debug", msg, fields)

    def info(self, msg: str, **fields: Any) -> None:
        self._emit("info", msg, fields)

    def warning(self, msg: str, **fields: Any) -> None:
        self._emit("warning", msg, fields)

    def error(self, msg: str, **fields: Any) -> None:
        self._emit("error", msg, fields)
