"""The web console: server-rendered pages over the service (Jinja2, autoescaped; htmx polls the live parts).

`routes(service)` is what `Service(cfg, extend=routes)` mounts beside the API in the one ASGI app.  Every page needs
a session (a token login); every POST carries the session's CSRF token; nothing changes state on a GET.  Approve,
reject and override go through the API's own `decide` (the same 409 rules, the same audit), with the roles the
login token holds: approving needs `approve`, approving a guard-blocked action needs `override` and a reason.
"""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from llm_oncall.incident_ids import FAULTS
from llm_oncall.postmortem.record import RecordError
from llm_oncall.postmortem.write import write_postmortem
from llm_oncall.runbooks import promrules
from llm_oncall.runbooks.loader import load_registry
from llm_oncall.service.api import APPROVER, HttpError, roles_of, token_id
from llm_oncall.service.app import Service
from llm_oncall.web import charts
from llm_oncall.web.drillrun import Drills
from llm_oncall.web.session import COOKIE, LOGIN_CSRF, Session, Sessions, csrf_ok
from llm_oncall.web.training import TrainingRun, Trainings

HERE = Path(__file__).parent
READ_ROLES = ("api", "approve", "override")
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
MAX_FORM_BYTES = 16 * 1024
MAX_ROWS = 200
"""The incidents page lists the newest 200 (the API has them all)."""
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
LOCAL_PATH = re.compile(r"^/(?![/\\])[A-Za-z0-9/_.~%?=&-]{0,500}$")
"""Where a login may go next: a path on this site (not //host, not /\\host, no scheme)."""


def local_next(nxt: str) -> str:
    return nxt if LOCAL_PATH.match(nxt) else "/incidents"

POSTMORTEM_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"


