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
from llm_oncall.service.telemetry import Log

WEBHOOK = "webhook-token-0123456789"
API = "api-token-0123456789abcd"
APPROVE = "approve-token-0123456789"
SAMPLE = Path("/work/shared/reference/alertmanager_webhook_sample.json")
SAMPLE_BODY: dict[str, Any] = json.loads(SAMPLE.read_text()) if SAMPLE.is_file() else {
    # the same body (a real Alertmanager 0.25 webhook) when the shared reference is not on this machine
    "receiver": "autopilot", "status": "firing", "version": "4", "truncatedAlerts": 0,
    "groupKey": '{}:{alertname="VLLMQueueBacklog", namespace="inference"}',
    "groupLabels": {"alertname": "VLLMQueueBacklog", "namespace": "inference"},
    "commonLabels": {"alertname": "VLLMQueueBacklog", "job": "vllm", "namespace": "inference", "severity": "page"},
    "commonAnnotations": {"runbook": "scale-out"}, "externalURL": "http://127.0.0.1:19093",
    "alerts": [
        {"status": "resolved", "labels": {"alertname": "VLLMQueueBacklog", "pod": "vllm-1", "severity": "page"},
         "annotations": {"summary": "vLLM pod vllm-1 has 4 waiting requests"},
         "startsAt": "2026-11-30T04:07:41.804Z", "endsAt": "2026-11-30T04:07:42.804Z", "generatorURL": "",
         "fingerprint": "4f2f48f5999d21db"},
        {"status": "firing", "labels": {"alertname": "VLLMQueueBacklog", "pod": "vllm-2", "severity": "page"},
         "annotations": {"summary": "vLLM pod vllm-2 has 6 waiting requests"},
         "startsAt": "2026-11-30T04:07:32.804Z", "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "",
         "fingerprint": "14cf2654afc3dfe1"}]}


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
