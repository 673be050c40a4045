"""Notifications: a generic JSON webhook and a Slack-compatible message (`{"text": …}`), sent from a queue by one
thread with retries and exponential back-off (5xx, 429 and transport errors are retried; other 4xx are not).
Every delivery, sent or given up, is a `notification` event on the incident's timeline."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from llm_oncall.incidents import IncidentStore, StoreError
from llm_oncall.service.config import NotifyConfig
from llm_oncall.service.telemetry import Log


@dataclass(frozen=True)
class Note:
    incident_id: str
    event: str
    """opened | diagnosis | plan | action | status"""
    text: str
    detail: dict[str, Any]


def payload(target: NotifyConfig, note: Note, service_url: str) -> dict[str, Any]:
    if target.kind == "slack":
        return {"text": f"*llm-oncall* {note.incident_id}: {note.text}",
                "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                        "text": f"*{note.incident_id}* ({note.event})\n{note.text}\n"
                                                                f"<{service_url}/api/v1/incidents/{note.incident_id}"
                                                                f"|incident>"}}]}
    return {"version": "1", "source": "llm-oncall", "incident_id": note.incident_id, "event": note.event,
            "text": note.text, "detail": note.detail, "url": f"{service_url}/api/v1/incidents/{note.incident_id}"}


class Notifier:
    def __init__(self, targets: list[NotifyConfig], store: IncidentStore, log: Log, service_url: str = "",
                 base_delay_s: float = 0.5, max_delay_s: float = 30.0,
                 on_outcome: Callable[[str], None] | None = None) -> None:
        self.targets = targets
        self.store = store
        self.log = log
        self.service_url = service_url
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.on_outcome = on_outcome
        self.queue: queue.Queue[Note | None] = queue.Queue(maxsize=1000)
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.targets:
            self.thread = threading.Thread(target=self._run, name="notify", daemon=True)
            self.thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join(timeout_s)

    def __call__(self, incident_id: str, event: str, text: str, detail: dict[str, Any] | None = None) -> None:
        if not self.targets:
            return
        try:
            self.queue.put_nowait(Note(incident_id, event, text, detail or {}))
        except queue.Full:
            self.log.error("notification queue full; dropped", incident_id=incident_id, event=event)

    def _run(self) -> None:
        with httpx.Client(follow_redirects=False) as client:
            while True:
                note = self.queue.get()
                if note is None:
                    return
                for t in self.targets:
                    self._deliver(client, t, note)

    def _deliver(self, client: httpx.Client, t: NotifyConfig, note: Note) -> None:
        body = payload(t, note, self.service_url)
        attempts, code, error = 0, None, ""
        delay = self.base_delay_s
        while attempts < t.retries + 1:
            attempts += 1
            try:
                r = client.post(t.url, json=body, timeout=t.timeout)
                code, error = r.status_code, ""
                if 200 <= code < 300:
                    break
                if code < 500 and code != 429:
                    break  # the receiver refuses this body: a re-send would not help
            except httpx.HTTPError as exc:
                code, error = None, f"{type(exc).__name__}: {exc}"[:200]
            if attempts >= t.retries + 1 or self.stopping.wait(delay):
                break
            delay = min(self.max_delay_s, delay * 2)
        outcome = "sent" if code is not None and 200 <= code < 300 else "failed"
        detail = {"kind": t.kind, "url": t.url, "event": note.event, "outcome": outcome, "attempts": attempts,
                  "code": code, "error": error}
        try:
            self.store.event(note.incident_id, "notification", "notify", detail)
        except StoreError as exc:
            self.log.error("cannot record the notification", error=str(exc))
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        (self.log.info if outcome == "sent" else self.log.warning)("notification", **detail,
                                                                   incident_id=note.incident_id)
        time.sleep(0)  # let the store's other writers in between deliveries
