"""A running service with the console mounted: real HTTP on 127.0.0.1, the real SQLite file, the simulator."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.testkit import service_starter

from llm_oncall.service.app import Service
from llm_oncall.web.console import routes

WEBHOOK = "webhook-token-0123456789"
API = "api-token-0123456789abcd"
APPROVE = "approve-token-0123456789"
OVERRIDE = "override-token-0123456789"
KV = {"sim": {"pods": 3, "seed": 3, "fault": "kv-capacity", "at": 120}}


DEFAULTS: dict[str, Any] = {
    "source": {"sim": {"pods": 3, "seed": 3}}, "mode": "approve",
    "auth": {"webhook": [WEBHOOK], "api": [API], "approve": [APPROVE], "override": [OVERRIDE]}}


@pytest.fixture
def start_console(tmp_path: Path) -> Iterator[Callable[..., Service]]:
    yield from service_starter(tmp_path, DEFAULTS, extend=routes)


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "no CSRF field in the page"
    return m.group(1)


def login(svc: Service, token: str, by: str = "alice") -> httpx.Client:
    c = httpx.Client(base_url=svc.url, timeout=10)
    r = c.get("/login")
    assert r.status_code == 200
    r = c.post("/login", data={"csrf": csrf_of(r.text), "token": token, "by": by, "next": "/incidents"})
    assert r.status_code == 303, r.text
    return c
