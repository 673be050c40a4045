"""The HTTP API: Alertmanager receiver, incidents, approvals, /healthz, /readyz, /metrics (one ASGI app).

Roles by bearer token (config `auth`): `webhook` posts alerts, `api` reads incidents, `approve` reads incidents
and approves or rejects actions, `override` also approves an action the guard blocks (with a reason, audited).
No token or an unknown one → 401; a known token without the role → 403.  An approval answers 202 only for an
action that can run (waiting, approvable, on an incident still open or mitigating); its outcome (executed,
failed, refused and why) follows on the incident's timeline, in its plan and through the notifiers.
/healthz, /readyz and /metrics need no token.

`build_app(service, extra)` is the seam for the web console: the layer above passes its routes in, the API never
imports it.  The store and the ledger are synchronous (SQLite): every handler that touches them runs in a worker
thread; reading the body is asynchronous, bounded by `max_body_bytes` and by the server's read timeout.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from llm_oncall.actions.ledger import Ledger
from llm_oncall.incidents import IncidentStore, StoreError, storm
from llm_oncall.service.config import ROLES, ServiceConfig
from llm_oncall.service.observability import Log, Metrics
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
    gate: storm.StormGate | None

    def refresh_counts(self) -> None: ...

    def health(self) -> dict[str, Any]: ...

    def find_action(self, action_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None: ...

    def is_leader(self) -> bool: ...


_INCIDENT = re.compile(r"^/api/v1/incidents/([A-Za-z0-9._-]{1,80})$")
_ACTION = re.compile(r"^/api/v1/actions/([A-Za-z0-9._-]{1,80})/(approve|reject)$")
APPROVER = re.compile(r"^[A-Za-z0-9@._ -]{1,64}$")
MAX_JSON_DEPTH = 64
"""An Alertmanager webhook is 4 levels deep; anything far deeper is refused before it is validated."""


class HttpError(Exception):
    def __init__(self, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.headers = headers or {}


def token_id(token: str) -> str:
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:8]


def roles_of(cfg: ServiceConfig, token: str) -> set[str]:
    """The roles a token holds (constant-time comparison); `override` implies `approve`."""
    held = {r for r in ROLES if any(hmac.compare_digest(token.encode(), t.encode()) for t in getattr(cfg.auth, r))}
    return held | ({"approve"} if "override" in held else set())


def json_depth_ok(text: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when no array or object in this JSON text nests deeper than `limit` (strings skipped): a body nested
    10,000 levels deep is refused before the parser recurses into it."""
    depth, in_str, esc = 0, False, False
    for b in text:
        if in_str:
            if esc:
                esc = False
            elif b == 0x5C:  # backslash
                esc = True
            elif b == 0x22:
                in_str = False
        elif b == 0x22:
            in_str = True
        elif b in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return False
        elif b in (0x5D, 0x7D):
            depth -= 1
    return True