def age(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    s = max(0, int(seconds))
    if s < 90:
        return f"{s}s"
    if s < 5400:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d"


def _scope(diag: dict[str, Any] | None) -> str:
    sc = (diag or {}).get("scope") or {}
    parts = []
    if sc.get("pods"):
        parts.append(f"{len(sc['pods'])} pod(s): " + ", ".join(sc["pods"][:3]) + ("…" if len(sc["pods"]) > 3 else ""))
    if sc.get("nodes"):
        parts.append("node(s): " + ", ".join(sc["nodes"][:3]))
    if sc.get("revision"):
        parts.append(f"revision {sc['revision']}")
    return "; ".join(parts) or "fleet"


def _target(t: Any) -> str:
    if isinstance(t, dict):
        return f"{t.get('kind')}/{t.get('namespace')}/{t.get('name')}"
    return str(t)


class Console:
    def __init__(self, service: Service) -> None:
        self.s = service
        self.sessions = Sessions(service.cfg)
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals.update(age=age, scope=_scope, target=_target)
        self.registry = load_registry()
        self.drills = Drills()
        self.trainings = Trainings()

    # ---- plumbing ---------------------------------------------------------------------------------
    def page(self, request: Request, name: str, session: Session | None, code: int = 200, **ctx: Any) -> Response:
        resp = self.templates.TemplateResponse(request, name, {"session": session, "mode": self.s.cfg.mode,
                                                                "flash": request.query_params.get("msg"), **ctx},
                                               status_code=code)
        resp.headers.update(SECURITY_HEADERS)
        return resp

    def session(self, request: Request) -> Session | None:
        return self.sessions.read(request)

    def to_login(self, request: Request) -> Response:
        nxt = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.headers.get("hx-request"):
            r = Response(status_code=401)
            r.headers["HX-Redirect"] = "/login"
            return r
        return RedirectResponse(f"/login?next={quote(nxt, safe='')}", status_code=303)

    async def form(self, request: Request) -> dict[str, str]:
        """A urlencoded form (no multipart), at most MAX_FORM_BYTES."""
        raw = request.headers.get("content-length")
        if raw is None or not raw.isdigit() or int(raw) > MAX_FORM_BYTES:
            raise HttpError(413 if raw and raw.isdigit() else 411, "a form of at most 16 KiB")
        body = await request.body()
        return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}

    async def post_session(self, request: Request) -> tuple[Session, dict[str, str]] | Response:
        """The session and form of a POST, or the refusal: no session → 401, bad CSRF token → 403."""
        sess = self.session(request)
        if sess is None:
            return self.error(request, None, 401, "Log in first.")
        try:
            form = await self.form(request)
        except HttpError as exc:
            return self.error(request, sess, exc.code, exc.message)
        if not csrf_ok(sess.csrf, form.get("csrf")):
            return self.error(request, sess, 403, "The form's CSRF token is missing or wrong: reload the page.")
        return sess, form

    def error(self, request: Request, sess: Session | None, code: int, message: str) -> Response:
        return self.page(request, "error.html", sess, code=code, code_=code, message=message)

    # ---- login ------------------------------------------------------------------------------------
    async def login_form(self, request: Request) -> Response:
        nxt = request.query_params.get("next", "/incidents")
        csrf = request.cookies.get(LOGIN_CSRF) or secrets.token_urlsafe(24)
        resp = self.page(request, "login.html", None, next=local_next(nxt), csrf=csrf, error=None)
        self.sessions.set_cookie(resp, request, LOGIN_CSRF, csrf, max_age=3600)
        return resp

    async def login(self, request: Request) -> Response:
        try:
            form = await self.form(request)
        except HttpError as exc:
            return self.error(request, None, exc.code, exc.message)
        nxt = local_next(form.get("next", "/incidents"))
        cookie_csrf = request.cookies.get(LOGIN_CSRF, "")
        if not csrf_ok(cookie_csrf, form.get("csrf")):
            return self.error(request, None, 403, "The login form expired: reload it.")
        token, by = form.get("token", "").strip(), form.get("by", "").strip()
        roles = roles_of(self.s.cfg, token) if token else set()
        problem = None
        if not roles:
            problem, code = "Unknown token.", 401
        elif not roles & set(READ_ROLES):
            problem, code = "This token may not read incidents (it needs the api, approve or override role).", 403
        elif by and not APPROVER.match(by):
            problem, code = "Name: 1–64 letters, digits, @ . _ - and spaces.", 400
        if problem is not None:
            self.s.log.warning("console login refused", why=problem)
            return self.page(request, "login.html", None, code=code, next=nxt, csrf=cookie_csrf, error=problem)
        _, cookie = self.sessions.login(token, by)
        self.s.log.info("console login", by=by or None, token=token_id(token), roles=sorted(roles))
        resp = RedirectResponse(nxt, status_code=303)
        self.sessions.set_cookie(resp, request, COOKIE, cookie, max_age=int(self.s.cfg.console.session_ttl))
        resp.delete_cookie(LOGIN_CSRF, path="/", httponly=True, samesite="strict",
                           secure=self.sessions.secure(request))
        return resp

    async def logout(self, request: Request) -> Response:
        got = await self.post_session(request)
        if isinstance(got, Response):
            return got
        resp = RedirectResponse("/login", status_code=303)
        self.sessions.clear(resp, request)
        return resp

    # ---- incidents --------------------------------------------------------------------------------
    def _rows(self) -> list[dict[str, Any]]:
        now = self.s.feed.clock()
        rows = []
        for inc in self.s.store.incidents()[:MAX_ROWS]:
            full = self.s.store.get(inc["id"], timeline=False) or inc
            diag = full.get("diagnosis") or {}
            rows.append({**inc, "severity": diag.get("severity", "–"), "scope": _scope(diag),
                         "age": age(now - inc["opened_at_s"]) if inc.get("opened_at_s") else "–"})
        return rows

    async def index(self, request: Request) -> Response:
        return RedirectResponse("/incidents", status_code=303)

    async def incidents(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return self.to_login(request)
        rows = await run_in_threadpool(self._rows)
        partial = request.url.path.endswith("/rows")
        return self.page(request, "incident_rows.html" if partial else "incidents.html", sess, rows=rows)

    def _incident(self, iid: str) -> dict[str, Any] | None:
        inc = self.s.store.get(iid)
        if inc is None:
            return None
        inc["plan"] = self.s.ledger.plan(inc["plan_id"]) if inc.get("plan_id") else None
        decisions = self.s.store.decisions(inc["plan_id"]) if inc.get("plan_id") else {}
        inc["decisions"] = decisions
        inc["age"] = age(self.s.feed.clock() - inc["opened_at_s"]) if inc.get("opened_at_s") else "–"
        inc["postmortem"] = (self.pm_dir(iid) / "postmortem.html").is_file()
        return inc

    def pm_dir(self, iid: str) -> Path:
        """Where the console writes an incident's postmortem: beside the store, `postmortems/<id>/`."""
        assert SAFE_ID.match(iid)
        return Path(self.s.cfg.db).parent / "postmortems" / iid

    async def incident(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return self.to_login(request)
        iid = request.path_params["iid"]
        if not SAFE_ID.match(iid):
            return self.error(request, sess, 404, "No such incident.")
        inc = await run_in_threadpool(self._incident, iid)
        if inc is None:
            return self.error(request, sess, 404, f"No incident {iid}.")
        live = request.url.path.endswith("/live")
        ctx: dict[str, Any] = {"inc": inc, "diag": inc.get("diagnosis") or {}}
        if not live:
            diag = ctx["diag"]
            cited = [e["signal"] for e in diag.get("evidence", []) if e.get("signal")]
            cited += [sy["signal"] for sy in diag.get("symptoms", []) if sy.get("red") and sy.get("signal")]
            ctx["charts"] = await run_in_threadpool(charts.cited, Path(self.s.cfg.db), cited,
                                                    float(inc.get("opened_at_s") or 0.0))
        return self.page(request, "incident_live.html" if live else "incident.html", sess, **ctx)

    async def decide(self, request: Request) -> Response:
        got = await self.post_session(request)
        if isinstance(got, Response):
            return got
        sess, form = got
        action_id, verb = request.path_params["aid"], request.path_params["verb"]
        if verb not in ("approve", "reject", "override"):
            return self.error(request, sess, 404, "No such decision.")
        iid = form.get("incident", "")
        back = f"/incidents/{quote(iid)}" if iid and iid.replace("-", "").isalnum() else "/incidents"
        reason = form.get("reason", "").strip() or None
        if verb == "override":
            if not sess.may("override"):
                return self.error(request, sess, 403, "Overriding the guard needs the override role.")
            if reason is None or not 3 <= len(reason) <= 500:
                return self.error(request, sess, 400, "An override needs a reason of 3–500 characters.")
        elif not sess.may("approve", "override"):
            return self.error(request, sess, 403, f"To {verb} an action you need the approve role.")
        try:
            await run_in_threadpool(self.s.api.decide, action_id, "reject" if verb == "reject" else "approve",
                                    set(sess.roles), sess.who, sess.by,
                                    reason if verb == "override" else None)
        except HttpError as exc:
            return self.error(request, sess, exc.code, exc.message)
        msg = {"approve": "Approved: it runs on the next round; the outcome follows on the timeline.",
               "override": "Approved over the guard (audited): it runs on the next round.",
               "reject": "Rejected."}[verb]
        return RedirectResponse(f"{back}?msg={quote(msg)}#plan", status_code=303)

    # ---- postmortem -------------------------------------------------------------------------------
    async def postmortem(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return self.to_login(request)
        iid = request.path_params["iid"]
        path = self.pm_dir(iid) / "postmortem.html" if SAFE_ID.match(iid) else None
        if path is None or not path.is_file():
            return self.error(request, sess, 404, "No postmortem written for this incident yet.")
        resp = Response(path.read_bytes(), media_type="text/html; charset=utf-8")
        resp.headers.update({**SECURITY_HEADERS, "Content-Security-Policy": POSTMORTEM_CSP})
        return resp

    async def write_pm(self, request: Request) -> Response:
        got = await self.post_session(request)
        if isinstance(got, Response):
            return got
        sess, _ = got
        iid = request.path_params["iid"]
        if not sess.may("approve", "override"):
            return self.error(request, sess, 403, "Writing the postmortem needs the approve role.")
        inc = await run_in_threadpool(self.s.store.get, iid, False) if SAFE_ID.match(iid) else None
        if inc is None:
            return self.error(request, sess, 404, "No such incident.")
        if inc["status"] not in ("mitigated", "resolved"):
            return self.error(request, sess, 409, f"The incident is {inc['status']}: the postmortem is written once "
                                                  "it is mitigated or resolved.")
        try:
            await run_in_threadpool(write_postmortem, Path(self.s.cfg.db), iid, self.pm_dir(iid))
        except (RecordError, OSError, ValueError) as exc:
            return self.error(request, sess, 500, f"The postmortem could not be written: {exc}")
        self.s.log.info("postmortem written", incident_id=iid, by=sess.by or sess.who)
        return RedirectResponse(f"/incidents/{iid}?msg={quote('Postmortem written.')}", status_code=303)

    # ---- runbooks ---------------------------------------------------------------------------------
    async def runbooks(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return self.to_login(request)
        lang = "zh" if request.query_params.get("lang") == "zh" else "en"
        return self.page(request, "runbooks.html", sess, runbooks=self.registry.in_triage_order(), lang=lang)

    async def runbook(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return self.to_login(request)
        rb = self.registry.get(request.path_params["rid"])
        if rb is None:
            return self.error(request, sess, 404, "No such runbook.")
        lang = "zh" if request.query_params.get("lang") == "zh" else "en"
        promql = promrules.alert_rule(rb).canonical if rb.prometheus is not None else None
        return self.page(request, "runbook.html", sess, rb=rb, lang=lang, promql=promql)

    # ---- drills -----------------------------------------------------------------------------------
    async def drills_page(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return self.to_login(request)
        partial = request.url.path.endswith("/board")
        run = self.drills.current
        # htmx stops polling on 286 once the scoreboard is complete
        code = 286 if partial and (run is None or run.done) else 200
        return self.page(request, "drill_board.html" if partial else "drills.html", sess, code=code, run=run,
                         faults=FAULTS, now=time.time())

    async def drill_start(self, request: Request) -> Response:
        got = await self.post_session(request)
        if isinstance(got, Response):
            return got
        sess, form = got
        if not sess.may("approve", "override"):
            return self.error(request, sess, 403, "Starting a drill needs the approve role.")
        chosen = [f for f in FAULTS if form.get(f"i_{f}")]
        seed_raw = form.get("seed", "1").strip() or "1"
        if not seed_raw.isdigit() or int(seed_raw) > 1_000_000:
            return self.error(request, sess, 400, "Seed: a whole number up to 1000000.")
        try:
            run = self.drills.start(chosen, int(seed_raw), sess.by or sess.who)
        except ValueError as exc:
            return self.error(request, sess, 400, str(exc))
        if run is None:
            return self.error(request, sess, 409, "A drill is still running: wait for its scoreboard to finish.")
        return RedirectResponse("/drills", status_code=303)


    # ---- training -----------------------------------------------------------------------------------
    async def training_page(self, request: Request) -> Response:
        sess = self.session(request)
        if sess is None:
            return self.to_login(request)
        run = self.trainings.get(sess.by or sess.who)
        return self.page(request, "training.html", sess, run=run, faults=FAULTS)

    async def training_start(self, request: Request) -> Response:
        got = await self.post_session(request)
        if isinstance(got, Response):
            return got
        sess, form = got
        seed_raw = form.get("seed", "7").strip() or "7"
        if not seed_raw.isdigit() or int(seed_raw) > 1_000_000:
            return self.error(request, sess, 400, "Seed: a whole number up to 1000000.")
        try:
            await run_in_threadpool(self.trainings.start, sess.by or sess.who, form.get("incident", ""),
                                    int(seed_raw))
        except ValueError as exc:
            return self.error(request, sess, 400, str(exc))
        return RedirectResponse("/training", status_code=303)

    async def _training_post(self, request: Request) -> tuple[Session, dict[str, str], TrainingRun] | Response:
        """A form posted to the caller's training run: (session, form, run), or the error page."""
        got = await self.post_session(request)
        if isinstance(got, Response):
            return got
        sess, form = got
        run = self.trainings.get(sess.by or sess.who)
        if run is None:
            return self.error(request, sess, 409, "Start a training run first.")
        return sess, form, run

    async def training_command(self, request: Request) -> Response:
        got = await self._training_post(request)
        if isinstance(got, Response):
            return got
        sess, form, run = got
        line = form.get("line", "").strip()
        if line:
            try:
                await run_in_threadpool(self.trainings.command, run, line)
            except ValueError as exc:
                return self.error(request, sess, 409, str(exc))
        if request.headers.get("hx-request"):
            return self.page(request, "training_live.html", sess, run=run)
        return RedirectResponse("/training", status_code=303)

    async def training_finish(self, request: Request) -> Response:
        got = await self._training_post(request)
        if isinstance(got, Response):
            return got
        await run_in_threadpool(self.trainings.finish, got[2])
        return RedirectResponse("/training", status_code=303)


def routes(service: Service) -> list[BaseRoute]:
    c = Console(service)
    service.on_stop.append(c.trainings.close)  # each training run holds a simulated fleet and its Kubernetes API
    return [
        Route("/", c.index, methods=["GET"]),
        Route("/login", c.login_form, methods=["GET"]),
        Route("/login", c.login, methods=["POST"]),
        Route("/logout", c.logout, methods=["POST"]),
        Route("/incidents", c.incidents, methods=["GET"]),
        Route("/incidents/rows", c.incidents, methods=["GET"]),
        Route("/incidents/{iid:str}", c.incident, methods=["GET"]),
        Route("/incidents/{iid:str}/live", c.incident, methods=["GET"]),
        Route("/incidents/{iid:str}/postmortem", c.postmortem, methods=["GET"]),
        Route("/incidents/{iid:str}/postmortem", c.write_pm, methods=["POST"]),
        Route("/actions/{aid:str}/{verb:str}", c.decide, methods=["POST"]),
        Route("/runbooks", c.runbooks, methods=["GET"]),
        Route("/runbooks/{rid:str}", c.runbook, methods=["GET"]),
        Route("/drills", c.drills_page, methods=["GET"]),
        Route("/drills/board", c.drills_page, methods=["GET"]),
        Route("/drills", c.drill_start, methods=["POST"]),
        Route("/training", c.training_page, methods=["GET"]),
        Route("/training", c.training_start, methods=["POST"]),
        Route("/training/command", c.training_command, methods=["POST"]),
        Route("/training/finish", c.training_finish, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
