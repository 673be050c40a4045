"""A running service in this process: real HTTP on 127.0.0.1, the real SQLite file, the simulator as source."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.testkit import free_port

from llm_oncall.service.app import Service
from llm_oncall.service.config import load
from llm_oncall.service.observability import Log

WEBHOOK = "webhook-token-0123456789"
API = "api-token-0123456789abcd"
APPROVE = "approve-token-0123456789"
SAMPLE = Path(__file__).parent / "data" / "alertmanager_webhook_sample.json"
"""A real Alertmanager 0.25 webhook body (data/README.md says where it came from)."""
SAMPLE_BODY: dict[str, Any] = json.loads(SAMPLE.read_text())


def sample() -> dict[str, Any]:
    return json.loads(json.dumps(SAMPLE_BODY))


def write_config(tmp: Path, **over: Any) -> Path:
    (tmp / "policy.yaml").write_text("auto: {kv-capacity: [scale_out]}\n")
    cfg: dict[str, Any] = {
        "listen": f"127.0.0.1:{free_port()}", "db": str(tmp / "incidents.db"),
        "source": {"sim": {"pods": 3, "seed": 3}}, "interval": "0.1s", "mode": "auto",
        "policy": str(tmp / "policy.yaml"), "log_level": "warning",
        "auth": {"webhook": [WEBHOOK], "api": [API], "approve": [APPROVE]}}
    cfg.update(over)
    path = tmp / "serve.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def start_service(tmp_path: Path) -> Iterator[Callable[..., Service]]:
    started: list[Service] = []

    def start(**over: Any) -> Service:
        cfg = load(write_config(tmp_path, **over))
        svc = Service(cfg, log=Log("warning")).start()
        started.append(svc)
        return svc

    yield start
    for s in started:
        s.stop()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
