"""Console sessions: a token login gives a signed cookie (HttpOnly, SameSite=Strict, Secure behind TLS).

The cookie holds no token: the SHA-256 of the token that logged in (its roles are looked up in the service's
config on every request, so a token removed from the config stops working at the next restart), the name the
human gave, an expiry and the session's CSRF token.  It is signed with HMAC-SHA256 under the session secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from llm_oncall.service.config import ROLES, ServiceConfig

COOKIE = "oncall_session"
LOGIN_CSRF = "oncall_login_csrf"


@dataclass(frozen=True)
class Session:
    token_sha: str
    by: str
    exp: float
    csrf: str
    roles: frozenset[str]

    @property
    def who(self) -> str:
        return "token:" + self.token_sha[:8]

    def may(self, *roles: str) -> bool:
        return bool(self.roles & set(roles))


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def roles_by_sha(cfg: ServiceConfig, token_sha: str) -> frozenset[str]:
    held = {r for r in ROLES if any(hmac.compare_digest(_sha(t), token_sha) for t in getattr(cfg.auth, r))}
    return frozenset(held | ({"approve"} if "override" in held else set()))


class Sessions:
    def __init__(self, cfg: ServiceConfig) -> None:
        self.cfg = cfg
        secret = cfg.console.session_secret
        self.key = (secret or secrets.token_urlsafe(48)).encode()

    def _sign(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self.key, payload, hashlib.sha256).digest()).decode().rstrip("=")

    def login(self, token: str, by: str) -> tuple[Session, str]:
        """A new session for this token (the caller checked its roles) and its cookie value."""
        s = Session(_sha(token), by, time.time() + self.cfg.console.session_ttl, secrets.token_urlsafe(32),
                    roles_by_sha(self.cfg, _sha(token)))
        body = json.dumps({"t": s.token_sha, "by": s.by, "exp": s.exp, "csrf": s.csrf}, separators=(",", ":"))
        payload = base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")
        return s, f"{payload}.{self._sign(payload.encode())}"

    def read(self, request: Request) -> Session | None:
        raw = request.cookies.get(COOKIE, "")
        payload, _, sig = raw.partition(".")
        if not payload or not sig or not hmac.compare_digest(sig, self._sign(payload.encode())):
            return None
        try:
            data: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            s = Session(str(data["t"]), str(data["by"]), float(data["exp"]), str(data["csrf"]), frozenset())
        except (ValueError, KeyError, TypeError):
            return None
        if s.exp < time.time():
            return None
        roles = roles_by_sha(self.cfg, s.token_sha)
        if not roles:
            return None
        return Session(s.token_sha, s.by, s.exp, s.csrf, roles)

    def secure(self, request: Request) -> bool:
        mode = self.cfg.console.secure_cookie
        if mode != "auto":
            return mode == "always"
        return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"

    def set_cookie(self, response: Response, request: Request, name: str, value: str, max_age: int | None) -> None:
        response.set_cookie(name, value, max_age=max_age, path="/", httponly=True, samesite="strict",
                            secure=self.secure(request))

    def clear(self, response: Response, request: Request) -> None:
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=self.secure(request))


def csrf_ok(expected: str, given: str | None) -> bool:
    return bool(expected) and given is not None and hmac.compare_digest(expected.encode(), given.encode())
