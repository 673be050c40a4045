"""Two-server fixtures and fleet-level load for the real-engine incident tests (prefix cache, retry storm).

- ``server_pair``: two vLLM CPU servers started side by side, each worker pinned to its own core
  (``VLLM_CPU_OMP_THREADS_BIND`` 0 and 1: with the default ``auto`` both workers would take core 0).
- ``FleetLive``: the live loop of ``llm-oncall diagnose`` over several targets, with change events fed in.
- ``SessionRouter``: multi-turn chat sessions with long per-session prefixes behind a client-side router whose
  policy (session-sticky or random) can be switched mid-run.
- ``Gateway``: a gateway-style ``/metrics`` page (``gateway_requests_received_total{client}``,
  ``gateway_retries_total{client}``, ``gateway_requests_total{client,code}``) kept by the test clients, the
  counters a real gateway (Envoy, the production-stack router) exports, scraped as a target of kind ``gateway``.
- ``RetryClients``: closed-loop clients behind that gateway that retry at once, without budget or backoff, on
  errors and timeouts (alternating upstreams), bounded in total attempts and time.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.testkit import PageServer, free_port

from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.signals.events import Event
from llm_oncall.signals.scrape import ScrapeSource
from llm_oncall.signals.source import Target

from .vllm_env import VllmServer, sample_sums

INTERVAL = 2.0

# One configuration for both servers: 47 usable KV blocks of 32 tokens (1504 tokens) — four sessions' prefixes
# fit in one server's prefix cache, eight do not — and max-model-len 1504, so one long request can hold the pool.
PAIR_SETTINGS: dict[str, Any] = {"num_gpu_blocks": 48, "max_model_len": 1504, "max_num_seqs": 8, "block_size": 32}


def start_pair(python: Path, model_dir: Path, log_dir: Path, **settings: Any) -> list[VllmServer]:
    """Start two servers concurrently (start-up is mostly imports: in parallel it costs one start-up, not two)."""
    kw = {**PAIR_SETTINGS, **settings}
    servers = [
        VllmServer(free_port(), model_dir, python=python, log_path=log_dir / f"server-{name}.log",
                   env={"VLLM_CPU_OMP_THREADS_BIND": str(core)}, **kw)
        for core, name in enumerate("ab")
    ]
    errors: list[BaseException] = []

    def start(s: VllmServer) -> None:
        try:
            s.start()
        except BaseException as exc:  # reported below, from the main thread
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,), daemon=True) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        for s in servers:
            s.stop()
        raise errors[0]
    return servers


@pytest.fixture(scope="module")
def server_pair(vllm_python: Path, tiny_model_dir: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VllmServer]]:
    """Two servers with PAIR_SETTINGS, named ``a`` and ``b``; always stopped at the end of the module."""
    servers = start_pair(vllm_python, tiny_model_dir, tmp_path_factory.mktemp("vllm-pair"))
    try:
        yield servers
    finally:
        for s in servers:
            s.stop()


# --------------------------------------------------------------------------------------------------------------
# live diagnosis over several targets


@dataclass(frozen=True)
class FleetTick:
    t: float
    """Wall-clock time of the scrape (the clock of the scrape source and of events)."""
    incident: str | None
    per_target: dict[str, dict[str, float]]
    features: dict[str, Any]
    diagnosis: Diagnosis | None


class FleetLive:
    """Scrape → observe → step over several targets, one tick per interval; events join the next batch."""

    def __init__(self, targets: Sequence[Target], interval_s: float = INTERVAL) -> None:
        self.interval_s = interval_s
        self.pilot = Autopilot(interval_s)
        self.source = ScrapeSource(list(targets), timeout_s=0.8 * interval_s, keep_text=True)
        self.ticks: list[FleetTick] = []
        self.pending: list[Event] = []
        self._next: float | None = None

    def add_event(self, event: Event) -> None:
        self.pending.append(event)

    def tick(self) -> FleetTick:
        now = time.monotonic()
        if self._next is not None and now < self._next:
            time.sleep(self._next - now)
        self._next = time.monotonic() + self.interval_s
        batch = self.source.collect()
        batch.events.extend(self.pending)
        self.pending = []
        self.pilot.observe(batch)
        per = {o.target.name: (sample_sums(o.text) if o.text else {}) for o in batch.observations}
        t = max(o.t for o in batch.observations)
        d = None
        feats: dict[str, Any] = {}
        if len(self.pilot.store.times()) >= 2:
            d = self.pilot.step()
            feats = dict(self.pilot.features[-1].values)
        tick = FleetTick(t, d.incident if d else None, per, feats, d)
        self.ticks.append(tick)
        return tick


def fmt_features(tick: FleetTick, names: Sequence[str]) -> str:
    parts = []
    for n in names:
        v = tick.features.get(n)
        parts.append(f"{n}={v:.3g}" if isinstance(v, float) else f"{n}={v}")
    return " ".join(parts)


def fleet_trace(ticks: Sequence[FleetTick], names: Sequence[str]) -> str:
    t0 = ticks[0].t if ticks else 0.0
    return "\n".join(f"{x.t - t0:6.1f}s {fmt_features(x, names)} → {x.incident}" for x in ticks)


# --------------------------------------------------------------------------------------------------------------
# background asyncio load, stoppable


class Background:
    """Runs ``main()`` (a coroutine function) in its own event loop thread; ``stop()`` cancels and joins."""

    def __init__(self) -> None:
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._thread: threading.Thread | None = None
        self.crash: BaseException | None = None

    async def main(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def start(self) -> Background:
        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(self.main())
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        assert self._loop is not None and self._task is not None
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # surfaced by the test through .crash
            self.crash = exc
        finally:
            self._loop.close()

    def stop(self) -> None:
        self.stopping = True
        if self._loop is not None and self._task is not None and self._thread is not None:
            if self._thread.is_alive():
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._task.cancel)
            self._thread.join(30)


# --------------------------------------------------------------------------------------------------------------
# prefix cache: chat sessions with long per-session prefixes behind a sticky/random router

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zu", "pa", "qui", "dre", "ston", "ber", "gal", "fin")


def session_document(session: int, words: int) -> str:
    """A long system prompt of its own for each session (a document the conversation is about)."""
    rng = random.Random(1000 + session)
    return " ".join("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(words))


def shared_document(words: int) -> str:
    """The part of the system prompt every session shares (instructions, a policy), before its own document."""
    rng = random.Random(999)
    return " ".join("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(words))


@dataclass
class SessionRouter(Background):
    """Multi-turn chat sessions, taken in a fixed cyclic order by ``workers`` concurrent clients, routed to
    ``servers`` by session (``sticky``: session i → server i mod n) or at random (``random``).

    Each turn sends the session's document as the system message, the session's last ``history`` exchanges, and a
    new question (chat completions, a few output tokens). Sticky routing reuses a server's cached prefix for the
    document; random routing sends half the turns to a server whose cache may not hold it. With ``shared_words``
    the system message starts with a document all sessions share, which every server keeps cached whatever the
    routing: it sets the floor of the hit rate under random routing.
    """

    servers: Sequence[VllmServer] = ()
    sessions: int = 8
    doc_words: int = 170
    shared_words: int = 0
    history: int = 2
    workers: int = 2
    max_tokens: int = 8
    pause_s: float = 0.05
    policy: str = "sticky"
    max_requests: int = 3000
    seed: int = 7
    sent: int = 0
    ok: int = 0
    prompt_tokens: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    routed: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        Background.__init__(self)
        self._rng = random.Random(self.seed)
        shared = shared_document(self.shared_words) + " " if self.shared_words else ""
        self._docs = [shared + session_document(i, self.doc_words) for i in range(self.sessions)]
        self._turns = [0] * self.sessions
        self._next_session = 0

    def set_policy(self, policy: str) -> None:
        assert policy in ("sticky", "random")
        self.policy = policy

    def _route(self, session: int) -> VllmServer:
        if self.policy == "sticky":
            return self.servers[session % len(self.servers)]
        return self._rng.choice(list(self.servers))

    def _messages(self, session: int) -> list[dict[str, str]]:
        turn = self._turns[session]
        self._turns[session] += 1
        msgs = [{"role": "system", "content": self._docs[session]}]
        for k in range(max(0, turn - self.history), turn):
            msgs.append({"role": "user", "content": f"question {k} about part {k % 7}"})
            msgs.append({"role": "assistant", "content": f"answer {k}: it is in part {k % 7}"})
        msgs.append({"role": "user", "content": f"question {turn} about part {turn % 7}"})
        return msgs

    async def main(self) -> None:
        async with httpx.AsyncClient(timeout=60.0) as http:
            await asyncio.gather(*(self._worker(http) for _ in range(self.workers)))

    async def _worker(self, http: httpx.AsyncClient) -> None:
        while not self.stopping and self.sent < self.max_requests:
            session = self._next_session
            self._next_session = (session + 1) % self.sessions
            server = self._route(session)
            body = {"model": server.served_model_name, "messages": self._messages(session),
                    "max_tokens": self.max_tokens, "temperature": 0, "ignore_eos": True}
            self.sent += 1
            self.routed[server.url] = self.routed.get(server.url, 0) + 1
            try:
                r = await http.post(f"{server.url}/v1/chat/completions", json=body)
                r.raise_for_status()
                self.ok += 1
                self.prompt_tokens.append(int(r.json()["usage"]["prompt_tokens"]))
            except httpx.HTTPError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(self.pause_s)


# --------------------------------------------------------------------------------------------------------------
# retry storm: a gateway page kept by the clients, and clients that retry without budget


class Gateway:
    """A gateway in front of the servers, as far as the test needs one: its counters, served as a Prometheus text
    page on 127.0.0.1, and a per-upstream circuit breaker (at most ``max_in_flight`` requests in flight to one
    upstream; more are answered 503 at once, like Envoy's ``max_requests`` overflow)."""

    def __init__(self, max_in_flight: int = 3) -> None:
        self.max_in_flight = max_in_flight
        self.in_flight: dict[str, int] = {}
        self.overflows = 0
        self.received: dict[str, int] = {}
        self.retries: dict[str, int] = {}
        self.responses: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._page: PageServer | None = None
        self.url = ""

    def count(self, client: str, *, retry: bool, code: str) -> None:
        with self._lock:
            self.received[client] = self.received.get(client, 0) + 1
            self.retries.setdefault(client, 0)
            if retry:
                self.retries[client] += 1
            self.responses[(client, code)] = self.responses.get((client, code), 0) + 1

    def admit(self, upstream: str) -> bool:
        with self._lock:
            n = self.in_flight.get(upstream, 0)
            if n >= self.max_in_flight:
                self.overflows += 1
                return False
            self.in_flight[upstream] = n + 1
            return True

    def release(self, upstream: str) -> None:
        with self._lock:
            self.in_flight[upstream] -= 1

    def page(self) -> str:
        with self._lock:
            lines = ["# HELP gateway_requests_received_total Requests received from clients (retries included).",
                     "# TYPE gateway_requests_received_total counter"]
            lines += [f'gateway_requests_received_total{{client="{c}"}} {n}' for c, n in sorted(self.received.items())]
            lines += ["# HELP gateway_retries_total Requests that retry an earlier failed request.",
                      "# TYPE gateway_retries_total counter"]
            lines += [f'gateway_retries_total{{client="{c}"}} {n}' for c, n in sorted(self.retries.items())]
            lines += ["# HELP gateway_requests_total Responses by client and status code.",
                      "# TYPE gateway_requests_total counter"]
            lines += [f'gateway_requests_total{{client="{c}",code="{k}"}} {n}'
                      for (c, k), n in sorted(self.responses.items())]
        return "\n".join(lines) + "\n"

    def start(self) -> Gateway:
        self._page = PageServer(lambda: self.page().encode())
        self.url = self._page.url
        return self

    def stop(self) -> None:
        if self._page is not None:
            self._page.close()
            self._page = None


@dataclass
class RetryClients(Background):
    """``per_server`` clients per server, each homed on one server, behind ``gateway``.

    A client sends a request, waits ``think_s`` after a success, and on any failure (connection refused, the
    gateway's 503 overflow, 5xx, timeout after ``timeout_s``) retries at once — no budget, no backoff — against the
    next server in turn. An overflow answer takes ``overflow_s`` (the round trip to the gateway). Bounded: at most
    ``max_attempts`` attempts in all and ``max_seconds`` of running.
    """

    servers: Sequence[VllmServer] = ()
    gateway: Gateway | None = None
    per_server: int = 3
    prompt: str = "the water is long and people find the way"
    max_tokens: int = 48
    think_s: float = 1.5
    timeout_s: float = 10.0
    overflow_s: float = 0.05
    max_attempts: int = 20000
    max_seconds: float = 120.0
    attempts: int = 0
    ok: int = 0
    failures: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        Background.__init__(self)

    async def main(self) -> None:
        deadline = time.monotonic() + self.max_seconds
        n = len(self.servers)
        limits = httpx.Limits(max_connections=4 * n * self.per_server)
        async with httpx.AsyncClient(timeout=self.timeout_s, limits=limits) as http:
            await asyncio.gather(*(self._client(http, f"c{i}", i % n, deadline)
                                   for i in range(n * self.per_server)))

    async def _client(self, http: httpx.AsyncClient, name: str, home: int, deadline: float) -> None:
        assert self.gateway is not None
        rng = random.Random(name)
        await asyncio.sleep(rng.uniform(0, self.think_s))
        while not self.stopping and self.attempts < self.max_attempts and time.monotonic() < deadline:
            target = home
            retry = False
            while not self.stopping and self.attempts < self.max_attempts and time.monotonic() < deadline:
                server = self.servers[target]
                body = {"model": server.served_model_name, "prompt": self.prompt, "max_tokens": self.max_tokens,
                        "temperature": 0, "ignore_eos": True}
                self.attempts += 1
                if not self.gateway.admit(server.url):
                    code = "503"
                    await asyncio.sleep(self.overflow_s)
                else:
                    try:
                        r = await http.post(f"{server.url}/v1/completions", json=body)
                        code = str(r.status_code)
                    except httpx.TimeoutException:
                        code = "504"
                    except httpx.HTTPError:
                        code = "502"
                    finally:
                        self.gateway.release(server.url)
                self.gateway.count(name, retry=retry, code=code)
                if code == "200":
                    self.ok += 1
                    break
                self.failures[code] = self.failures.get(code, 0) + 1
                retry = True
                target = (target + 1) % len(self.servers)  # fail over to the next upstream, at once
                await asyncio.sleep(0)
            await asyncio.sleep(self.think_s)
