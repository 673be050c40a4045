"""The HTTP API: Alertmanager receiver, incidents, approvals, /healthz, /metrics (stdlib HTTP server, threads).

Roles by bearer token (config `auth`): `webhook` posts alerts, `api` reads incidents, `approve` reads incidents
and approves or rejects actions, `override` also approves an action the guard blocks (with a reason, audited).
No token or an unknown one → 401; a known token without the role → 403.  An approval answers 202 only for an
action that can run (waiting, approvable, on an incident still open or mitigating); its outcome (executed,
failed, refused and why) follows on the incident's timeline, in its plan and through the notifiers.
/healthz and /metrics need no token.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from pydantic import ValidationError

from llm_oncall.actions.ledger import Ledger
from llm_oncall.incidents import IncidentStore, StoreError
from llm_oncall.service.config import ROLES, ServiceConfig
from llm_oncall.service.telemetry import Log, Metrics
from llm_oncall.service.watch import Watcher
from llm_oncall.service.webhook import Webhook


class Service(Protocol):
    """What the API needs of the service (service.app.Service)."""

    cfg: ServiceConfig
    log: Log
    metrics: Metrics
    store: IncidentStore
    ledger: Ledger
    watcher: Watcher

    def refresh_counts(self) -> None: ...

    def health(self) -> dict[str, Any]: ...

    def find_action(self, action_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None: ...

    def is_leader(self) -> bool: ...

_INCIDENT = re.compile(r"^/api/v1/incidents/([A-Za-z0-9._-]{1,80})$")
_ACTION = re.compile(r"^/api/v1/actions/([A-Za-z0-9._-]{1,80})/(approve|reject)$")
_APPROVER = re.compile(r"^[A-Za-z0-9@._ -]{1,64}$")


class HttpError(Exception):
    def __init__(self, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.headers = headers or {}


def token_id(token: str) -> str:
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:8]


def make_server(service: Service, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        server_version = "llm-oncall"
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            route = path if not path.startswith("/api/v1/") else re.sub(r"/[^/]+/(approve|reject)$", r"/{id}/\1",
                                                                        re.sub(r"^(/api/v1/incidents)/.+$",
                                                                               r"\1/{id}", path))
            try:
                code, ctype, body = self._route(method, path)
                extra: dict[str, str] = {}
            except HttpError as exc:
                code, ctype, extra = exc.code, "application/json", exc.headers
                body = json.dumps({"error": exc.message}).encode()
                if code >= 500 or code in (401, 403, 413):
                    service.log.warning("request refused", method=method, path=path, code=code, why=exc.message)
            except Exception as exc:
                code, ctype, extra = 500, "application/json", {}
                body = json.dumps({"error": "internal error"}).encode()
                service.log.error("request failed", method=method, path=path, error=f"{type(exc).__name__}: {exc}")
            service.metrics.requests.labels(route if route.startswith(("/api/", "/healthz", "/metrics")) else "other",
                                            str(code)).inc()
            if path == "/api/v1/alerts":
                service.metrics.webhooks.labels(str(code)).inc()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra.items():
                self.send_header(k, v)
            if code in (400, 411, 413):
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

        # ---- helpers ------------------------------------------------------------------------------
        def _auth(self, *roles: str) -> str:
            header = self.headers.get("Authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise HttpError(401, "a bearer token is required", {"WWW-Authenticate": 'Bearer realm="llm-oncall"'})
            token = token.strip()
            held = self._roles(token)
            if not held:
                raise HttpError(401, "unknown token", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
            if not held & set(roles):
                raise HttpError(403, f"this token's role ({', '.join(sorted(held))}) may not do this; needs "
                                     f"{' or '.join(roles)}")
            return token

        def _roles(self, token: str) -> set[str]:
            held = {r for r in ROLES if any(hmac.compare_digest(token, t) for t in getattr(service.cfg.auth, r))}
            return held | ({"approve"} if "override" in held else set())

        def _leader_only(self) -> None:
            """A follower's store is not the leader's: 503 makes Alertmanager re-send (to the leader, through the
            Service that routes to ready pods only) — nothing is lost, nothing is stored twice."""
            if not service.is_leader():
                raise HttpError(503, "this replica is a follower; the leader takes alerts and approvals",
                                {"Retry-After": "2"})

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                raise HttpError(411, "send a Content-Length")
            raw = self.headers.get("Content-Length")
            if raw is None:
                return b""  # RFC 9112 §6.3: a request with neither Content-Length nor chunked has no body
            if not raw.isdigit():
                raise HttpError(400, "Content-Length: not a number")
            n = int(raw)
            if n > service.cfg.max_body_bytes:
                raise HttpError(413, f"body of {n} bytes > max_body_bytes {service.cfg.max_body_bytes}")
            return self.rfile.read(n)

        def _json(self, code: int, obj: Any) -> tuple[int, str, bytes]:
            return code, "application/json", json.dumps(obj, default=str).encode()

        # ---- routes -------------------------------------------------------------------------------
        def _route(self, method: str, path: str) -> tuple[int, str, bytes]:
            if path == "/healthz" and method == "GET":
                return self._json(200, service.health())
            if path == "/readyz" and method == "GET":
                # the Kubernetes Service sends alerts and approvals to the ready pod: the leader
                if not service.is_leader():
                    raise HttpError(503, "a follower: the leader takes alerts and approvals")
                return self._json(200, {"ok": True, "leader": True})
            if path == "/metrics" and method == "GET":
                service.refresh_counts()
                return 200, "text/plain; version=0.0.4; charset=utf-8", service.metrics.render()
            if path == "/api/v1/alerts":
                if method != "POST":
                    raise HttpError(405, "POST only")
                self._auth("webhook")
                body = self._body()
                self._leader_only()
                return self._json(200, self._alerts(body))
            if path == "/api/v1/incidents" and method == "GET":
                self._auth("api", "approve", "override")
                return self._json(200, service.store.incidents())
            m = _INCIDENT.match(path)
            if m and method == "GET":
                self._auth("api", "approve", "override")
                inc = service.store.get(m.group(1))
                if inc is None:
                    raise HttpError(404, f"no incident {m.group(1)}")
                inc["plan"] = service.ledger.plan(inc["plan_id"]) if inc.get("plan_id") else None
                return self._json(200, inc)
            m = _ACTION.match(path)
            if m and method == "POST":
                token = self._auth("approve", "override")
                body = self._body()
                self._leader_only()
                return self._json(202, self._decide(m.group(1), m.group(2), token, body))
            if path.startswith(("/api/", "/healthz", "/readyz", "/metrics")):
                raise HttpError(405 if method == "POST" and not path.startswith("/api/v1/actions/") else 404,
                                f"no route {method} {path}")
            raise HttpError(404, f"no route {method} {path}")

        def _alerts(self, body: bytes) -> dict[str, Any]:
            try:
                data = json.loads(body)
            except (UnicodeDecodeError, ValueError) as exc:
                raise HttpError(400, f"not JSON: {exc}") from None
            if not isinstance(data, dict):
                raise HttpError(400, "expected a JSON object (Alertmanager webhook v4)")
            try:
                hook = Webhook.model_validate(data)
            except ValidationError as exc:
                errs = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
                raise HttpError(400, f"not an Alertmanager webhook v4 body: {errs}") from None
            try:
                iid, new = service.store.add_alerts(hook.groupKey, hook.alert_dicts())
            except StoreError as exc:
                raise HttpError(503, f"the store cannot take the alert now ({exc}); Alertmanager will re-send",
                                {"Retry-After": "5"}) from None
            if new and any(a.status == "firing" for a in hook.alerts):
                service.watcher.wake.set()  # a fresh round now; the answer does not wait for it
            service.log.info("alerts", group_key=hook.groupKey, status=hook.status, alerts=len(hook.alerts), new=new,
                             incident_id=iid)
            return {"incident": iid, "alerts": len(hook.alerts), "new": new}

        def _decide(self, action_id: str, verb: str, token: str, body: bytes) -> dict[str, Any]:
            by = self.headers.get("X-Approver", "")
            reason: str | None = None
            if body.strip():
                try:
                    data = json.loads(body)
                except ValueError:
                    raise HttpError(400, "body: expected JSON like {\"by\": \"alice\"}") from None
                if isinstance(data, dict):
                    if isinstance(data.get("by"), str):
                        by = data["by"]
                    if data.get("reason") is not None:
                        if not isinstance(data["reason"], str) or not 3 <= len(data["reason"].strip()) <= 500:
                            raise HttpError(400, "reason: 3–500 characters")
                        reason = data["reason"].strip()
            if by and not _APPROVER.match(by):
                raise HttpError(400, "by: 1–64 characters of letters, digits, @ . _ - and spaces")
            if service.cfg.mode != "approve":
                raise HttpError(409, f"mode is {service.cfg.mode}: approvals are taken in approve mode only")
            found = service.find_action(action_id)
            if found is None:
                raise HttpError(404, f"no action {action_id} in an incident's plan")
            inc, action = found
            iid, plan_id = str(inc["id"]), str(inc["plan_id"])
            if inc["status"] in ("mitigated", "resolved"):
                raise HttpError(409, f"incident {iid} is {inc['status']}: nothing is executed on it any more")
            if action.get("status") not in ("planned", "dry_run"):
                raise HttpError(409, f"action {action_id} is {action.get('status')}: "
                                     f"{action.get('result') or (action.get('guard') or {}).get('why', '')}")
            guard = action.get("guard") or {}
            override: str | None = None
            if verb == "approve" and not guard.get("approvable", False):
                why = guard.get("why", "the guard blocks it")
                if "override" not in self._roles(token):
                    raise HttpError(409, f"action {action_id} is blocked: {why}. Approving it needs the override "
                                         "role and a reason")
                if reason is None:
                    raise HttpError(409, f"action {action_id} is blocked: {why}. An override needs a reason "
                                         "({\"reason\": \"…\"})")
                override = reason
            actor = f"{by} ({token_id(token)})" if by else token_id(token)
            decision = "approved" if verb == "approve" else "rejected"
            try:
                fresh = service.store.decide(iid, plan_id, action_id, decision, actor, override=override)
            except StoreError as exc:
                raise HttpError(503, f"the store cannot take the decision now ({exc})", {"Retry-After": "5"}) from None
            if not fresh:
                prev = service.store.decisions(plan_id).get(action_id, {})
                raise HttpError(409, f"action {action_id} was already {prev.get('decision')} by {prev.get('actor')}")
            service.watcher.wake.set()
            service.log.info("decision", action_id=action_id, decision=decision, actor=actor, incident_id=iid,
                             override=override)
            return {"action_id": action_id, "decision": decision, "by": actor, "incident": iid, "plan_id": plan_id,
                    "outcome": "pending: executed on the next round; the outcome follows on the incident's timeline",
                    **({"override": override} if override else {})}

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
