"""What the tests share: free ports, waiting on a condition (never on a clock alone), a temp Prometheus, stopping
a process, `llm-oncall serve` as a subprocess, the simulator with its Kubernetes API publishing a file_sd list, and
a small HTTP server for an exposition page.

Waiting is always "until the condition holds, bounded by a generous timeout": on a busy 2-core CI machine a
fixed sleep is either too short (flaky) or too long (slow).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from llm_oncall.sim import Fleet
from llm_oncall.sim.serve import SimServer

PROMETHEUS = shutil.which("prometheus")
SRC = Path(__file__).resolve().parents[1] / "src"


_PORTS_PER_WORKER = 1500
_PORT_BASE = 20000
"""Test ports come from below the kernel's ephemeral range (32768–60999, where connect() and bind(0) draw), one
disjoint block per xdist worker, handed out in turn: two workers never get the same port, and a port handed out
is never re-used by the OS for an outgoing connection in the meantime."""
_next_port: list[int] = []


def free_port() -> int:
    """A TCP port on 127.0.0.1, free now and reserved to this test process; also a port nothing listens on."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    first = _PORT_BASE + (index % 8) * _PORTS_PER_WORKER
    if not _next_port:
        _next_port.append(first + (os.getpid() % 97) * 7 % _PORTS_PER_WORKER)
    for _ in range(_PORTS_PER_WORKER):
        port = first + (_next_port[0] - first) % _PORTS_PER_WORKER
        _next_port[0] = port + 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (a server of an earlier test still closing): the next one
        return port
    raise RuntimeError(f"no free port in {first}–{first + _PORTS_PER_WORKER - 1}")


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
        stop_process(proc)
        log.close()


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 10) -> None:
    """SIGTERM, then SIGKILL if it has not exited after ``grace_s``; always reaped (no zombie, no leaked port)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def db_rows(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of a query on a store another process is writing (read-only; none while its tables are not there)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return list(con.execute(sql, args).fetchall())
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def spawn_serve(cfg: Path, log: Path) -> subprocess.Popen[bytes]:
    """`llm-oncall serve --config CFG` as a real process of this checkout's source, output appended to ``log``."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with log.open("ab") as out:  # the child keeps its own descriptor
        return subprocess.Popen([sys.executable, "-m", "llm_oncall.cli", "serve", "--config", str(cfg)],
                                stdout=out, stderr=subprocess.STDOUT, env=env)


def start_sim(fleet: Fleet, speed: float, tmp: Path) -> tuple[SimServer, Path, Path]:
    """The fleet in this process (real time ×``speed``) with its Kubernetes API; its scrape targets published to
    ``tmp/targets.json`` (a file_sd list, replaced atomically as pods come and go). The server, the list and a
    kubeconfig for its API; the caller stops the server."""
    sd = tmp / "targets.json"

    def publish(groups: list[dict[str, Any]]) -> None:
        part = sd.with_suffix(".tmp")
        part.write_text(json.dumps(groups))
        os.replace(part, sd)

    sim = SimServer(fleet, speed=speed, base_port=0, on_targets=publish, kube_api=("127.0.0.1", 0)).start()
    assert sim.kube is not None
    return sim, sd, sim.kube.write_kubeconfig(tmp / "kubeconfig")


class PageServer:
    """An exposition page in the classic text format whatever the Accept header (names keep their colons, like
    vLLM), served on a free port from ``render()`` at each request until ``close()``."""

    def __init__(self, render: Callable[[], bytes]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = render()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a scrape that gave up (timeout) closes its connection: not an error of the page

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port: int = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


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


def write_serve_config(tmp: Path, cfg: dict[str, Any], **over: Any) -> Path:
    """A serve.yaml under `tmp`: a free 127.0.0.1 port, the SQLite file under `tmp`, a 0.1 s round, then `cfg`, then
    `over`."""
    import yaml

    full: dict[str, Any] = {"listen": f"127.0.0.1:{free_port()}", "db": str(tmp / "incidents.db"),
                            "interval": "0.1s", "log_level": "warning", **cfg, **over}
    path = tmp / "serve.yaml"
    path.write_text(yaml.safe_dump(full))
    return path


def service_starter(tmp: Path, cfg: dict[str, Any],
                    extend: Callable[..., Any] | None = None) -> Iterator[Callable[..., Any]]:
    """A fixture body: `start(log=None, **over)` runs a Service in this process on `write_serve_config(tmp, cfg,
    **over)`; every one started is stopped at the end."""
    from llm_oncall.service.app import Service
    from llm_oncall.service.config import load
    from llm_oncall.service.observability import Log

    started: list[Service] = []

    def start(log: Log | None = None, **over: Any) -> Service:
        svc = Service(load(write_serve_config(tmp, cfg, **over)), log=log or Log("warning"), extend=extend).start()
        started.append(svc)
        return svc

    yield start
    for s in started:
        s.stop()


def capture_bundle(fleet: Fleet, out: Path, until: float, interval_s: float = 15.0) -> None:
    """What `llm-oncall capture` writes for this fleet until `until` (simulated): its vLLM and DCGM pages, its pods'
    logs and its events, one scrape per interval."""
    from llm_oncall.respond.simsource import SimSource
    from llm_oncall.signals.bundle import BundleWriter
    from llm_oncall.signals.source import Target

    source = SimSource(fleet, interval_s, keep_text=True)
    writer = BundleWriter(out, interval_s)
    while fleet.now < until:
        batch = source.collect()
        for obs in batch.observations:
            if obs.target.kind in ("vllm", "dcgm"):
                writer.write(obs)
        for name, lines in batch.logs.items():
            pod = name.split("/")[0]
            if pod in fleet.targets():
                writer.write_logs(Target(pod), lines)
        writer.add_events(batch.events)
