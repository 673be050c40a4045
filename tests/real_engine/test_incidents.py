"""Incidents reproduced on a real vLLM CPU server, diagnosed live and from a capture bundle.

Each test drives bounded load on 127.0.0.1, scrapes the server through the product's own scrape source and
autopilot (the code path of ``llm-oncall diagnose --target``), and records the scrape at which the diagnosis
first names the incident. Measured numbers are printed (``pytest -s``) and summarised in docs/real-engine.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.testkit import wait_for
from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.signals.scrape import ScrapeSource
from llm_oncall.signals.source import Target
from llm_oncall.sim import Fleet, FleetConfig

from .vllm_env import KV, PREEMPT, RUNNING, STEPS, WAITING, VllmServer, sample_sums

pytestmark = pytest.mark.real_engine

INTERVAL = 2.0
SHORT_PROMPT = "the water is long and"  # 5 tokens
LONG_PROMPT = " ".join(["the water is long and people find the way"] * 6)  # 54 tokens


# --------------------------------------------------------------------------------------------------------------
# load: closed-loop clients that can be stopped (cancelling a request closes its connection; vLLM aborts it)


@dataclass(frozen=True)
class Client:
    prompt: str
    max_tokens: int
    pause_s: float = 0.0
    repeat: bool = True
    start_after_s: float = 0.0
    """Delay before the first request (clients of a surge join one after another)."""
    period_s: float = 0.0
    """Paced: each request starts ``period_s`` after the previous one started (at once if that one took longer),
    so the client's arrival rate is its own, not the server's speed; 0: the next request ``pause_s`` after an answer."""


@dataclass
class Load:
    """Concurrent completion clients in a background event loop; bounded by ``max_requests`` and ``stop()``."""

    server: VllmServer
    clients: Sequence[Client]
    max_requests: int = 400
    timeout_s: float = 180.0
    sent: int = 0
    ok: int = 0
    errors: list[str] = field(default_factory=list)
    completion_tokens: list[int] = field(default_factory=list)
    """Tokens generated, per request answered."""
    latencies: list[float] = field(default_factory=list)
    """Seconds from sending to the answer, per request answered."""
    _stopping: bool = False
    _loop: asyncio.AbstractEventLoop | None = None
    _task: asyncio.Task[Any] | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Load:
        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(self._main())
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        assert self._loop is not None and self._task is not None
        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(self._task)
        self._loop.close()

    async def _main(self) -> None:
        limits = httpx.Limits(max_connections=len(self.clients) + 4)
        async with httpx.AsyncClient(base_url=self.server.url, timeout=self.timeout_s, limits=limits) as http:
            await asyncio.gather(*(self._client(http, c) for c in self.clients))

    async def _client(self, http: httpx.AsyncClient, c: Client) -> None:
        body = {"model": self.server.served_model_name, "prompt": c.prompt, "max_tokens": c.max_tokens,
                "temperature": 0, "ignore_eos": True}
        if c.start_after_s:
            await asyncio.sleep(c.start_after_s)
        clock = asyncio.get_running_loop()
        next_start = clock.time()
        while not self._stopping and self.sent < self.max_requests:
            self.sent += 1
            next_start += c.period_s
            sent_at = clock.time()
            try:
                r = await http.post("/v1/completions", json=body)
                r.raise_for_status()
                self.ok += 1
                self.latencies.append(clock.time() - sent_at)
                try:
                    self.completion_tokens.append(int(r.json()["usage"]["completion_tokens"]))
                except (ValueError, KeyError, TypeError):
                    self.completion_tokens.append(-1)  # an answer without usage: shows in any check of the counts
            except httpx.HTTPError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            if not c.repeat:
                return
            await asyncio.sleep(max(c.pause_s, next_start - clock.time()) if c.period_s else c.pause_s)

    def stop(self) -> None:
        """Cancel every request in flight (their connections close, so the server aborts them) and join."""
        self._stopping = True
        if self._loop is not None and self._task is not None and self._thread is not None:
            if self._thread.is_alive():
                with contextlib.suppress(RuntimeError):  # the loop may have just finished
                    self._loop.call_soon_threadsafe(self._task.cancel)
            self._thread.join(30)


@contextlib.contextmanager
def running_load(server: VllmServer, clients: Sequence[Client], **kw: Any) -> Iterator[Load]:
    load = Load(server, clients, **kw).start()
    try:
        yield load
    finally:
        load.stop()


# --------------------------------------------------------------------------------------------------------------
# live diagnosis, one scrape per interval, recording every step


@dataclass(frozen=True)
class Tick:
    t: float
    """Monotonic time of the scrape."""
    scrape_s: float
    """How long the scrape took (a busy API server can answer late)."""
    incident: str | None
    m: dict[str, float]
    features: dict[str, Any]


class Live:
    """The live loop of ``llm-oncall diagnose --target`` (scrape → observe → step), one tick at a time."""

    def __init__(self, server: VllmServer, interval_s: float = INTERVAL) -> None:
        self.interval_s = interval_s
        self.pilot = Autopilot(interval_s)
        self.source = ScrapeSource([Target("tiny", server.metrics_url)], timeout_s=0.8 * interval_s, keep_text=True)
        self.ticks: list[Tick] = []
        self.diagnoses: list[Diagnosis] = []
        self._next: float | None = None

    def tick(self) -> Tick:
        now = time.monotonic()
        if self._next is not None and now < self._next:
            time.sleep(self._next - now)
        t = time.monotonic()
        self._next = t + self.interval_s
        batch = self.source.collect()
        scrape_s = time.monotonic() - t
        self.pilot.observe(batch)
        text = batch.observations[0].text
        # A failed scrape (timeout, refused) reads NaN for every sample: every comparison with it is false.
        m: dict[str, float] = defaultdict(lambda: math.nan, sample_sums(text) if text else {})
        incident = None
        feats: dict[str, Any] = {}
        if len(self.pilot.store.times()) >= 2:
            d = self.pilot.step()
            self.diagnoses.append(d)
            incident = d.incident
            feats = dict(self.pilot.features[-1].values)
        tick = Tick(t, scrape_s, incident, m, feats)
        self.ticks.append(tick)
        return tick


def report(name: str, **values: Any) -> None:
    """Measured numbers, visible with ``pytest -s`` (and in the failure output)."""
    print(f"\n[{name}] " + ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                     for k, v in values.items()))


def trace(ticks: Sequence[Tick]) -> str:
    t0 = ticks[0].t if ticks else 0.0
    return "\n".join(
        f"{x.t - t0:6.1f}s (scrape {x.scrape_s:4.1f}s) run={x.m.get(RUNNING, -1):.0f} "
        f"wait={x.m.get(WAITING, -1):.0f} kv={x.m.get(KV, -1):.2f} "
        f"preempt={x.m.get(PREEMPT, -1):.0f} steps={x.m.get(STEPS, -1):.0f} → {x.incident}"
        for x in ticks
    )


def warm_up(server: VllmServer, clients: Sequence[Client]) -> None:
    """One short round of the test's batch shape first: the first batches of a new shape on a cold CPU engine can
    take several seconds per step (a real stall, but a start-up one) and must not count as the incident."""
    server.wait_idle()
    short = [Client(c.prompt, 24, repeat=False) for c in clients]
    load = Load(server, short, timeout_s=120).start()
    assert load._thread is not None
    load._thread.join(150)
    load.stop()
    assert not load.errors, load.errors[:3]
    server.wait_idle()


def cli_json(args: Sequence[str]) -> dict[str, Any]:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    body: dict[str, Any] = json.loads(result.stdout)
    return body


# --------------------------------------------------------------------------------------------------------------
# healthy


def test_light_traffic_is_healthy(vllm_server: VllmServer) -> None:
    vllm_server.wait_idle()
    clients = [Client(SHORT_PROMPT, 16, pause_s=0.5), Client(LONG_PROMPT, 32, pause_s=1.0)]
    with running_load(vllm_server, clients, max_requests=200) as load:
        # The traffic flows before the diagnosis starts (an event, however slow the first answers on a busy host).
        wait_for(lambda: load.ok >= 2 or bool(load.errors), 120, "the light traffic's first answers")
        ok_before = load.ok
        t0 = time.monotonic()
        body = cli_json(["diagnose", "--target", f"tiny={vllm_server.metrics_url}", "--interval", str(INTERVAL),
                         "--samples", "6", "--json"])
        elapsed = time.monotonic() - t0
        ok_during = load.ok - ok_before
    report("healthy", clients=len(clients), requests_ok=load.ok, seconds=elapsed, incident=body["incident"],
           confidence=body["confidence"])
    assert not load.errors, load.errors[:3]
    assert ok_during >= 1, "the light traffic did not run during the diagnosis"
    assert body["snapshot"]["fleet"]["pods_up"] == 1
    assert body["incident"] == "healthy", body["summary"]
    vllm_server.wait_idle()


# --------------------------------------------------------------------------------------------------------------
# engine hang (SIGSTOP the engine core) — live, then from a capture bundle written during the hang


def _capture(server: VllmServer, out: Path, duration_s: float) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "llm_oncall.cli", "capture", "--target", f"tiny={server.metrics_url}",
            "--out", str(out), "--duration", str(duration_s), "--interval", str(INTERVAL), "--json"]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_pages(capture: subprocess.Popen[bytes], out: Path, n: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(list(out.glob("tiny/*.prom"))) < n:
        if capture.poll() is not None:
            stdout, stderr = capture.communicate()
            raise AssertionError(f"capture exited with {capture.returncode} before writing {n} page(s):\n"
                                 f"{stdout.decode(errors='replace')}\n{stderr.decode(errors='replace')}")
        if time.monotonic() > deadline:
            capture.kill()
            stdout, stderr = capture.communicate()
            raise AssertionError(f"capture wrote no page to {out} in {timeout_s}s:\n"
                                 f"{stdout.decode(errors='replace')}\n{stderr.decode(errors='replace')[-3000:]}")
        time.sleep(0.1)


def test_engine_hang_live_and_from_capture(vllm_server: VllmServer, tmp_path: Path) -> None:
    bundle = tmp_path / "hang-bundle"
    # Lengths that differ, so the four never finish in the same step and requests are always in flight (identical
    # requests started together end together, and the engine's stats then say 0 running until the next batch).
    clients = [Client(SHORT_PROMPT, n) for n in (1000, 910, 830, 760)]
    warm_up(vllm_server, clients)
    live = Live(vllm_server)
    # The capture ends on its own (a count of scrapes) and the engine stays frozen until it has, so the bundle ends
    # inside the hang. It is long enough that even when the progress phase below takes all of its 8 ticks, the hang
    # still holds about 8 of its pages (the live loop names the hang by the third scrape after the freeze).
    capture_s = 16 * INTERVAL
    capture: subprocess.Popen[bytes] | None = None
    t_freeze = t_diag = t_seen = t_recovered = None
    i_diag: int | None = None
    try:
        # The capture CLI starts before the load: on a busy 2-core host a new interpreter (which may compile the
        # package from source) can starve for half a minute behind the engine and the load threads.
        capture = _capture(vllm_server, bundle, capture_s)
        _wait_for_pages(capture, bundle, 1, timeout_s=180)  # a safety net: it returns at the first page
        # Unbounded (the context stops it): on a fast engine behind slow scrapes a bounded load can be done before
        # the progress phase has seen it.
        with running_load(vllm_server, clients, max_requests=100_000) as load:
            # Progress first: requests running, the heartbeat moving, and no engine-hang.
            for _ in range(8):
                tick = live.tick()
                prev = live.ticks[-2] if len(live.ticks) > 1 else None
                if prev and tick.m[RUNNING] > 0 and tick.m[STEPS] > prev.m[STEPS] and len(live.ticks) >= 3:
                    break
            assert live.ticks[-1].m[RUNNING] > 0, trace(live.ticks)
            assert "engine-hang" not in [x.incident for x in live.ticks], trace(live.ticks)
            before = len(live.ticks)

            vllm_server.freeze_in_flight("engine")
            t_freeze = time.monotonic()
            for _ in range(6):
                tick = live.tick()
                prev = live.ticks[-2]
                if t_seen is None and tick.m[STEPS] == prev.m[STEPS] and prev.t > t_freeze:
                    t_seen = tick.t  # the first scrape that shows the heartbeat flat since the freeze
                if tick.incident == "engine-hang":
                    t_diag, i_diag = tick.t, len(live.ticks) - 1
                    break
            assert vllm_server.health_status() == 200  # the hang hides behind a healthy /health
            # Keep it frozen until the capture is over, so the bundle ends inside the hang.
            try:
                capture.wait(timeout=capture_s + 180)  # a safety net: the capture ends after its scrapes
            except subprocess.TimeoutExpired:
                capture.kill()
                _, stderr = capture.communicate()
                raise AssertionError(f"capture still running {capture_s + 180:.0f}s after the freeze:\n"
                                     f"{stderr.decode(errors='replace')[-3000:]}") from None
            vllm_server.thaw()
            t_thaw = time.monotonic()
            for _ in range(5):
                tick = live.tick()
                if tick.incident not in (None, "engine-hang"):
                    t_recovered = tick.t
                    break
            assert not load.errors, load.errors[:3]
    finally:
        vllm_server.thaw()
        if capture is not None and capture.poll() is None:
            capture.kill()
            capture.wait(10)
    report("engine-hang", clients=len(clients), max_tokens=max(c.max_tokens for c in clients), interval_s=INTERVAL,
           freeze_to_diagnosis_s=(t_diag - t_freeze) if t_diag else None,
           freeze_to_diagnosis_intervals=(t_diag - t_freeze) / INTERVAL if t_diag else None,
           observable_to_diagnosis_intervals=(t_diag - t_seen) / INTERVAL if t_diag and t_seen else None,
           thaw_to_recovered_s=(t_recovered - t_thaw) if t_recovered else None,
           recovered_as=live.ticks[-1].incident)
    assert t_diag is not None, trace(live.ticks)
    # Diagnosed within 2 scrape intervals of the first scrape that can show the freeze (the first one after it).
    # Counted in scrapes, not seconds (a late scrape on a busy host is one tick, whenever it comes).
    assert i_diag is not None and i_diag - before <= 2, trace(live.ticks)
    assert live.diagnoses[-1].incident != "engine-hang", trace(live.ticks)
    assert t_recovered is not None, trace(live.ticks)
    d = next(d for d in live.diagnoses if d.incident == "engine-hang")
    assert d.scope_pods == ("tiny",)

    assert capture is not None and capture.returncode == 0, capture.stderr.read() if capture.stderr else None
    pages = sorted(bundle.glob("tiny/*.prom"))
    assert len(pages) >= 8 and (bundle / "bundle.json").exists()
    replay = cli_json(["diagnose", "--replay", str(bundle), "--json"])
    report("engine-hang replay", pages=len(pages), incident=replay["incident"])
    assert replay["incident"] == "engine-hang", replay["summary"]
    vllm_server.wait_idle()


# --------------------------------------------------------------------------------------------------------------
# KV-cache capacity: arrivals above what the small KV pool (39 blocks of 32 tokens) can hold


def _why_not(d: Diagnosis | None, incident: str) -> str:
    if d is None or d.incident == incident:
        return ""
    return next((r.why for r in d.ruled_out if r.incident == incident), "")


def test_kv_capacity_overload(vllm_server: VllmServer) -> None:
    n_clients, max_tokens = 32, 900
    warm_up(vllm_server, [Client(LONG_PROMPT, max_tokens)] * 8)
    live = Live(vllm_server)
    # An idle baseline long enough that the surge does not become its own baseline within the test (the baseline
    # is the median over all but the last 3 snapshots).
    for _ in range(6):
        live.tick()
    t_load = time.monotonic()
    t_symptom = t_diag = None
    i_symptom = i_diag = None
    # Closed-loop clients that resubmit: the overload lasts as long as the test looks, so a late scrape on a busy
    # host costs one tick, not the incident.
    with running_load(vllm_server, [Client(LONG_PROMPT, max_tokens)] * n_clients, max_requests=200) as load:
        for _ in range(20):
            tick = live.tick()
            prev = live.ticks[-2]
            i = len(live.ticks) - 1
            # The symptom, read from the raw page: a deep queue while blocks run out (vLLM preempts a running
            # request only when it cannot allocate a block for it).
            if t_symptom is None and tick.m[WAITING] >= 10 and tick.m[PREEMPT] > prev.m[PREEMPT]:
                t_symptom, i_symptom = tick.t, i
            if tick.incident == "kv-capacity":
                t_diag, i_diag = tick.t, i
                break
            if i_symptom is not None and i - i_symptom > 4:
                break
        errors = list(load.errors)
    ticks = live.ticks
    peak = {k: max(x.m.get(k, 0.0) for x in ticks) for k in (WAITING, RUNNING, KV)}
    report("kv-capacity", clients=n_clients, prompt_tokens=54, max_tokens=max_tokens, interval_s=INTERVAL,
           load_to_symptom_s=(t_symptom - t_load) if t_symptom else None,
           symptom_to_diagnosis_intervals=(i_diag - i_symptom) if i_diag is not None and i_symptom is not None
           else None,
           symptom_to_diagnosis_s=(t_diag - t_symptom) if t_diag and t_symptom else None,
           load_to_diagnosis_s=(t_diag - t_load) if t_diag else None,
           peak_waiting=peak[WAITING], peak_running=peak[RUNNING], peak_kv=peak[KV],
           preemptions=ticks[-1].m[PREEMPT] - ticks[0].m[PREEMPT],
           slowest_scrape_s=max(x.scrape_s for x in ticks))
    notes = [""] * (len(ticks) - len(live.diagnoses)) + [_why_not(d, "kv-capacity") for d in live.diagnoses]
    why = "\n".join(f"{line}  {note}" for line, note in zip(trace(ticks).splitlines(), notes, strict=True))
    # A request cancelled at the end is not an error; one that failed while the test looked is.
    assert not errors, errors[:3]
    wrong = {x.incident for x in ticks} - {None, "healthy", "kv-capacity"}
    assert not wrong, (wrong, why)
    assert i_symptom is not None, why
    assert t_diag is not None and i_diag is not None, why
    # Persistence 2: the earliest possible diagnosis is one scrape after the symptom first shows; a scrape that
    # came later than the interval (the API server stalled under the load: one took 15.8 s on a CI host) costs
    # one tick, not the incident.
    late = sum(1 for x in ticks[i_symptom + 1:i_diag + 1] if x.scrape_s > INTERVAL)
    assert i_diag - i_symptom <= 2 + late, why
    d = live.diagnoses[-1]
    signals = {e.signal for e in d.evidence}
    assert {"waiting", "kv_max"} <= signals
    vllm_server.wait_idle()


# --------------------------------------------------------------------------------------------------------------
# KV-capacity before any queue: more clients of the same kind fill a small KV pool; vLLM preempts, nothing waits

# A server of its own: 16 usable KV blocks of 32 tokens (512 tokens) for 8 batch slots. 8 clients = max-num-seqs,
# so a request can only wait because KV blocks ran out. A request grows to 54 + 110 tokens = 6 blocks: the 2
# baseline clients hold at most 12 of the 16, the 8 of the surge would need up to 48 and vLLM preempts the newest.
SURGE_SERVER: dict[str, Any] = {"num_gpu_blocks": 17, "max_model_len": 512, "max_num_seqs": 8}
SURGE_BASE_CLIENTS = 2
SURGE_CLIENTS = 8
SURGE_MAX_TOKENS = 110
# Paced clients: each starts a request every SURGE_PACE × the latency measured for 2 clients just before, so the
# surge is ×4 arrivals whatever the host's speed, and 4–5 requests are in flight in the surge on an idle host as
# on a busy one (15–19 blocks wanted of 16: preemptions at the peaks). Closed-loop clients that resubmit at once
# keep the pool full anywhere, but their arrivals follow the server's speed: ×1.9–2.7 on the busy host, dipping
# to ×0.6–1.2 for a scrape whenever it slowed, and the diagnosis came 3 scrapes late. A fixed period of 2.5 s
# passed on the busy host (requests of 1–2 s) but preempted once in 8 surge scrapes on an idle one (requests of
# 0.4 s: 1.3 in flight); a pace of 2 × the latency preempted so often that the queue read 1–3 at most scrapes.
SURGE_PACE = 2.5
"""Each client starts a request every SURGE_PACE × the measured latency (at least every 0.5 s)."""
# The six new clients join 1 s apart (a surge ramps). Joined within a second, their prompts reach the page at
# once and their completions a request later: the completed prompts' mean read ×3–4 for a scrape (a "prompt
# shift", which refutes kv-capacity) and the preemptions started at the first surge scrape, before it.
SURGE_JOIN_S = 1.0
SURGE_BASE_TICKS = 10
SURGE_BASELINE_TRIES = 3
SURGE_MAX_WAITING = 3
"""A preempted request is back in the queue until a block frees: up to 3 of 8 for a scrape is that, not a queue."""


def _surge_notes(live: Live) -> list[str]:
    """Per tick: the features the kv-capacity signature reads, and why it is not the diagnosis where it is not."""
    lead = len(live.ticks) - len(live.diagnoses)
    out = [""] * lead
    for x, d in zip(live.ticks[lead:], live.diagnoses, strict=True):
        f = x.features
        vals = " ".join(f"{n}={f.get(n):.2f}" if isinstance(f.get(n), float) else f"{n}={f.get(n)}"
                        for n in ("arrival_rate_ratio", "preemptions_per_s", "kv_max", "waiting_per_pod",
                                  "ttft_ratio", "ttft_p50_ratio", "ttft_p90_ratio", "window_requests", "itl_ratio",
                                  "prompt_shift", "symptom"))
        out.append(f"{vals} [{d.severity}] {_why_not(d, 'kv-capacity')}")
    return out


def loud_scrapes(ticks: Sequence[Any]) -> list[str]:
    """Scrapes (``Tick`` or ``FleetTick``) with a red symptom or a page: what was red, with the latency ratios."""
    out = []
    for i, x in enumerate(ticks):
        f = x.features
        if f.get("symptom") is True or x.incident not in (None, "healthy"):
            red = [n for n in ("symptom_ttft", "symptom_itl", "symptom_errors", "symptom_throughput",
                               "symptom_availability") if f.get(n) is True]
            out.append(f"scrape {i}: {x.incident} {red} ttft ×{f.get('ttft_ratio') or 0:.1f} "
                       f"itl ×{f.get('itl_ratio') or 0:.1f} (itl p99 {1000 * (f.get('itl_p99') or 0):.0f} ms)")
    return out


def quiet(ticks: Sequence[Any]) -> bool:
    """A baseline fit to judge a change against: nothing paged, and no symptom red at its last scrape (a red
    scrape that did not page is a one-scrape blip; one at the end would run into the change)."""
    return all(x.incident in (None, "healthy") for x in ticks) and ticks[-1].features.get("symptom") is not True


class Scraping(Protocol):
    """A live loop the baseline helper drives: ``Live`` (one server) or ``FleetLive`` (several)."""

    @property
    def ticks(self) -> Sequence[Any]: ...

    def tick(self) -> Any: ...


L = TypeVar("L", bound=Scraping)


def learn_quiet_baseline(new_live: Callable[[], L], ticks: int, tries: int, label: str) -> tuple[L, int]:
    """A baseline of ``ticks`` scrapes on a new autopilot (``new_live()``) that is ``quiet``; a loud one is
    discarded (printed) and learned again, up to ``tries`` times, then the test is an xfail: on the shared 2-core
    host another suite's burst can double the ITL p99 of a light load for tens of seconds, which is red and pages
    `unknown` before any change. A red scrape that did not page (a blip) is printed and kept. The quiet baseline's
    autopilot, and how many were discarded before it."""
    discarded: list[str] = []
    for _ in range(tries):
        live = new_live()
        for _ in range(ticks):
            live.tick()
        loud = loud_scrapes(live.ticks)
        if quiet(live.ticks):
            if loud:
                print(f"\n[{label}] baseline blips, not paged, kept: {'; '.join(loud)}")
            return live, len(discarded)
        discarded.append("; ".join(loud))
        print(f"\n[{label}] baseline not quiet, learned again: {discarded[-1]}")
    pytest.xfail(f"[{label}] no quiet baseline in {tries} tries of {ticks} scrapes: {discarded}")


def test_surge_preempts_before_it_queues(start_vllm_server: Callable[..., VllmServer]) -> None:
    server = start_vllm_server(**SURGE_SERVER)
    warm_up(server, [Client(LONG_PROMPT, SURGE_MAX_TOKENS)] * SURGE_CLIENTS)
    # The pace, from this host's speed now: the latency of the request shape with the baseline's 2 clients.
    probe = Load(server, [Client(LONG_PROMPT, SURGE_MAX_TOKENS)] * SURGE_BASE_CLIENTS, max_requests=6).start()
    wait_for(lambda: probe.ok + len(probe.errors) >= 6, 180, "6 requests of the 2 calibration clients")
    probe.stop()
    assert not probe.errors, probe.errors[:3]
    latency = statistics.median(probe.latencies)
    period = max(0.5, round(SURGE_PACE * latency, 2))
    shape = Client(LONG_PROMPT, SURGE_MAX_TOKENS, period_s=period)
    server.wait_idle()
    joining = [replace(shape, start_after_s=k * SURGE_JOIN_S) for k in range(SURGE_CLIENTS - SURGE_BASE_CLIENTS)]
    i_surge = SURGE_BASE_TICKS
    i_symptom = i_diag = None
    d_diag: Diagnosis | None = None
    t_surge = 0.0
    discarded = 0
    with running_load(server, [shape] * SURGE_BASE_CLIENTS, max_requests=1000) as base:
        # The baseline is a light load already running, not the ramp from idle (whose first windows read a
        # fraction of its rate and would make any later rate look like a surge).
        wait_for(lambda: base.ok >= 4 or bool(base.errors), 120, "4 baseline requests to complete")
        # A quiet baseline is a precondition (see learn_quiet_baseline).
        live, discarded = learn_quiet_baseline(lambda: Live(server), SURGE_BASE_TICKS, SURGE_BASELINE_TRIES,
                                               "kv-capacity, no queue")
        assert not base.errors, base.errors[:3]
        t_surge = time.monotonic()
        with running_load(server, joining, max_requests=1000) as surge:
            # Bounded in scrapes: after the symptom the test looks 2 scrapes past the later of symptom and
            # diagnosis, or gives up 4 scrapes after the symptom; without a symptom, after 16 scrapes.
            for _ in range(16):
                tick = live.tick()
                prev = live.ticks[-2]
                i = len(live.ticks) - 1
                # The symptom, read from the raw page: a preemption since the last scrape (vLLM preempts a
                # running request only when it cannot allocate a block for it), or a red TTFT.
                if i_symptom is None and (tick.m[PREEMPT] > prev.m[PREEMPT] or tick.features.get("symptom_ttft")):
                    i_symptom = i
                if i_diag is None and tick.incident == "kv-capacity":
                    i_diag, d_diag = i, live.diagnoses[-1]
                if i_symptom is not None and i_diag is not None and i >= max(i_symptom, i_diag) + 2:
                    break
                if i_symptom is not None and i_diag is None and i - i_symptom > 4:
                    break
            errors = base.errors + surge.errors
            requests = (base.ok, surge.ok)
    ticks = live.ticks
    after = ticks[i_surge:]
    waiting = [x.m[WAITING] for x in after]
    at = ticks[i_diag].features if i_diag is not None else after[-1].features
    report("kv-capacity, no queue", server=SURGE_SERVER, base_clients=SURGE_BASE_CLIENTS, clients=SURGE_CLIENTS,
           prompt_tokens=54, max_tokens=SURGE_MAX_TOKENS, latency_s=latency, period_s=period, join_s=SURGE_JOIN_S,
           baselines_discarded=discarded, requests_ok=requests,
           arrivals_baseline=at.get("arrival_rate_baseline"), arrivals=at.get("arrival_rate"),
           arrival_ratio=at.get("arrival_rate_ratio"),
           arrival_ratios=" ".join(f"{(x.features.get('arrival_rate_ratio') or 0.0):.2f}" for x in after),
           waiting_at_scrapes=" ".join(f"{w:.0f}" for w in waiting), max_waiting=max(waiting),
           preemptions=after[-1].m[PREEMPT] - ticks[i_surge - 1].m[PREEMPT],
           preemptions_per_s=at.get("preemptions_per_s"), peak_kv=max(x.m.get(KV, 0.0) for x in after),
           peak_running=max(x.m.get(RUNNING, 0.0) for x in after),
           surge_to_symptom_scrapes=(i_symptom - i_surge + 1) if i_symptom is not None else None,
           symptom_to_diagnosis_scrapes=(i_diag - i_symptom) if i_diag is not None and i_symptom is not None
           else None,
           surge_to_diagnosis_s=(ticks[i_diag].t - t_surge) if i_diag is not None else None,
           severity=d_diag.severity if d_diag else None, ttft_ratio=at.get("ttft_ratio"),
           itl_ratio=at.get("itl_ratio"), root_cause=d_diag.root_cause if d_diag else None)
    why = "\n".join(f"{line}  {note}" for line, note in zip(trace(ticks).splitlines(), _surge_notes(live),
                                                               strict=True))
    print(why)
    assert not errors, errors[:3]
    wrong = {x.incident for x in ticks} - {None, "healthy", "kv-capacity"}
    assert not wrong, (wrong, why)
    # A light baseline: nothing preempted.
    assert ticks[i_surge - 1].m[PREEMPT] == ticks[0].m[PREEMPT], why
    if i_symptom is None:  # the set-up did not produce the incident in this run: no diagnosis to judge
        pytest.xfail(f"no preemption and no red TTFT in {len(after)} surge scrapes (peak KV "
                     f"{max(x.m.get(KV, 0.0) for x in after):.2f}, waiting {waiting}, arrivals "
                     f"×{at.get('arrival_rate_ratio')})")
    assert i_diag is not None and d_diag is not None, why
    # It preempts before it queues: with a batch slot for every client a request waits only when it was preempted
    # (back in the queue until a block frees), and up to the first sign (symptom or diagnosis) no more than that
    # waits — the old rule wanted 10. Later scrapes are not judged: the burst of preemptions that follows can
    # leave 5 of the 8 waiting for blocks, at the diagnosis one scrape later too (seen on the busy host: waiting
    # 0 0 0 0 5; 0 0 2 2 1; 0 5 at the diagnosis); the diagnosis must rest on the preemptions (below), not on that
    # queue.
    first_sign = min(i_symptom, i_diag)
    assert max(x.m[WAITING] for x in ticks[i_surge:first_sign + 1]) <= SURGE_MAX_WAITING, why
    # Persistence 2: the earliest diagnosis is one scrape after the symptom (or earlier, on KV >= 0.9 alone).
    assert i_diag - i_symptom <= 2, why
    # Diagnosed on capacity pressure that needs no queue, under more arrivals of the same prompts.
    assert (at.get("preemptions_per_s") or 0.0) > 0 or (at.get("kv_max") or 0.0) >= 0.9, why
    assert (at.get("arrival_rate_ratio") or 0.0) >= 1.4, why
    # A warning while no user-facing symptom is red (the time to scale), a page once one is; the runbook also pages
    # on a standing queue (2 waiting per pod), which a preempted request back in the queue can read for a scrape.
    if at.get("symptom") is True or (at.get("waiting_per_pod") or 0.0) >= 2:
        assert d_diag.severity == "page", (d_diag.severity, why)
    else:
        assert d_diag.severity == "warn", (d_diag.severity, why)
    assert {"kv_max", "arrival_rate_ratio", "prompt_shift"} <= {e.signal for e in d_diag.evidence}
    server.wait_idle()


# --------------------------------------------------------------------------------------------------------------
# the simulator's exposition against the live server's


LATENCY_HISTOGRAMS = (
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
    "vllm:request_inference_time_seconds", "vllm:request_time_per_output_token_seconds",
)
# Families the live server writes that the simulator does not model, each with its reason.
NOT_SIMULATED: dict[str, str] = {}


def _families(text: str) -> dict[str, tuple[str, set[frozenset[str]], dict[str, list[float]]]]:
    out: dict[str, tuple[str, set[frozenset[str]], dict[str, list[float]]]] = {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith("vllm:"):
            continue
        labelsets: set[frozenset[str]] = set()
        buckets: dict[str, list[float]] = {}
        for s in fam.samples:
            labelsets.add(frozenset(k for k in s.labels if k != "le"))
            if s.name.endswith("_bucket"):
                buckets.setdefault(s.name, []).append(float(s.labels["le"]))
        out[fam.name] = (fam.type, labelsets, buckets)
    return out


def test_simulator_exposition_matches_live_server(vllm_server: VllmServer) -> None:
    live = _families(vllm_server.metrics_text())
    fleet = Fleet(FleetConfig(pods=1), seed=1)
    fleet.advance(30.0)
    page = fleet.render_metrics(next(iter(fleet.targets())))
    assert page is not None
    sim = _families(page)
    missing = set(live) - set(sim) - set(NOT_SIMULATED)
    invented = set(sim) - set(live)
    assert not missing and not invented, (sorted(missing), sorted(invented))
    for name in sorted(set(live) & set(sim)):
        assert live[name][0] == sim[name][0], (name, live[name][0], sim[name][0])
        assert live[name][1] == sim[name][1], (name, live[name][1], sim[name][1])
    for name in LATENCY_HISTOGRAMS:
        assert live[name][0] == "histogram", name
        assert live[name][2] == sim[name][2], (name, live[name][2], sim[name][2])
