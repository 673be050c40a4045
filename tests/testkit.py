"""What the tests share: free ports, waiting on a condition (never on a clock alone), and a temp Prometheus.

Waiting is always "until the condition holds, bounded by a generous timeout": on a busy 2-core CI machine a
fixed sleep is either too short (flaky) or too long (slow).
"""

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
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it); also a port nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def wait_until(cond: Callable[[], bool], timeout: float, step: float = 0.02) -> bool:
    """True as soon as ``cond()`` holds; after ``timeout`` seconds, its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Like wait_until, but a timeout fails the test and says what it waited for."""
    if not wait_until(check, timeout_s, step=0.1):
        raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")


def http_ok(url: str, timeout_s: float = 1.0) -> bool:
    """True when ``url`` answers 200 right now (a refused or slow connection is False, never an error)."""
    try:
        return httpx.get(url, timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


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
            return http_ok(f"{url}/-/ready")

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


KUBECTL = shutil.which("kubectl")


def kubectl(kubeconfig: Path, *args: str) -> str:
    """Run the real kubectl (an argv list, never a shell) against `kubeconfig`; its stdout. Skips without kubectl
    (fails on CI, where it must be there)."""
    if KUBECTL is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is missing on a CI machine")
        pytest.skip("kubectl is not installed")
    out = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir",
                          str(kubeconfig.parent / "kube-cache"), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout
