"""Delivery of notifications, off the loop's thread. The loop calls the notifier as `notify(incident_id, event, text,
detail)`; the call only remembers the incident's diagnosis and plan and puts the note on each target's bounded queue
(it never blocks, never raises). One worker thread per target (a slow or failing receiver delays nobody else) renders
the vendor's body (service/notifiers/) and POSTs it: 5xx, 408, 429 and transport errors are retried with
exponential back-off and jitter, a 429/503 `Retry-After` is honoured (up to `max_retry_after_s`); other 4xx are
not retried (a re-send would be refused again). Every outcome — sent, failed, or dropped (queue full, or still
queued at shutdown) — is logged, counted (`counts`, `on_outcome` → `llm_oncall_notifications_total{outcome}`) and,
for sent and failed, a `notification` event on the incident's timeline. Nothing is lost silently."""

from __future__ import annotations

import contextlib
import email.utils
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx

from llm_oncall.incidents import IncidentStore, StoreError
from llm_oncall.service import notifiers
from llm_oncall.service.config import NotifyConfig
from llm_oncall.service.notifiers.message import Context, Note, clip
from llm_oncall.service.observability import Log

__all__ = ["Note", "Notifier", "retry_after_seconds"]

RETRYABLE = {408, 429}
MAX_CONTEXTS = 256
"""incidents whose diagnosis and plan the notifier remembers (the oldest is forgotten first)"""


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds to wait: delta-seconds or an HTTP date (RFC 9110 §10.2.3); None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class _Lane:
    """One target: its queue and its worker."""

    def __init__(self, target: NotifyConfig) -> None:
        self.target = target
        self.queue: queue.Queue[tuple[Note, Context] | None] = queue.Queue(maxsize=target.queue_size)
        self.thread: threading.Thread | None = None


