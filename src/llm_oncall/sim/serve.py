"""`sim serve`: the simulated fleet in real time on 127.0.0.1, one HTTP port per pod.

Every pod answers like a vLLM OpenAI server (`/metrics`, `/health`, `/v1/models`,
`/v1/completions`); every node has a dcgm-exporter port, and the gateway and
kube-state-metrics have one each.  A clock thread advances the virtual clock to
`wall seconds × speed`; one lock serialises every access to the fleet.  Pods that appear
later (rollouts, autoscaling) get a port of their own and the file_sd target list is
published again; pods that are gone stop listening.  A pod that is down, loading or
crash-looping answers 503; a hung one accepts requests and never answers them, while its
/health stays 200 (exactly what vLLM does).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from llm_oncall.signals.httpserve import send
from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster
from llm_oncall.sim.pods import READY

CONTENT_TYPE_TEXT = "text/plain; version=0.0.4; charset=utf-8"
HOST = "127.0.0.1"
MAX_BODY = 1 << 20

Handler = Callable[["_Request"], tuple[int, str, bytes] | None]
"""(code, content type, body), or None to leave the client hanging."""


@dataclass
class Endpoint:
    key: str
    """`vllm/<pod>`, `dcgm/<node>`, `gateway`, `kube`."""
    kind: str
    labels: dict[str, str]
    httpd: ThreadingHTTPServer
    thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"


@dataclass
class _Request:
    method: str
    path: str
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def _json(code: int, obj: Any) -> tuple[int, str, bytes]:
    return code, "application/json", json.dumps(obj).encode()


def _error(code: int, message: str, kind: str = "BadRequestError") -> tuple[int, str, bytes]:
    return _json(code, {"object": "error", "message": message, "type": kind, "param": None, "code": code})


class SimServer:
    def __init__(self, fleet: Fleet, speed: float = 1.0, base_port: int = 0, step_s: float = 0.05,
                 max_chunk_s: float = 2.0, hang_s: float = 60.0,
                 on_targets: Callable[[list[dict[str, Any]]], None] | None = None,
                 kube_api: tuple[str, int] | None = None) -> None:
        """`kube_api` = (host, port): also serve the fleet's Kubernetes API there (port 0: any free port)."""
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.fleet = fleet
        self.speed = speed
        self.base_port = base_port
        self.step_s = step_s
        self.max_chunk_s = max_chunk_s
        self.hang_s = hang_s
        self.on_targets = on_targets
        self.lock = threading.RLock()
        """Held for every read or write of the fleet (the Kubernetes API takes it too)."""
        self.kube_api_address = kube_api
        self.kube: KubeApiServer | None = None
        self.stopping = threading.Event()
        self.endpoints: dict[str, Endpoint] = {}
        self._next_port = base_port
        self._clock: threading.Thread | None = None
        self._published: list[dict[str, Any]] | None = None
        self._wall0 = 0.0
        self._virtual0 = fleet.now
        self.lag_s = 0.0
        """How far the virtual clock trails wall × speed (the simulator cannot keep up when > 0)."""

    # ---- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> SimServer:
        self._wall0 = time.monotonic()
        self._virtual0 = self.fleet.now
        try:
            self._sync_endpoints()
            if self.kube_api_address is not None:
                host, port = self.kube_api_address
                self.kube = KubeApiServer(KubeCluster(self.fleet, self.lock), host, port).start()
        except BaseException:
            self._close_all()
            raise
        self._clock = threading.Thread(target=self._run_clock, name="sim-clock", daemon=True)
        self._clock.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self._clock is not None:
            self._clock.join(timeout=10.0)
        self._close_all()

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def virtual_now(self) -> float:
        with self.lock:
            return self.fleet.now

    def wall_to_virtual(self, wall: float) -> float:
        return self._virtual0 + (wall - self._wall0) * self.speed

    # ---- targets ------------------------------------------------------------------------------------
    def file_sd(self) -> list[dict[str, Any]]:
        """Prometheus file_sd groups, one per endpoint (labels differ per target)."""
        out = []
        for ep in sorted(self.endpoints.values(), key=lambda e: e.port):
            out.append({"targets": [ep.address], "labels": dict(ep.labels)})
        return out

    def url(self, key: str) -> str:
        return f"http://{self.endpoints[key].address}"

    def pod_urls(self) -> dict[str, str]:
        return {ep.labels["pod"]: f"http://{ep.address}" for ep in self.endpoints.values() if ep.kind == "vllm"}

    def _wanted(self) -> dict[str, tuple[str, dict[str, str]]]:
        fleet = self.fleet
        ns = fleet.cfg.namespace
        with self.lock:
            pods = fleet.targets()
            nodes = fleet.nodes()
        wanted: dict[str, tuple[str, dict[str, str]]] = {}
        for name, labels in pods.items():
            wanted[f"vllm/{name}"] = ("vllm", {
                "pod": name, "node": labels["node"], "revision": labels["revision"], "group": labels["group"],
                "namespace": labels["namespace"], "deployment": labels["deployment"], "kind": "vllm"})
        for node in nodes:
            wanted[f"dcgm/{node}"] = ("dcgm", {"node": node, "namespace": ns, "kind": "dcgm"})
        wanted["gateway"] = ("gateway", {"namespace": ns, "kind": "gateway"})
        wanted["kube"] = ("kube", {"namespace": ns, "kind": "kube"})
        return wanted

    def _sync_endpoints(self) -> None:
        wanted = self._wanted()
        for key, (kind, labels) in wanted.items():
            ep = self.endpoints.get(key)
            if ep is None:
                self.endpoints[key] = self._open(key, kind, labels)
            elif ep.labels != labels:
                ep.labels = labels
        for key in [k for k in self.endpoints if k not in wanted]:
            self._close(self.endpoints.pop(key))
        published = self.file_sd()
        if published != self._published:
            self._published = published
            if self.on_targets is not None:
                self.on_targets(published)

    def _bind(self, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
        if self.base_port == 0:
            return ThreadingHTTPServer((HOST, 0), handler)
        last: OSError | None = None
        for _ in range(200):
            port = self._next_port
            self._next_port += 1
            try:
                return ThreadingHTTPServer((HOST, port), handler)
            except OSError as exc:  # port taken: the next one
                last = exc
        raise OSError(f"no free port from {self.base_port}: {last}")

    def _open(self, key: str, kind: str, labels: dict[str, str]) -> Endpoint:
        route = self._router(kind, labels)
        httpd = self._bind(_handler_class(route, self))
        httpd.daemon_threads = True
        ep = Endpoint(key, kind, labels, httpd)
        ep.thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                     name=f"sim-{key}", daemon=True)
        ep.thread.start()
        return ep

    @staticmethod
    def _close(ep: Endpoint) -> None:
        ep.httpd.shutdown()
        ep.httpd.server_close()

    def _close_all(self) -> None:
        if self.kube is not None:
            self.kube.stop()
            self.kube = None
        eps = list(self.endpoints.values())
        self.endpoints.clear()
        closers = [threading.Thread(target=self._close, args=(ep,), daemon=True) for ep in eps]
        for th in closers:
            th.start()
        for th in closers:
            th.join(timeout=5.0)

    # ---- the clock ----------------------------------------------------------------------------------
    def _run_clock(self) -> None:
        while not self.stopping.is_set():
            target = self.wall_to_virtual(time.monotonic())
            for _ in range(1000):  # bounded catch-up, releasing the lock between chunks
                if self.stopping.is_set():
                    return
                with self.lock:
                    now = self.fleet.now
                    if now >= target - 1e-9:
                        break
                    self.fleet.advance(min(target, now + self.max_chunk_s))
            with self.lock:
                self.lag_s = max(0.0, self.wall_to_virtual(time.monotonic()) - self.fleet.now)
            self._sync_endpoints()
            self.stopping.wait(self.step_s)

    # ---- routes -------------------------------------------------------------------------------------
    def _router(self, kind: str, labels: dict[str, str]) -> Handler:
        fleet = self.fleet
        if kind == "vllm":
            return self._pod_routes(labels["pod"])
        if kind == "dcgm":
            node = labels["node"]
            return self._page_route(lambda: fleet.render_dcgm(node))
        if kind == "gateway":
            return self._page_route(fleet.render_gateway)
        kube_page = self._page_route(fleet.render_kube_state)

        def kube(req: _Request) -> tuple[int, str, bytes] | None:
            if req.method == "GET" and req.path == "/events":
                with self.lock:
                    return _json(200, fleet.events())
            return kube_page(req)
        return kube

    def _page_route(self, render: Callable[[], str | None]) -> Handler:
        def route(req: _Request) -> tuple[int, str, bytes] | None:
            if req.method != "GET" or req.path != "/metrics":
                return 404, "text/plain", b"not found\n"
            with self.lock:
                text = render()
            if text is None:
                return 503, "text/plain", b"service unavailable\n"
            return 200, CONTENT_TYPE_TEXT, text.encode()
        return route

    def _pod_routes(self, pod: str) -> Handler:
        fleet = self.fleet
        metrics = self._page_route(lambda: fleet.render_metrics(pod))

        def ready() -> bool:
            with self.lock:
                p = fleet.by_name.get(pod)
                return p is not None and p.state == READY

        def route(req: _Request) -> tuple[int, str, bytes] | None:
            if req.path == "/metrics":
                return metrics(req)
            if not ready():
                return 503, "text/plain", b"service unavailable\n"
            if req.method == "GET" and req.path == "/health":
                return 200, "application/json", b""
            if req.method == "GET" and req.path == "/v1/models":
                model = fleet.cfg.model_name
                return _json(200, {"object": "list", "data": [{
                    "id": model, "object": "model", "created": int(fleet.cfg.epoch), "owned_by": "vllm",
                    "root": model, "parent": None, "max_model_len": 131072}]})
            if req.method == "POST" and req.path == "/v1/completions":
                return self._complete(pod, req)
            return _error(404, f"no route {req.method} {req.path}", "NotFoundError")
        return route

    def _complete(self, pod: str, req: _Request) -> tuple[int, str, bytes] | None:
        fleet = self.fleet
        try:
            body = json.loads(req.body or b"{}")
        except (ValueError, UnicodeDecodeError):
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        model = body.get("model", fleet.cfg.model_name)
        if model != fleet.cfg.model_name:
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError")
        prompt = body.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
            return _error(400, "prompt must be a string or a list of strings")
        max_tokens = body.get("max_tokens", 16)
        temperature = body.get("temperature", 1.0)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= 1 << 20:
            return _error(400, "max_tokens must be a positive integer")
        if not isinstance(temperature, int | float) or isinstance(temperature, bool):
            return _error(400, "temperature must be a number")
        choices = []
        completion_tokens = 0
        for i, text_prompt in enumerate(prompts[:64]):
            try:
                with self.lock:
                    text = fleet.complete(pod, text_prompt, max_tokens, float(temperature))
            except ConnectionError:
                return 503, "text/plain", b"service unavailable\n"
            except TimeoutError:
                self.stopping.wait(self.hang_s)  # a hung engine: the request never finishes
                return None
            n = len(text.split())
            completion_tokens += n
            choices.append({"index": i, "text": text, "logprobs": None,
                            "finish_reason": "length" if n >= max_tokens else "stop", "stop_reason": None})
        prompt_tokens = sum(len(p.split()) for p in prompts[:64])
        with self.lock:
            created = int(fleet.cfg.epoch + fleet.now)
        return _json(200, {
            "id": f"cmpl-{pod[-5:]}-{created}", "object": "text_completion", "created": created, "model": model,
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}})


def _handler_class(route: Handler, server: SimServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "uvicorn"
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

        def _serve(self, method: str) -> None:
            length = 0
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self._send((413, "text/plain", b"request body too large\n"))
                return
            body = self.rfile.read(length) if length else b""
            req = _Request(method, self.path.split("?", 1)[0], body)
            try:
                result = route(req)
            except Exception as exc:  # a bug in one request must not take the port down
                result = _error(500, f"{type(exc).__name__}: {exc}", "InternalServerError")
            if result is None:
                self.close_connection = True
                return
            self._send(result)

        def _send(self, result: tuple[int, str, bytes]) -> None:
            send(self, *result)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
