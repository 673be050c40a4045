"""A real Prometheus (Debian package) on 127.0.0.1 for the integration tests; always stopped."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

PROMETHEUS = shutil.which("prometheus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")


def run_prometheus(tmp: Path, scrape_configs: str) -> Iterator[str]:
    """Start Prometheus with 1 s scrapes and the given `scrape_configs:` YAML; yield its URL."""
    if PROMETHEUS is None:
        if os.environ.get("CI"):
            pytest.fail("the prometheus binary is missing (Debian package `prometheus`) and CI is set")
        pytest.skip("the prometheus binary is not installed (apt-get install prometheus)")
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 800ms\n  evaluation_interval: 1s\n"
                      + scrape_configs)
    log = (tmp / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {proc.returncode}: "
                                     f"{(tmp / 'prometheus.log').read_text()[-2000:]}")
            try:
                return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, 30, "Prometheus to be ready")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()
