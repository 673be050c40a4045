"""A running service in this process: real HTTP on 127.0.0.1, the real SQLite file, the simulator as source."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.testkit import service_starter, write_serve_config

from llm_oncall.service.app import Service

WEBHOOK = "webhook-token-0123456789"
API = "api-token-0123456789abcd"
APPROVE = "approve-token-0123456789"
SAMPLE = Path(__file__).parent / "data" / "alertmanager_webhook_sample.json"
"""A real Alertmanager 0.25 webhook body (data/README.md says where it came from)."""
SAMPLE_BODY: dict[str, Any] = json.loads(SAMPLE.read_text())


def sample() -> dict[str, Any]:
    return json.loads(json.dumps(SAMPLE_BODY))


def _defaults(tmp: Path) -> dict[str, Any]:
    (tmp / "policy.yaml").write_text("auto: {kv-capacity: [scale_out]}\n")
    return {"source": {"sim": {"pods": 3, "seed": 3}}, "mode": "auto", "policy": str(tmp / "policy.yaml"),
            "auth": {"webhook": [WEBHOOK], "api": [API], "approve": [APPROVE]}}


def write_config(tmp: Path, **over: Any) -> Path:
    return write_serve_config(tmp, _defaults(tmp), **over)


@pytest.fixture
def start_service(tmp_path: Path) -> Iterator[Callable[..., Service]]:
    yield from service_starter(tmp_path, _defaults(tmp_path))


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
