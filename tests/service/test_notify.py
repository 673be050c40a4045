"""Notifications against a local receiver: a generic JSON webhook and a Slack-compatible message, 5xx retried with
back-off until it is taken, a 4xx not retried; each delivery on the incident's timeline."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from tests.service.test_api import KV
from tests.testkit import wait_for


class Receiver:
    def __init__(self, fail_first: int = 0, code: int = 200) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.hits = 0
        self.fail_first = fail_first
        self.code = code
        self.lock = threading.Lock()
        rec = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with rec.lock:
                    rec.hits += 1
                    code = 503 if rec.hits <= rec.fail_first else rec.code
                    if code == 200:
                        rec.bodies.append(body)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.httpd.shutdown()
        r.httpd.server_close()


def test_webhook_and_slack_with_retries(start_service: Any, receivers: list[Receiver]) -> None:
    hook, slack, refuse = Receiver(fail_first=2), Receiver(), Receiver(code=400)
    receivers += [hook, slack, refuse]
    svc = start_service(source=KV, mode="approve", notify=[
        {"kind": "webhook", "url": hook.url, "retries": 4},
        {"kind": "slack", "url": slack.url},
        {"kind": "webhook", "url": refuse.url}])
    svc.notifier.base_delay_s = 0.05
    wait_for(lambda: any(b["event"] == "plan" for b in hook.bodies), 60, "the plan notification (webhook)")
    wait_for(lambda: len(slack.bodies) >= 2, 30, "two Slack messages")
    opened = hook.bodies[0]
    assert opened["event"] == "opened" and opened["incident_id"].startswith("inc-") and "kv-capacity" in opened["text"]
    plan = next(b for b in hook.bodies if b["event"] == "plan")
    assert "awaiting approval" in plan["text"]
    assert slack.bodies[0]["text"].startswith("*llm-oncall* inc-") and slack.bodies[0]["blocks"]
    iid = opened["incident_id"]
    notes = [e["detail"] for e in svc.store.timeline(iid) if e["kind"] == "notification"]
    first_hook = next(n for n in notes if n["url"] == hook.url)
    assert first_hook["outcome"] == "sent" and first_hook["attempts"] == 3  # two 503s, then taken
    refused = [n for n in notes if n["url"] == refuse.url]
    assert refused and all(n["outcome"] == "failed" and n["attempts"] == 1 and n["code"] == 400 for n in refused)
    assert refuse.bodies == []


def test_no_notify_targets_sends_nothing(start_service: Any) -> None:
    svc = start_service()
    assert svc.notifier.thread is None
