"""The console over real HTTP: login and the session cookie, roles, CSRF, no state change from a GET, escaping,
and the approval path (the API's 409 rules, the audit) from a form."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from tests.testkit import wait_for
from tests.web.conftest import API, APPROVE, KV, OVERRIDE, WEBHOOK, csrf_of, login

from llm_oncall.service.app import Service

XSS = "<script>alert(1)</script>"


def alert_body(alertname: str, pod: str) -> dict[str, Any]:
    return {"receiver": "x", "status": "firing", "version": "4", "truncatedAlerts": 0,
            "groupKey": '{}:{alertname="X"}', "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
            "externalURL": "http://am", "alerts": [
                {"status": "firing", "labels": {"alertname": alertname, "pod": pod},
                 "annotations": {"summary": XSS}, "startsAt": "2026-11-30T04:07:32.804Z",
                 "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": "14cf2654afc3dfe1"}]}


def waiting_plan(svc: Service) -> tuple[str, dict[str, Any]]:
    def ready() -> bool:
        incs = svc.store.incidents()
        return bool(incs and incs[0].get("plan_id"))

    wait_for(ready, 90, "an incident with a plan")
    inc = svc.store.incidents()[0]
    plan = svc.ledger.plan(inc["plan_id"])
    assert plan is not None
    return inc["id"], plan


def test_pages_need_a_login_and_the_cookie_is_strict(start_console: Any) -> None:
    svc = start_console()
    for path in ("/incidents", "/runbooks", "/drills", "/incidents/rows"):
        r = httpx.get(f"{svc.url}{path}")
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next="), path
    c = httpx.Client(base_url=svc.url)
    page = c.get("/login")
    r = c.post("/login", data={"csrf": csrf_of(page.text), "token": APPROVE, "by": "alice"})
    assert r.status_code == 303
    cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("oncall_session="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie
    assert APPROVE not in cookie  # the token itself never goes into the cookie
    assert c.get("/incidents").status_code == 200
    # behind a TLS proxy the cookie is Secure
    page = c.get("/login")
    r = c.post("/login", data={"csrf": csrf_of(page.text), "token": APPROVE}, headers={"X-Forwarded-Proto": "https"})
    cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("oncall_session="))
    assert "Secure" in cookie
    # a forged or tampered cookie is no session
    forged = httpx.get(f"{svc.url}/incidents", cookies={"oncall_session": cookie.split(";")[0].split("=", 1)[1][:-2]
                                                                            + "xx"})
    assert forged.status_code == 303


def test_login_refuses_unknown_webhook_only_and_missing_csrf(start_console: Any) -> None:
    svc = start_console()
    c = httpx.Client(base_url=svc.url)
    csrf = csrf_of(c.get("/login").text)
    assert c.post("/login", data={"csrf": csrf, "token": "not-a-known-token-000"}).status_code == 401
    assert c.post("/login", data={"csrf": csrf, "token": WEBHOOK}).status_code == 403
    assert httpx.post(f"{svc.url}/login", data={"token": APPROVE}).status_code == 403  # no login CSRF token
    # no open redirect after the login
    for evil in ("//evil.example", "/\\evil.example", "https://evil.example"):
        c2 = httpx.Client(base_url=svc.url)
        r = c2.post("/login", data={"csrf": csrf_of(c2.get("/login").text), "token": API, "next": evil})
        assert r.status_code == 303 and r.headers["location"] == "/incidents", evil
    assert "oncall_session" not in c.cookies


def test_escaping_of_labels_and_diagnosis(start_console: Any) -> None:
    svc = start_console(mode="propose")
    r = httpx.post(f"{svc.url}/api/v1/alerts", json=alert_body(XSS, XSS),
                   headers={"Authorization": f"Bearer {WEBHOOK}"})
    assert r.status_code == 200, r.text
    iid = r.json()["incident"]
    svc.store.set_diagnosis(iid, {"incident": "unknown", "summary": f"summary {XSS}", "confidence": 0.3,
                                  "severity": "page", "evidence": [{"signal": XSS, "value": 1, "text": XSS,
                                                                    "source": XSS}],
                                  "ruled_out": [{"incident": XSS, "why": XSS}], "scope": {"pods": [XSS]}})
    c = login(svc, API)
    for path in ("/incidents", f"/incidents/{iid}", f"/incidents/{iid}/live", "/incidents/rows"):
        html = c.get(path).text
        assert "<script>alert" not in html, path
    html = c.get(f"/incidents/{iid}").text
    assert "summary &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in c.get("/incidents").text  # the scope (a pod label)
    assert c.get(f"/incidents/{iid}").headers["content-security-policy"].startswith("default-src 'self'")


def test_approve_from_the_console_roles_csrf_and_409(start_console: Any) -> None:
    svc = start_console(source=KV)
    iid, plan = waiting_plan(svc)
    action = next(a for a in plan["actions"] if (a.get("guard") or {}).get("approvable"))
    aid = action["id"]
    # a reader sees the plan but no buttons, and may not approve
    reader = login(svc, API, by="reader")
    page = reader.get(f"/incidents/{iid}").text
    assert aid in page and f"/actions/{aid}/approve" not in page
    r = reader.post(f"/actions/{aid}/approve", data={"csrf": csrf_of(page), "incident": iid})
    assert r.status_code == 403
    # an approver: a missing or wrong CSRF token is 403 and changes nothing
    c = login(svc, APPROVE, by="alice")
    page = c.get(f"/incidents/{iid}").text
    assert f'action="/actions/{aid}/approve"' in page
    assert c.post(f"/actions/{aid}/approve", data={"incident": iid}).status_code == 403
    assert c.post(f"/actions/{aid}/approve", data={"csrf": "wrong", "incident": iid}).status_code == 403
    # no state change from a GET
    assert c.get(f"/actions/{aid}/approve").status_code == 405
    assert svc.store.decisions(plan["id"]) == {}
    # without a session at all
    assert httpx.post(f"{svc.url}/actions/{aid}/approve", data={"csrf": csrf_of(page)}).status_code == 401
    r = c.post(f"/actions/{aid}/approve", data={"csrf": csrf_of(page), "incident": iid})
    assert r.status_code == 303 and r.headers["location"].startswith(f"/incidents/{iid}?msg=")
    d = svc.store.decisions(plan["id"])[aid]
    assert d["decision"] == "approved" and d["actor"].startswith("alice (token:")
    # the same action again: the API's 409
    assert c.post(f"/actions/{aid}/approve", data={"csrf": csrf_of(page), "incident": iid}).status_code == 409

    def executed() -> bool:
        inc = svc.store.get(iid)
        return inc is not None and any(e["kind"] == "action" and e["detail"].get("status") == "executed"
                                       for e in inc["timeline"])

    wait_for(executed, 60, "the approved action to execute")
    live = c.get(f"/incidents/{iid}/live").text
    assert re.search(r'class="ev-status">executed<', live)
    # the postmortem: written by a POST once the incident is mitigated or resolved, then linked
    assert c.get(f"/incidents/{iid}/postmortem").status_code == 404
    assert c.post(f"/incidents/{iid}/postmortem", data={"csrf": csrf_of(page)}).status_code == 409  # mitigating
    assert svc.store.set_status(iid, "resolved", "test", "recovered")  # terminal: the loop cannot reopen it
    page = c.get(f"/incidents/{iid}").text
    assert "Write the postmortem" in page and "postmortem-link" not in page
    assert c.post(f"/incidents/{iid}/postmortem", data={}).status_code == 403
    assert reader.post(f"/incidents/{iid}/postmortem", data={"csrf": csrf_of(reader.get("/incidents").text)}
                       ).status_code == 403
    assert c.post(f"/incidents/{iid}/postmortem", data={"csrf": csrf_of(page)}).status_code == 303
    assert 'id="postmortem-link"' in c.get(f"/incidents/{iid}").text
    pm = c.get(f"/incidents/{iid}/postmortem")
    assert pm.status_code == 200 and iid in pm.text and "<script" not in pm.text
    assert pm.headers["content-security-policy"].startswith("default-src 'none'")


def test_override_needs_the_role_and_a_reason(start_console: Any) -> None:
    svc = start_console(source=KV)
    iid, plan = waiting_plan(svc)
    aid = plan["actions"][0]["id"]
    c = login(svc, APPROVE)
    csrf = csrf_of(c.get(f"/incidents/{iid}").text)
    assert c.post(f"/actions/{aid}/override", data={"csrf": csrf, "reason": "because"}).status_code == 403
    o = login(svc, OVERRIDE, by="olga")
    csrf = csrf_of(o.get(f"/incidents/{iid}").text)
    assert o.post(f"/actions/{aid}/override", data={"csrf": csrf, "reason": ""}).status_code == 400
    assert svc.store.decisions(plan["id"]) == {}


def test_runbooks_in_english_and_chinese(start_console: Any) -> None:
    svc = start_console()
    c = login(svc, API)
    en = c.get("/runbooks").text
    assert "kv-capacity" in en and "Runbooks" in en
    zh = c.get("/runbooks/kv-capacity?lang=zh").text
    en1 = c.get("/runbooks/kv-capacity").text
    assert re.search(r"[\u4e00-\u9fff]", zh) and 'lang="zh"' in zh
    assert zh != en1 and "Signature" in en1
    # the alert condition, stated once, and the PromQL the export makes of it (escaped: `>=` reads as `&gt;=`)
    assert "Alert condition" in en1 and "prompt_shift == null" in en1
    assert "(namespace:vllm_ttft_seconds:p99 / namespace:vllm_ttft_seconds:p99_baseline) &gt;= 3" in en1
    assert c.get("/runbooks/nope").status_code == 404


def test_drill_from_the_console_fills_the_scoreboard(start_console: Any) -> None:
    svc = start_console()
    c = login(svc, APPROVE)
    page = c.get("/drills").text
    r = c.post("/drills", data={"csrf": csrf_of(page), "i_kv-capacity": "1", "i_engine-hang": "1", "seed": "1"})
    assert r.status_code == 303
    assert c.post("/drills", data={"csrf": csrf_of(page), "seed": "1"}).status_code in (303, 409)

    def done() -> bool:
        return "(done)" in c.get("/drills/board").text

    wait_for(done, 120, "the drill to finish")
    board = c.get("/drills/board")
    assert board.status_code == 286  # htmx stops polling
    rows = re.findall(r"<tr><td>([a-z-]+)</td><td>([a-z-]+)</td>", board.text)
    assert [r[0] for r in rows] == ["kv-capacity", "engine-hang"]
    reader = login(svc, API)
    assert reader.post("/drills", data={"csrf": csrf_of(reader.get("/drills").text)}).status_code == 403


def test_the_api_still_answers_beside_the_console(start_console: Any) -> None:
    svc = start_console()
    assert httpx.get(f"{svc.url}/api/v1/incidents").status_code == 401
    assert json.loads(httpx.get(f"{svc.url}/healthz").text)["ok"] is True
    assert httpx.get(f"{svc.url}/static/htmx.min.js").status_code == 200
    assert httpx.get(f"{svc.url}/static/../console.py").status_code == 404