class Notifier:
    def __init__(self, targets: list[NotifyConfig], store: IncidentStore, log: Log, service_url: str = "",
                 base_delay_s: float = 0.5, max_delay_s: float = 30.0,
                 on_outcome: Callable[[str], None] | None = None, max_retry_after_s: float = 300.0,
                 rng: random.Random | None = None) -> None:
        self.targets = targets
        self.store = store
        self.log = log
        self.service_url = service_url.rstrip("/")
        self.base_delay_s = base_delay_s
        self.max_delay_s = max_delay_s
        self.max_retry_after_s = max_retry_after_s
        self.on_outcome = on_outcome
        self.rng = rng or random.Random()  # noqa: S311 — jitter, not a secret
        self.lanes = [_Lane(t) for t in targets]
        self.contexts: dict[str, Context] = {}
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        """the first lane's worker (kept for callers that check whether delivery runs at all)"""

    # ---- the loop's side -----------------------------------------------------------------------------------
    def start(self) -> None:
        for i, lane in enumerate(self.lanes):
            lane.thread = threading.Thread(target=self._run, args=(lane,), name=f"notify-{i}-{lane.target.kind}",
                                           daemon=True)
            lane.thread.start()
        self.thread = self.lanes[0].thread if self.lanes else None

    def __call__(self, incident_id: str, event: str, text: str, detail: dict[str, Any] | None = None) -> None:
        if not self.lanes:
            return
        try:
            note = Note(str(incident_id), str(event), str(text), dict(detail or {}))
            with self.lock:
                ctx = self.contexts.pop(note.incident_id, None) or Context()
                self.contexts[note.incident_id] = ctx  # most recently used last
                while len(self.contexts) > MAX_CONTEXTS:
                    self.contexts.pop(next(iter(self.contexts)))
                ctx.update(note)
                snap = replace(ctx, actions=dict(ctx.actions))
            for lane in self.lanes:
                if not notifiers.wants(lane.target, note.event):
                    continue
                try:
                    lane.queue.put_nowait((note, snap))
                except queue.Full:
                    self._outcome("dropped")
                    self.log.error("notification dropped: the queue is full", target=lane.target.label,
                                   incident_id=note.incident_id, event=note.event, queue_size=lane.target.queue_size)
        except Exception as exc:  # the loop must never fail because of a notification
            self._outcome("dropped")
            self.log.error("notification dropped: cannot queue it", error=f"{type(exc).__name__}: {exc}",
                           incident_id=incident_id, event=event)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Deliver what is queued with one attempt each (no back-off), for at most `timeout_s`; what is left is
        counted and logged as dropped."""
        self.stopping.set()
        deadline = time.monotonic() + timeout_s
        for lane in self.lanes:
            with contextlib.suppress(queue.Full):  # a full queue: the worker sees `stopping` after this item
                lane.queue.put_nowait(None)
        for lane in self.lanes:
            if lane.thread is not None:
                lane.thread.join(max(0.0, deadline - time.monotonic()))
        for lane in self.lanes:
            left = 0
            while True:
                try:
                    item = lane.queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    left += 1
                    self._outcome("dropped")
            if left:
                self.log.error("notifications not delivered before the stop", target=lane.target.label, dropped=left)

    # ---- the worker's side ---------------------------------------------------------------------------------
    def _outcome(self, outcome: str) -> None:
        with self.lock:
            self.counts[outcome] += 1
        if self.on_outcome is not None:
            try:
                self.on_outcome(outcome)
            except Exception as exc:
                self.log.error("notification outcome hook failed", error=str(exc))

    def _run(self, lane: _Lane) -> None:
        with httpx.Client(follow_redirects=False, headers={"User-Agent": "llm-oncall"}) as client:
            while True:
                try:  # once stopping, what is queued goes out (one attempt each), then the worker ends
                    item = lane.queue.get(timeout=0.5 if self.stopping.is_set() else None)
                except queue.Empty:
                    return
                if item is None:
                    if self.stopping.is_set():
                        return
                    continue
                try:
                    self._deliver(client, lane.target, *item)
                except Exception as exc:  # a bug in a format must not kill the worker
                    self._outcome("failed")
                    self.log.error("notification failed", target=lane.target.label, incident_id=item[0].incident_id,
                                   event=item[0].event, error=f"{type(exc).__name__}: {exc}")

    def _backoff(self, attempt: int) -> float:
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        return float(cap / 2 + self.rng.uniform(0, cap / 2))

    def _enrich(self, incident_id: str, ctx: Context) -> Context:
        """Fill in from the store what the notes did not carry: the diagnosis, and the plan's actions when a note
        gave only their ids (the store's `plan` event has kind, target, dry-run and guard)."""
        plan = ctx.plan
        need_plan = plan is not None and any(not isinstance(a, dict) for a in plan.get("actions") or [])
        if ctx.diagnosis is not None and not need_plan:
            return ctx
        try:
            inc = self.store.get(incident_id, timeline=need_plan)
        except StoreError:
            return ctx
        if inc is None:
            return ctx
        out = replace(ctx)
        if out.diagnosis is None and isinstance(inc.get("diagnosis"), dict):
            out.diagnosis = inc["diagnosis"]
        if need_plan and plan is not None:
            for e in reversed(inc.get("timeline") or []):
                d = e.get("detail")
                if e.get("kind") == "plan" and isinstance(d, dict) and d.get("plan_id") == plan.get("plan_id") \
                        and isinstance(d.get("actions"), list):
                    out.plan = d
                    break
        return out

    def _deliver(self, client: httpx.Client, t: NotifyConfig, note: Note, ctx: Context) -> None:
        message = notifiers.build(note, self._enrich(note.incident_id, ctx), t.console_url or self.service_url)
        body = notifiers.body(t, message, note.detail, self.service_url)
        if body is None:
            self.log.debug("notification not needed by this target", target=t.label, event=note.event)
            return
        attempts, code, error = 0, None, ""
        tries = 1 if self.stopping.is_set() else t.retries + 1
        while attempts < tries:
            attempts += 1
            wait_at_least = 0.0
            try:
                r = client.post(t.endpoint, json=body, timeout=t.timeout)
                code, error = r.status_code, ""
                if t.kind == "teams" and 200 <= code < 300 and "HTTP error 429" in r.text[:2000]:
                    code, error = 429, "Teams: HTTP error 429 in a 2xx answer"  # connectors throttle this way
                if 200 <= code < 300:
                    break
                error = clip(r.text.strip().replace("\n", " "), 200)
                if code < 500 and code not in RETRYABLE:
                    break  # the receiver refuses this body: a re-send would not help
                if code in (429, 503):
                    wait_at_least = min(retry_after_seconds(r.headers.get("Retry-After")) or 0.0,
                                        self.max_retry_after_s)
            except httpx.HTTPError as exc:
                code, error = None, clip(f"{type(exc).__name__}: {exc}", 200)
            if attempts >= tries or self.stopping.is_set():
                break
            if self.stopping.wait(max(self._backoff(attempts), wait_at_least)):
                error = (error + "; " if error else "") + "stopped before the next attempt"
                break
        outcome = "sent" if code is not None and 200 <= code < 300 else "failed"
        detail = {"kind": t.kind, "target": t.label, "event": note.event, "text": clip(note.text, 200),
                  "outcome": outcome, "attempts": attempts, "code": code, "error": error}
        self._outcome(outcome)
        try:
            self.store.event(note.incident_id, "notification", "notify", detail)
        except Exception as exc:  # locked, or closed at shutdown: the log line below still has it
            self.log.error("cannot record the notification", error=f"{type(exc).__name__}: {exc}", **detail)
        (self.log.info if outcome == "sent" else self.log.warning)("notification", **detail,
                                                                   incident_id=note.incident_id)
