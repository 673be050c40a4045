"""Local stand-ins for the vendors' webhook endpoints: HTTP servers on 127.0.0.1 (free ports) that validate each body
against the vendor's published schema or example (tests/service/vendor/, see PROVENANCE.md) and answer from a script
(codes, Retry-After, a dropped connection), recording what they took."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema

VENDOR = Path(__file__).parent / "vendor"


def _load(name: str) -> Any:
    return json.loads((VENDOR / name).read_text(encoding="utf-8"))


def pagerduty_schema(strict: bool = True) -> dict[str, Any]:
    """The `POST /enqueue` request schema of PagerDuty's OpenAPI file, its components alongside so that `$ref`s
    resolve; `strict` also refuses keys the schema does not name (ours, to catch a typo)."""
    api = _load("pagerduty-events-v2.openapiv3.json")
    schema = copy.deepcopy(api["paths"]["/enqueue"]["post"]["requestBody"]["content"]["application/json"]["schema"])
    schema["components"] = copy.deepcopy(api["components"])
    if strict:
        schema["additionalProperties"] = False
        schema["components"]["schemas"]["Payload"]["additionalProperties"] = False
    return schema


def pagerduty_example() -> dict[str, Any]:
    api = _load("pagerduty-events-v2.openapiv3.json")
    body: dict[str, Any] = api["paths"]["/enqueue"]["post"]["requestBody"]["content"]["application/json"][
        "examples"]["event"]["value"]
    return body


def problems(kind: str, body: Any) -> list[str]:
    """Why this body does not match the vendor's schema ([] when it does)."""
    if kind == "pagerduty":
        out = [e.message for e in jsonschema.Draft7Validator(pagerduty_schema()).iter_errors(body)]
        if isinstance(body, dict):
            if len(body.get("dedup_key", "")) > 255:
                out.append("dedup_key over 255 characters")
            if len(body.get("payload", {}).get("summary", "")) > 1024:
                out.append("payload.summary over 1024 characters")
            if body.get("event_action") == "trigger" and "payload" not in body:
                out.append("a trigger needs a payload")
        return out
    if kind == "teams":
        out = [e.message for e in jsonschema.Draft7Validator(_load("teams-webhook-envelope.schema.json"))
               .iter_errors(body)]
        card_schema = jsonschema.Draft6Validator(_load("adaptive-card-1.4.0.schema.json"))
        for att in body.get("attachments", []) if isinstance(body, dict) else []:
            card = att.get("content", {})
            out += [f"card: {e.message[:300]}" for e in card_schema.iter_errors(card)]
            if card.get("version") not in ("1.0", "1.1", "1.2", "1.3", "1.4"):
                out.append(f"card version {card.get('version')} is newer than the 1.4 schema it is checked with")
            if "Action.Submit" in json.dumps(card):
                out.append("Action.Submit is not supported through incoming webhooks")
        return out
    name = {"slack": "slack-block-kit.schema.json", "mattermost": "mattermost-incoming-webhook.schema.json"}[kind]
    return [e.message[:300] for e in jsonschema.Draft7Validator(_load(name)).iter_errors(body)]


class Receiver:
    """Answers each POST with the next scripted reply (then `default`): an int code, (code, headers, body) or
    "drop" (read the request, then close the connection without an answer — a lost reply)."""

    def __init__(self, kind: str = "webhook", script: list[Any] | None = None, default: Any = 200,
                 on_accept: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.kind = kind
        self.script = list(script or [])
        self.default = default
        self.on_accept = on_accept
        self.bodies: list[Any] = []
        """bodies answered with a 2xx"""
        self.hits: list[tuple[float, Any]] = []
        """every request: (monotonic time, body)"""
        self.invalid: list[str] = []
        self.lock = threading.Lock()
        rec = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with rec.lock:
                    rec.hits.append((time.monotonic(), body))
                    reply = rec.script.pop(0) if rec.script else rec.default
                    if rec.kind != "webhook":
                        rec.invalid += [f"{rec.kind}: {p}" for p in problems(rec.kind, body)]
                if reply == "drop":
                    with rec.lock:  # the vendor took it; the answer is lost on the way back
                        rec._accept(body)
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                code, headers, text = (reply, {}, "") if isinstance(reply, int) else reply
                if 200 <= code < 300:
                    with rec.lock:
                        rec._accept(body)
                data = text.encode()
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def _accept(self, body: Any) -> None:
        self.bodies.append(body)
        if self.on_accept is not None:
            self.on_accept(body)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class PagerDutyService:
    """What PagerDuty does with the events it accepts (Events API v2 semantics): a trigger opens an alert for its
    (routing_key, dedup_key) unless one is open — then it is the same alert, updated; a resolve closes it."""

    def __init__(self) -> None:
        self.alerts: dict[tuple[str, str], dict[str, Any]] = {}
        self.pages = 0

    def __call__(self, body: dict[str, Any]) -> None:
        key = (body["routing_key"], body.get("dedup_key", ""))
        alert = self.alerts.get(key)
        if body["event_action"] == "trigger":
            if alert is None or alert["status"] == "resolved":
                self.pages += 1
                self.alerts[key] = {"status": "triggered", "log": [body]}
            else:
                alert["log"].append(body)
        elif body["event_action"] == "resolve" and alert is not None:
            alert["status"] = "resolved"
            alert["log"].append(body)