def parse_json(body: bytes) -> Any:
    if not json_depth_ok(body):
        raise HttpError(400, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise HttpError(400, f"not JSON: {exc}") from None


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, at most `limit` bytes: 411 for chunked uploads, 413 beyond the limit. A request with
    neither Content-Length nor chunked has no body (RFC 9112 §6.3): a bodyless POST is fine."""
    if "chunked" in request.headers.get("transfer-encoding", "").lower():
        raise HttpError(411, "send a Content-Length")
    raw = request.headers.get("content-length")
    if raw is None:
        return b""
    if not raw.isdigit():
        raise HttpError(400, "Content-Length: not a number")
    n = int(raw)
    if n > limit:
        raise HttpError(413, f"body of {n} bytes > max_body_bytes {limit}")
    return await request.body()


def error_response(exc: HttpError) -> JSONResponse:
    headers = dict(exc.headers)
    if exc.code in (400, 408, 411, 413):
        headers["Connection"] = "close"  # the rest of what the client sends is not read
    return JSONResponse({"error": exc.message}, status_code=exc.code, headers=headers)


class Api:
    def __init__(self, service: Service) -> None:
        self.service = service

    # ---- the endpoint -----------------------------------------------------------------------------
    async def endpoint(self, request: Request) -> Response:
        s = self.service
        method, path = request.method, request.url.path
        route = path if not path.startswith("/api/v1/") else re.sub(
            r"/[^/]+/(approve|reject)$", r"/{id}/\1", re.sub(r"^(/api/v1/incidents)/.+$", r"\1/{id}", path))
        response: Response
        try:
            response = await self._route(request, method, path)
        except HttpError as exc:
            response = error_response(exc)
            if exc.code >= 500 or exc.code in (401, 403, 413):
                s.log.warning("request refused", method=method, path=path, code=exc.code, why=exc.message)
        except ClientDisconnect:
            # the client went away while sending its body: the server logs the one line (service.server)
            return Response(status_code=400)
        except Exception as exc:
            response = JSONResponse({"error": "internal error"}, status_code=500)
            s.log.error("request failed", method=method, path=path, error=f"{type(exc).__name__}: {exc}")
        code = response.status_code
        s.metrics.requests.labels(route if route.startswith(("/api/", "/healthz", "/readyz", "/metrics"))
                                  else "other", str(code)).inc()
        if path == "/api/v1/alerts":
            s.metrics.webhooks.labels(str(code)).inc()
        return response

    # ---- helpers ----------------------------------------------------------------------------------
    def auth(self, request: Request, *roles: str) -> str:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HttpError(401, "a bearer token is required", {"WWW-Authenticate": 'Bearer realm="llm-oncall"'})
        token = token.strip()
        held = roles_of(self.service.cfg, token)
        if not held:
            raise HttpError(401, "unknown token", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        if not held & set(roles):
            raise HttpError(403, f"this token's role ({', '.join(sorted(held))}) may not do this; needs "
                                 f"{' or '.join(roles)}")
        return token

    def leader_only(self) -> None:
        """A follower's store is not the leader's: 503 makes Alertmanager re-send (to the leader, through the
        Service that routes to ready pods only) — nothing is lost, nothing is stored twice."""
        if not self.service.is_leader():
            raise HttpError(503, "this replica is a follower; the leader takes alerts and approvals",
                            {"Retry-After": "2"})

    @staticmethod
    def _json(code: int, obj: Any) -> Response:
        return Response(json.dumps(obj, default=str).encode(), status_code=code, media_type="application/json")

    # ---- routes -----------------------------------------------------------------------------------
    async def _route(self, request: Request, method: str, path: str) -> Response:
        s = self.service
        if path == "/healthz" and method == "GET":
            return self._json(200, s.health())
        if path == "/readyz" and method == "GET":
            # the Kubernetes Service sends alerts and approvals to the ready pod: the leader
            if not s.is_leader():
                raise HttpError(503, "a follower: the leader takes alerts and approvals")
            return self._json(200, {"ok": True, "leader": True})
        if path == "/metrics" and method == "GET":
            await run_in_threadpool(s.refresh_counts)
            return Response(s.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
        if path == "/api/v1/alerts":
            if method != "POST":
                raise HttpError(405, "POST only")
            self.auth(request, "webhook")
            body = await read_body(request, s.cfg.max_body_bytes)
            self.leader_only()
            return self._json(200, await run_in_threadpool(self.alerts, body))
        if path == "/api/v1/incidents" and method == "GET":
            self.auth(request, "api", "approve", "override")
            return self._json(200, await run_in_threadpool(s.store.incidents))
        m = _INCIDENT.match(path)
        if m and method == "GET":
            self.auth(request, "api", "approve", "override")
            return self._json(200, await run_in_threadpool(self.incident, m.group(1)))
        m = _ACTION.match(path)
        if m and method == "POST":
            token = self.auth(request, "approve", "override")
            body = await read_body(request, s.cfg.max_body_bytes)
            self.leader_only()
            by, reason = self.decision_body(request.headers.get("x-approver", ""), body)
            return self._json(202, await run_in_threadpool(self.decide, m.group(1), m.group(2),
                                                            roles_of(s.cfg, token), token_id(token), by, reason))
        if path.startswith(("/api/", "/healthz", "/readyz", "/metrics")):
            raise HttpError(405 if method == "POST" and not path.startswith("/api/v1/actions/") else 404,
                            f"no route {method} {path}")
        raise HttpError(404, f"no route {method} {path}")

    def incident(self, iid: str) -> dict[str, Any]:
        inc = self.service.store.get(iid)
        if inc is None:
            raise HttpError(404, f"no incident {iid}")
        inc["plan"] = self.service.ledger.plan(inc["plan_id"]) if inc.get("plan_id") else None
        return inc

    def alerts(self, body: bytes) -> dict[str, Any]:
        s = self.service
        data = parse_json(body)
        if not isinstance(data, dict):
            raise HttpError(400, "expected a JSON object (Alertmanager webhook v4)")
        try:
            hook = Webhook.model_validate(data)
        except ValidationError as exc:
            errs = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
            raise HttpError(400, f"not an Alertmanager webhook v4 body: {errs}") from None
        try:
            iid, new, suppressed = storm.ingest(s.store, s.gate, hook.groupKey, hook.alert_dicts(), s.store.clock())
        except StoreError as exc:
            raise HttpError(503, f"the store cannot take the alert now ({exc}); Alertmanager will re-send",
                            {"Retry-After": "5"}) from None
        if new and any(a.status == "firing" for a in hook.alerts):
            s.watcher.wake.set()  # a fresh round now; the answer does not wait for it
        s.log.info("alerts", group_key=hook.groupKey, status=hook.status, alerts=len(hook.alerts), new=new,
                   suppressed=suppressed, incident_id=iid)
        return {"incident": iid, "alerts": len(hook.alerts), "new": new, "suppressed": suppressed}

    @staticmethod
    def decision_body(by: str, body: bytes) -> tuple[str, str | None]:
        """(approver, override reason) from the X-Approver header and an optional JSON body."""
        reason: str | None = None
        if body.strip():
            if not json_depth_ok(body):
                raise HttpError(400, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            try:
                data = json.loads(body)
            except (ValueError, RecursionError):
                raise HttpError(400, "body: expected JSON like {\"by\": \"alice\"}") from None
            if isinstance(data, dict):
                if isinstance(data.get("by"), str):
                    by = data["by"]
                if data.get("reason") is not None:
                    if not isinstance(data["reason"], str) or not 3 <= len(data["reason"].strip()) <= 500:
                        raise HttpError(400, "reason: 3–500 characters")
                    reason = data["reason"].strip()
        if by and not APPROVER.match(by):
            raise HttpError(400, "by: 1–64 characters of letters, digits, @ . _ - and spaces")
        return by, reason

    def decide(self, action_id: str, verb: str, roles: set[str] | frozenset[str], ident: str, by: str,
               reason: str | None) -> dict[str, Any]:
        """Record a human's decision on one action (the API's and the console's approvals both come here): `roles`
        the decider holds, `ident` the token's short hash recorded beside the human's name."""
        s = self.service
        if s.cfg.mode != "approve":
            raise HttpError(409, f"mode is {s.cfg.mode}: approvals are taken in approve mode only")
        found = s.find_action(action_id)
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
            if "override" not in roles:
                raise HttpError(409, f"action {action_id} is blocked: {why}. Approving it needs the override "
                                     "role and a reason")
            if reason is None:
                raise HttpError(409, f"action {action_id} is blocked: {why}. An override needs a reason "
                                     "({\"reason\": \"…\"})")
            override = reason
        actor = f"{by} ({ident})" if by else ident
        decision = "approved" if verb == "approve" else "rejected"
        try:
            fresh = s.store.decide(iid, plan_id, action_id, decision, actor, override=override)
        except StoreError as exc:
            raise HttpError(503, f"the store cannot take the decision now ({exc})", {"Retry-After": "5"}) from None
        if not fresh:
            prev = s.store.decisions(plan_id).get(action_id, {})
            raise HttpError(409, f"action {action_id} was already {prev.get('decision')} by {prev.get('actor')}")
        s.watcher.wake.set()
        s.log.info("decision", action_id=action_id, decision=decision, actor=actor, incident_id=iid,
                   override=override)
        return {"action_id": action_id, "decision": decision, "by": actor, "incident": iid, "plan_id": plan_id,
                "outcome": "pending: executed on the next round; the outcome follows on the incident's timeline",
                **({"override": override} if override else {})}


API_PATHS = ("/api/{rest:path}", "/healthz", "/readyz", "/metrics")
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def build_app(service: Service, extra: Sequence[BaseRoute] = ()) -> tuple[Starlette, Api]:
    """The one ASGI app: the API's routes first, then what the layer above adds (the console)."""
    api = Api(service)
    routes: list[BaseRoute] = [Route(p, api.endpoint, methods=METHODS) for p in API_PATHS]
    app = Starlette(routes=[*routes, *extra])
    app.state.api = api
    return app, api
