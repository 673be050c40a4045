"""The liveness sidecar: a scrape loop feeding `LivenessTracker`, and a tiny HTTP server.

`GET /livez` answers the tracker's verdict (200 or 503, JSON body); `GET /metrics` exports
the sidecar's own state for Prometheus.  The scrape loop never raises: a timeout, a refused
connection, a non-200 answer or a page without engine metrics are all "scrape failed".
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from llm_oncall.probe.liveness import STATUSES, LivenessConfig, LivenessTracker, Verdict
from llm_oncall.signals.httpserve import send
from llm_oncall.signals.source import parse_for

Fetch = Callable[[], str]
"""Returns one /metrics page or raises."""

CONTENT_TYPE_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT` (or `:PORT`, or `PORT`) → (host, port); host defaults to 127.0.0.1."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"invalid listen address {value!r}: expected HOST:PORT") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"invalid port in {value!r}")
    return host, number


def http_fetch(url: str, timeout_s: float) -> tuple[Fetch, Callable[[], None]]:
    """A fetch function for `url` with a pooled client, and the function that closes it."""
    client = httpx.Client(timeout=timeout_s, headers={"Accept": "text/plain;version=0.0.4"})

    def fetch() -> str:
        resp = client.get(url)
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}")
        return resp.text

    return fetch, client.close


class _StateCollector(Collector):
    def __init__(self, sidecar: LivenessSidecar) -> None:
        self.sidecar = sidecar

    def collect(self) -> Iterable[Metric]:
        v = self.sidecar.verdict()
        tr = self.sidecar.tracker
        stall = GaugeMetricFamily("llm_oncall_probe_stall_seconds",
                                  "Seconds the engine-step heartbeat has been flat while requests are present "
                                  "(0 when stepping or idle)")
        busy = v.status not in ("idle", "starting")
        stall.add_metric([], (v.seconds_since_progress or 0.0) if busy else 0.0)
        yield stall
        thr = GaugeMetricFamily("llm_oncall_probe_stall_threshold_seconds", "Configured stall threshold")
        thr.add_metric([], v.stall_threshold_seconds)
        yield thr
        status = GaugeMetricFamily("llm_oncall_probe_status", "1 for the current liveness status",
                                   labels=["status"])
        for s in STATUSES:
            status.add_metric([s], 1.0 if s == v.status else 0.0)
        yield status
        healthy = GaugeMetricFamily("llm_oncall_probe_healthy", "1 when /livez answers 200")
        healthy.add_metric([], 1.0 if v.healthy else 0.0)
        yield healthy
        for name, helptext, value in (
            ("llm_oncall_probe_running_requests", "vllm:num_requests_running at the last scrape", v.running),
            ("llm_oncall_probe_waiting_requests", "vllm:num_requests_waiting at the last scrape", v.waiting),
            ("llm_oncall_probe_last_scrape_age_seconds", "Seconds since the last scrape attempt",
             v.last_scrape_age_seconds),
        ):
            if value is not None:
                g = GaugeMetricFamily(name, helptext)
                g.add_metric([], value)
                yield g
        for name, helptext, count in (
            ("llm_oncall_probe_scrapes", "Scrapes of the target", tr.scrapes),
            ("llm_oncall_probe_scrape_errors", "Failed scrapes of the target", tr.failures),
            ("llm_oncall_probe_engine_restarts", "Engine restarts seen (counter resets, new process)", tr.restarts),
        ):
            c = CounterMetricFamily(name, helptext)
            c.add_metric([], float(count))
            yield c


class LivenessSidecar:
    """Scrapes `fetch` every `interval_s` on a thread and serves `/livez` and `/metrics`."""

    def __init__(self, fetch: Fetch, cfg: LivenessConfig | None = None, interval_s: float = 5.0,
                 listen: tuple[str, int] = ("127.0.0.1", 8081), clock: Callable[[], float] = time.monotonic,
                 target: str = "") -> None:
        if interval_s <= 0:
            raise ValueError("interval must be > 0")
        self.fetch = fetch
        self.interval_s = interval_s
        self.clock = clock
        self.target = target
        self.tracker = LivenessTracker(cfg, start=clock())
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_StateCollector(self))
        self.httpd = ThreadingHTTPServer(listen, _handler(self))
        self.httpd.daemon_threads = True
        self._threads: list[threading.Thread] = []

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self.httpd.server_address[0]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{self.port}"

    def verdict(self) -> Verdict:
        with self.lock:
            return self.tracker.status(self.clock())

    def scrape_once(self, t: float | None = None) -> Verdict:
        """Scrape now; `t` is the scrape's time (default: now)."""
        error: str | None = None
        page = None
        try:
            page = parse_for("vllm", self.fetch())
        except Exception as exc:  # any failure to get a page is "unreachable", never a crash
            error = f"{type(exc).__name__}: {exc}"[:200]
        with self.lock:
            return self.tracker.observe(self.clock() if t is None else t, page, error)

    def _scrape_loop(self) -> None:
        next_at = self.clock()
        while not self.stopping.is_set():
            # Stamped with its slot, not its completion: flat times are exact multiples of the
            # interval, so a freeze fails the probe within stall + one interval.
            self.scrape_once(next_at)
            next_at += self.interval_s
            now = self.clock()
            if next_at < now:  # a slow scrape: skip the missed slots, keep the cadence
                next_at += math.ceil((now - next_at) / self.interval_s) * self.interval_s
            self.stopping.wait(max(0.0, next_at - now))

    def start(self) -> LivenessSidecar:
        for fn, name in ((self._scrape_loop, "livez-scrape"), (self.httpd.serve_forever, "livez-http")):
            th = threading.Thread(target=fn, name=name, daemon=True)
            th.start()
            self._threads.append(th)
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        for th in self._threads:
            th.join(timeout=10.0)

    def __enter__(self) -> LivenessSidecar:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def livez_body(self) -> tuple[int, dict[str, Any]]:
        v = self.verdict()
        body = v.to_json()
        body["target"] = self.target
        return v.http_status, body


def _handler(sidecar: LivenessSidecar) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "llm-oncall-probe"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/livez", "/livez/"):
                code, body = sidecar.livez_body()
                self._send(code, "application/json", json.dumps(body).encode())
            elif path == "/metrics":
                self._send(200, CONTENT_TYPE_TEXT, generate_latest(sidecar.registry))
            elif path in ("/healthz", "/readyz"):
                self._send(200, "text/plain; charset=utf-8", b"ok\n")
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found: try /livez or /metrics\n")

        def _send(self, code: int, ctype: str, data: bytes) -> None:
            send(self, code, ctype, data)

        def log_message(self, format: str, *args: Any) -> None:
            return  # kubelet probes every few seconds; access logs would drown real output

    return Handler
