"""Abuse of the one ASGI app, answered cleanly: a body nested 10,000 levels deep, slow clients cut off by the read
deadline, clients hanging up (one log line, no traceback), garbage on the wire, and the bodyless approve."""

from __future__ import annotations

import io
import json
import socket
import struct
import time
from typing import Any

import httpx
from tests.testkit import wait_for
from tests.web.conftest import APPROVE, KV, WEBHOOK

from llm_oncall.service.app import Service
from llm_oncall.service.config import ServiceConfig
from llm_oncall.service.observability import Log


def raw(svc: Service) -> socket.socket:
    host, port = svc.http.address
    s = socket.create_connection((host, port), timeout=30)
    return s


def read_all(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        out += chunk
    return out


def log_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    text = stream.getvalue()
    assert "Traceback" not in text
    return [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is one JSON object


def test_webhook_nested_10000_levels_is_400(start_console: Any) -> None:
    svc = start_console()
    for body in (b"[" * 10_000 + b"]" * 10_000, b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
                 b'{"receiver": "x", "alerts": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"):
        r = httpx.post(f"{svc.url}/api/v1/alerts", content=body,
                       headers={"Authorization": f"Bearer {WEBHOOK}", "Content-Type": "application/json"})
        assert r.status_code == 400, r.text
        assert "nested deeper" in r.json()["error"]
    # brackets inside strings do not count
    r = httpx.post(f"{svc.url}/api/v1/alerts", json={"receiver": "[" * 5000},
                   headers={"Authorization": f"Bearer {WEBHOOK}"})
    assert r.status_code == 400 and "nested" not in r.json()["error"]
    r = httpx.post(f"{svc.url}/api/v1/actions/a-1/approve", content=b"[" * 10_000,
                   headers={"Authorization": f"Bearer {APPROVE}"})
    assert r.status_code == 400
    assert httpx.get(f"{svc.url}/healthz").status_code == 200


def test_slow_headers_are_cut_off_by_the_read_timeout(start_console: Any) -> None:
    stream = io.StringIO()
    svc = start_console(log=Log("info", stream=stream), read_timeout="1.5s")
    s = raw(svc)
    t0 = time.monotonic()
    s.sendall(b"POST /api/v1/alerts HTTP/1.1\r\nHost: x\r\n")
    answer = b""
    closed_at = None
    for _ in range(60):  # a header line every 0.25 s, for up to 15 s: never a complete request
        try:
            s.sendall(b"X-Slow: 1\r\n")
        except OSError:
            closed_at = time.monotonic()
            break
        s.settimeout(0.25)
        try:
            chunk = s.recv(4096)
        except TimeoutError:
            continue
        except ConnectionResetError:
            closed_at = time.monotonic()
            break
        answer += chunk
        if not chunk:
            closed_at = time.monotonic()
            break
    assert closed_at is not None, "the server kept the connection of a slow client"
    assert closed_at - t0 < 5
    assert answer.startswith(b"HTTP/1.1 408")
    wait_for(lambda: "read timeout" in stream.getvalue(), 5, "the log line")
    lines = [x for x in log_lines(stream) if "timeout" in x["msg"]]
    assert len(lines) == 1


def test_idle_connection_is_closed_without_an_answer(start_console: Any) -> None:
    svc = start_console(read_timeout="1s")
    s = raw(svc)
    t0 = time.monotonic()
    assert read_all(s) == b""  # closed, nothing written (a browser's spare connection gets no 408)
    assert time.monotonic() - t0 < 8


def test_slow_body_is_cut_off(start_console: Any) -> None:
    svc = start_console(read_timeout="1.5s")
    s = raw(svc)
    t0 = time.monotonic()
    s.sendall(b"POST /api/v1/alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + WEBHOOK.encode()
              + b"\r\nContent-Length: 1000\r\n\r\n{")
    closed = False
    for _ in range(40):
        try:
            s.sendall(b" ")
        except OSError:
            closed = True
            break
        s.settimeout(0.25)
        try:
            if s.recv(4096) == b"":
                closed = True
                break
        except TimeoutError:
            continue
        except ConnectionResetError:
            closed = True
            break
    assert closed and time.monotonic() - t0 < 5


def test_default_read_timeout_keeps_a_held_connection_under_30s() -> None:
    cfg = ServiceConfig.model_validate({"source": {"sim": {}}})
    assert cfg.read_timeout <= 15


def test_client_hanging_up_is_one_log_line(start_console: Any) -> None:
    stream = io.StringIO()
    svc = start_console(log=Log("info", stream=stream))
    # hangs up while its body is still due: the app is waiting for it
    s = raw(svc)
    s.sendall(b"POST /api/v1/alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + WEBHOOK.encode()
              + b"\r\nContent-Length: 100\r\n\r\n{\"receiver\"")
    time.sleep(0.3)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
    s.close()
    wait_for(lambda: "hung up" in stream.getvalue(), 5, "the log line")
    # and clients that reset right after asking, many times over
    for _ in range(20):
        s = raw(svc)
        s.sendall(b"GET /api/v1/incidents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + APPROVE.encode()
                  + b"\r\n\r\n")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    time.sleep(0.5)
    assert httpx.get(f"{svc.url}/healthz").status_code == 200
    lines = log_lines(stream)
    hung = [x for x in lines if x["msg"] == "client hung up before the answer"]
    assert hung and hung[0]["path"] == "/api/v1/alerts"
    assert len(hung) <= 21  # at most one line per connection
    assert not [x for x in lines if x["level"] == "error"]


def test_garbage_on_the_wire_is_400_without_a_traceback(start_console: Any) -> None:
    stream = io.StringIO()
    svc = start_console(log=Log("info", stream=stream))
    s = raw(svc)
    s.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
    assert read_all(s).startswith(b"HTTP/1.1 400")
    s = raw(svc)
    s.sendall(b"POST /api/v1/alerts HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
    assert read_all(s).startswith(b"HTTP/1.1 400")
    time.sleep(0.2)
    log_lines(stream)


def test_bodyless_approve_with_only_x_approver(start_console: Any) -> None:
    svc = start_console(source=KV)

    def plan() -> bool:
        incs = svc.store.incidents()
        return bool(incs and incs[0].get("plan_id"))

    wait_for(plan, 90, "a plan")
    inc = svc.store.incidents()[0]
    body = svc.ledger.plan(inc["plan_id"])
    assert body is not None
    aid = next(a["id"] for a in body["actions"] if (a.get("guard") or {}).get("approvable"))
    s = raw(svc)
    # no Content-Length, no Transfer-Encoding, no body: RFC 9112 says that is an empty body
    s.sendall(f"POST /api/v1/actions/{aid}/approve HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {APPROVE}\r\n"
              "X-Approver: bob\r\nConnection: close\r\n\r\n".encode())
    answer = read_all(s)
    assert answer.startswith(b"HTTP/1.1 202"), answer[:300]
    d = svc.store.decisions(inc["plan_id"])[aid]
    assert d["decision"] == "approved" and d["actor"].startswith("bob (token:")
