"""Fleet incidents on real vLLM CPU servers: a start-up crash loop, prefix-cache drop after a router change, a retry
storm after a server dies, and long-context starvation — each diagnosed live through the product's scrape source
and autopilot (the code path of ``llm-oncall diagnose --target``).

Two servers run side by side (``fleet.server_pair``: 47 usable KV blocks of 32 tokens, max-model-len 1504, workers
pinned to cores 0 and 1). Measured numbers are printed (``pytest -s``) and summarised in docs/real-engine.md.
Test order matters: the retry-storm test kills server ``b``; the long-context test runs on ``a`` afterwards.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.testkit import free_port, wait_for

from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.evidence.classify import classify_file
from llm_oncall.signals.events import Event
from llm_oncall.signals.source import Target

from .fleet import (
    PAIR_SETTINGS,
    FleetLive,
    Gateway,
    RetryClients,
    SessionRouter,
    fleet_trace,
    server_pair,
)
from .test_incidents import Client, Live, Load, _why_not, learn_quiet_baseline, trace
from .vllm_env import KV, RUNNING, WAITING, VllmServer

pytestmark = pytest.mark.real_engine
__all__ = ["server_pair"]  # the module-scoped fixture, used by the tests below


def report(name: str, **values: Any) -> None:
    print(f"\n[{name}] " + ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                     for k, v in values.items()))


# --------------------------------------------------------------------------------------------------------------
# start-up crash loop: a config vLLM rejects at start, restarted three times


CRASH_ARGS = ("--max-model-len", "100000")  # above the model's 8192 positions: vLLM's config validation refuses
CRASH_FEATURES = ("pods_down", "n_crashloop", "n_restarted", "log_cuda_graph_crash")


def test_startup_crash_loop(vllm_python: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    name = "tiny-crash"
    live = FleetLive([Target(name, f"http://127.0.0.1:{port}/metrics")])
    attempts = 3
    exits: list[str] = []
    logs: list[Path] = []
    t0 = time.monotonic()
    t_first_exit: float | None = None
    t_crashloop: float | None = None
    for attempt in range(attempts):
        log = tmp_path / f"start-{attempt}.log"
        logs.append(log)
        server = VllmServer(port, tiny_model_dir, python=vllm_python, log_path=log, extra_args=CRASH_ARGS)
        if attempt:
            live.add_event(Event(time.time(), "restart", f"pod {name} restarted (attempt {attempt + 1})",
                                 {"pod": name, "reason": "Error"}))
        failure: list[BaseException] = []

        def start(server: VllmServer = server, failure: list[BaseException] = failure) -> None:
            try:
                server.start()
            except BaseException as exc:  # the expected outcome
                failure.append(exc)

        starter = threading.Thread(target=start, daemon=True)
        starter.start()
        try:
            while starter.is_alive():  # the scrape keeps failing while the server starts and dies
                tick = live.tick()
                if t_crashloop is None and (tick.features.get("n_crashloop") or 0) >= 1:
                    t_crashloop = time.monotonic()
            starter.join()
        finally:
            server.stop()
        assert failure, f"the server started with {CRASH_ARGS}"
        exits.append(str(failure[0]).splitlines()[0])
        t_first_exit = t_first_exit or time.monotonic()
        live.pilot.add_findings([classify_file(log)])
    for _ in range(2):
        live.tick()
    d = live.ticks[-1].diagnosis
    assert d is not None
    finding = classify_file(logs[-1])
    report("crash loop", attempts=attempts, seconds=time.monotonic() - t0, exit=exits[-1][:60],
           evidence=finding.kind, error=str(finding.facts.get("error"))[:80],
           first_exit_s=(t_first_exit - t0) if t_first_exit else None,
           crashloop_seen_s=(t_crashloop - t0) if t_crashloop else None,
           incident=d.incident, confidence=d.confidence)
    print(fleet_trace(live.ticks, CRASH_FEATURES))
    # The scrape is down and the restarts are seen: the crash loop itself is recognised.
    feats = live.ticks[-1].features
    assert feats["pods_down"] == 1 and feats["n_crashloop"] == 1, feats
    # The log names the reason: a start-up configuration error, not a CUDA-graph or GPU fault.
    assert finding.kind == "vllm_startup_error" and not finding.benign and finding.incident_hint is None
    assert "max_model_len (100000)" in str(finding.facts["error"])
    assert finding.facts["phase"] == "config"
    # No CUDA-graph capture line on a CPU server: the crash-loop runbook must not claim one, nor any other incident.
    # With its only server down the fleet is unavailable: that pages as `unknown` (no runbook explains it).
    assert {x.incident for x in live.ticks} <= {None, "healthy", "unknown"}, fleet_trace(live.ticks, CRASH_FEATURES)
    why = next(r.why for r in d.ruled_out if r.incident == "cuda-graph-crash")
    assert "log_cuda_graph_crash" in why, why
    # ...but it does not sound sure of "healthy" with a pod down and a start-up error in the logs.
    if d.incident in ("healthy", "unknown"):
        assert d.confidence <= 0.5 and f"1 pod(s) crash-looping ({name})" in d.summary, d.summary
        assert "the log says: User-specified max_model_len (100000)" in d.summary, d.summary
        assert any(e.signal == "evidence:vllm_startup_error" for e in d.evidence), d.evidence


# --------------------------------------------------------------------------------------------------------------
# prefix-cache drop: session-sticky routing switched to random mid-run, recorded as a config change


PREFIX_FEATURES = ("hit_rate", "hit_rate_baseline", "prefix_queries_per_s", "prefix_queries_ratio",
                   "waiting_per_pod", "ttft_ratio")


def test_prefix_cache_drop_after_router_change(server_pair: list[VllmServer]) -> None:
    for s in server_pair:
        s.wait_idle()
    live = FleetLive([Target(n, s.metrics_url) for n, s in zip("ab", server_pair, strict=True)])
    load = SessionRouter(servers=server_pair, sessions=8, doc_words=170, workers=2, max_tokens=8, pause_s=0.25)
    sticky_ticks = 10
    i_switch = sticky_ticks
    i_symptom = i_diag = None
    t_switch = 0.0
    load.start()
    try:
        for _ in range(sticky_ticks):
            live.tick()
        load.set_policy("random")
        t_switch = time.time()
        live.add_event(Event(t_switch, "config_change", "router policy sticky -> random",
                             {"object": "router-config"}))
        for _ in range(8):
            tick = live.tick()
            i = len(live.ticks) - 1
            hit, base = tick.features.get("hit_rate"), tick.features.get("hit_rate_baseline")
            if i_symptom is None and isinstance(hit, float) and isinstance(base, float) and hit <= 0.5 * base:
                i_symptom = i
            if tick.incident == "prefix-cache-drop":
                i_diag = i
                break
    finally:
        load.stop()
    ticks = live.ticks
    sticky = ticks[sticky_ticks - 1].features
    d = ticks[-1].diagnosis
    report("prefix-cache-drop", sessions=8, prompt_tokens=f"{min(load.prompt_tokens)}-{max(load.prompt_tokens)}",
           requests=load.ok, sticky_hit_rate=sticky.get("hit_rate"),
           baseline=ticks[-1].features.get("hit_rate_baseline"),
           random_hit_rate=ticks[-1].features.get("hit_rate"),
           looked_up_tokens_per_s=ticks[-1].features.get("prefix_queries_per_s"),
           switch_to_symptom_s=(ticks[i_symptom].t - t_switch) if i_symptom is not None else None,
           switch_to_diagnosis_s=(ticks[i_diag].t - t_switch) if i_diag is not None else None,
           symptom_to_diagnosis_intervals=(i_diag - i_symptom) if i_diag is not None and i_symptom is not None
           else None,
           incident=d.incident if d else None)
    print(fleet_trace(ticks, PREFIX_FEATURES))
    assert not load.errors, load.errors[:3]
    assert not load.crash, load.crash
    # Sticky: a high hit rate over enough looked-up tokens, and nothing pages.
    assert {x.incident for x in ticks[:i_switch]} <= {None, "healthy"}, fleet_trace(ticks, PREFIX_FEATURES)
    assert isinstance(sticky.get("hit_rate"), float) and sticky["hit_rate"] >= 0.3
    # Random: diagnosed within two scrape intervals of the first scrape showing the drop, naming the change.
    assert i_diag is not None and i_symptom is not None, fleet_trace(ticks, PREFIX_FEATURES)
    assert i_diag - i_symptom <= 2, fleet_trace(ticks, PREFIX_FEATURES)
    assert {x.incident for x in ticks} <= {None, "healthy", "prefix-cache-drop"}
    assert d is not None and d.root_cause is not None and "router policy sticky -> random" in d.root_cause
    signals = {e.signal for e in d.evidence}
    # the hit rate judged on enough requests (a sample size, not a tokens/s constant)
    assert {"hit_rate", "hit_rate_baseline", "window_requests", "waiting_per_pod"} <= signals


# --------------------------------------------------------------------------------------------------------------
# a partial prefix-cache drop: the router flips to random, the hit rate falls by a third (not a half)

# Every session's system message starts with the same 200-word document (265 tokens, 8 blocks) before its own
# 170-word one (231 tokens), then only the new question (history 0): 519–531 prompt tokens, all but the last
# ≈ 35 in full cached blocks. Sticky: a server keeps the shared blocks and its four sessions' own (8 + 4 × 8 of its
# 47 blocks), ≈ 0.93 of the prompt tokens hit. Random: both servers see all eight sessions, whose own documents
# no longer fit and evict each other (LRU) before they come back; the shared document, which every request
# touches, stays: ≈ 0.6 hit. With the two exchanges of history of the test above, four sessions' own parts did
# not fit even when sticky (0.69).
FLIP_SESSIONS = 8
FLIP_SHARED_WORDS = 200
FLIP_DOC_WORDS = 170
# Four clients and 16 output tokens: an ITL p99 over ≈ 300 inter-token gaps per window (≈ 20 requests × 15), not
# ≈ 120 (2 clients, 8 tokens), whose p99 is about the window's slowest gap and doubled whenever the busy host
# delayed one step.
FLIP_WORKERS = 4
FLIP_MAX_TOKENS = 16
FLIP_STICKY_TICKS = 10
FLIP_RANDOM_TICKS = 6
FLIP_BASELINE_TRIES = 3
FLIP_FEATURES = ("hit_rate", "hit_rate_baseline", "hit_rate_drop", "miss_ratio", "window_requests",
                 "prefix_queries_ratio", "arrival_rate_ratio", "symptom")


def test_router_flip_drops_hit_rate_by_a_third(server_pair: list[VllmServer]) -> None:
    for s in server_pair:
        s.wait_idle()
    targets = [Target(n, s.metrics_url) for n, s in zip("ab", server_pair, strict=True)]
    load = SessionRouter(servers=server_pair, sessions=FLIP_SESSIONS, doc_words=FLIP_DOC_WORDS,
                         shared_words=FLIP_SHARED_WORDS, history=0, workers=FLIP_WORKERS, max_tokens=FLIP_MAX_TOKENS,
                         pause_s=0.25)
    i_switch = FLIP_STICKY_TICKS
    i_symptom = i_diag = None
    t_switch = 0.0
    load.start()
    try:
        # Each session served twice on its server before the baseline: the first turns compute every document
        # (the ITL of a step with a 500-token prefill is ×3–5 a decode step's), which is a cold start, not the
        # baseline.
        wait_for(lambda: load.ok >= 2 * FLIP_SESSIONS or bool(load.errors) or load.crash is not None, 180,
                 f"{2 * FLIP_SESSIONS} sticky turns to complete")
        # A quiet baseline is a precondition (see learn_quiet_baseline).
        live, discarded = learn_quiet_baseline(lambda: FleetLive(targets), FLIP_STICKY_TICKS, FLIP_BASELINE_TRIES,
                                               "prefix-cache-drop, a third")
        load.set_policy("random")
        t_switch = time.time()
        live.add_event(Event(t_switch, "config_change", "router policy sticky -> random",
                             {"object": "router-config"}))
        # Bounded in scrapes: at least FLIP_RANDOM_TICKS after the flip (the settled random hit rate is read at
        # the last three, whose windows hold random routing only), at most 2 past the symptom without a diagnosis.
        for k in range(FLIP_RANDOM_TICKS + 3):
            tick = live.tick()
            i = len(live.ticks) - 1
            f = tick.features
            miss, drop = f.get("miss_ratio"), f.get("hit_rate_drop")
            if i_symptom is None and isinstance(miss, float) and isinstance(drop, float) and miss >= 1.4 \
                    and drop >= 0.1:
                i_symptom = i
            if i_diag is None and tick.incident == "prefix-cache-drop":
                i_diag = i
            if i_symptom is not None and i_diag is None and i - i_symptom >= 2:
                break
            if i_diag is not None and k + 1 >= FLIP_RANDOM_TICKS:
                break
    finally:
        load.stop()
    ticks = live.ticks
    sticky = [h for x in ticks[:i_switch] if isinstance(h := x.features.get("hit_rate"), float)]
    settled = [h for x in ticks[i_switch + FLIP_RANDOM_TICKS - 3:i_switch + FLIP_RANDOM_TICKS]
               if isinstance(h := x.features.get("hit_rate"), float)]
    random_hit = statistics.median(settled) if settled else None
    sticky_hit = statistics.median(sticky) if sticky else None
    at = ticks[i_diag if i_diag is not None else -1]
    d = at.diagnosis
    base, hit = at.features.get("hit_rate_baseline"), at.features.get("hit_rate")
    report("prefix-cache-drop, a third", sessions=FLIP_SESSIONS,
           prompt_tokens=f"{min(load.prompt_tokens)}-{max(load.prompt_tokens)}", requests=load.ok,
           baselines_discarded=discarded,
           sticky_hit_rates=" ".join(f"{h:.2f}" for h in sticky), sticky_hit_rate=sticky_hit,
           random_hit_rates=" ".join(f"{(x.features.get('hit_rate') or 0.0):.2f}" for x in ticks[i_switch:]),
           random_hit_rate=random_hit,
           settled_relative_drop=(1 - random_hit / sticky_hit) if random_hit is not None and sticky_hit else None,
           settled_miss_ratio=(1 - random_hit) / (1 - sticky_hit) if random_hit is not None and sticky_hit else None,
           at_diagnosis=f"hit {hit:.2f} vs baseline {base:.2f}" if isinstance(hit, float) and isinstance(base, float)
           else None,
           miss_ratio=at.features.get("miss_ratio"), hit_rate_drop=at.features.get("hit_rate_drop"),
           window_requests=at.features.get("window_requests"),
           looked_up_ratio=at.features.get("prefix_queries_ratio"),
           switch_to_symptom_scrapes=(i_symptom - i_switch + 1) if i_symptom is not None else None,
           switch_to_diagnosis_s=(ticks[i_diag].t - t_switch) if i_diag is not None else None,
           symptom_to_diagnosis_scrapes=(i_diag - i_symptom) if i_diag is not None and i_symptom is not None
           else None,
           incident=d.incident if d else None, root_cause=d.root_cause if d else None)
    notes = [_why_not(x.diagnosis, "prefix-cache-drop") for x in ticks]
    why = "\n".join(f"{line}  {note}" for line, note in zip(fleet_trace(ticks, FLIP_FEATURES).splitlines(), notes,
                                                               strict=True))
    print(why)
    assert not load.errors, load.errors[:3]
    assert not load.crash, load.crash
    assert {x.incident for x in ticks[:i_switch]} <= {None, "healthy"}, why
    # The misses make the steps that prefill them slower, and the other streams' ITL p99 red, while the window still
    # holds sticky turns (the hit rate 0.03 below its baseline at the first scrape after the flip): the symptom can
    # be red a scrape before the runbook first holds, which pages `unknown` with the forming runbook named (seen
    # once in 4 runs, with 2 clients of 8 tokens). Nothing else may page.
    early = [x for x in ticks[i_switch:] if x.incident == "unknown"]
    for x in early:
        assert x.diagnosis is not None and "forming: prefix-cache-drop" in x.diagnosis.summary, (x.diagnosis, why)
    assert len(early) <= 1 and (not early or i_diag is None or early[0].t < ticks[i_diag].t), why
    wrong = {x.incident for x in ticks} - {None, "healthy", "prefix-cache-drop", "unknown"}
    assert not wrong, (wrong, why)
    # The set-up's preconditions, each with its figures: a high sticky hit rate, a miss rate that rose ×1.4, and a
    # partial drop (more than half of the hit rate left: the old "hit rate at half its baseline" rule would not
    # have fired).
    if sticky_hit is None or sticky_hit < 0.8:
        pytest.xfail(f"sticky routing did not keep the sessions cached: hit rates {sticky}")
    if i_symptom is None:
        pytest.xfail(f"the flip did not raise the miss rate ×1.4 in {len(ticks) - i_switch} scrapes: "
                     f"{fleet_trace(ticks, FLIP_FEATURES)}")
    if random_hit is not None and random_hit <= 0.5 * sticky_hit:
        pytest.xfail(f"the hit rate fell by half or more ({random_hit:.2f} from {sticky_hit:.2f}), not the partial "
                     "drop this case is about")
    # Diagnosed within two scrapes of the symptom, naming the change.
    assert i_diag is not None and d is not None, why
    assert i_diag - i_symptom <= 2, why
    assert d.root_cause is not None and "router policy sticky -> random" in d.root_cause, d.root_cause
    assert {"hit_rate", "window_requests", "config_change_age_s"} <= {e.signal for e in d.evidence}, d.evidence
    for s in server_pair:
        s.wait_idle()


# --------------------------------------------------------------------------------------------------------------
# retry storm: one server killed while its clients (and then everyone's) retry without budget


RETRY_FEATURES = ("arrival_rate", "arrival_rate_ratio", "retry_share", "success_ratio", "pods_down", "error_share")


# As many clients homed on each server as its gateway slots: the baseline never overflows. Once b dies, twice as
# many clients share a's slots; a think time shorter than a request keeps those slots full, so the clients left
# over loop between a's overflow answer and b's refused connection, retrying at once — the storm.
PER_UPSTREAM_LIMIT = 3
THINK_S = 0.1
RETRY_BASELINE_TRIES = 3


def test_retry_storm_after_a_server_dies(server_pair: list[VllmServer]) -> None:
    a, b = server_pair
    if not b.running:  # a retried run: the first one killed b
        b.stop()
        b.start()
    for s in server_pair:
        s.wait_idle()
    gateway = Gateway(max_in_flight=PER_UPSTREAM_LIMIT).start()
    targets = [Target("a", a.metrics_url), Target("b", b.metrics_url), Target("gateway", gateway.url, kind="gateway")]
    # max_seconds leaves room for RETRY_BASELINE_TRIES baselines before the kill and the storm after it
    clients = RetryClients(servers=server_pair, gateway=gateway, per_server=PER_UPSTREAM_LIMIT, max_tokens=32,
                           think_s=THINK_S, overflow_s=0.02, timeout_s=10.0, max_attempts=20000, max_seconds=180.0)
    base_ticks = 8
    i_symptom = i_diag = None
    t_kill = 0.0
    clients.start()
    try:
        # The baseline is the load already running, not its ramp from idle (whose first windows read a fraction
        # of the rate and requests still in flight), and a quiet one (see learn_quiet_baseline).
        wait_for(lambda: clients.ok >= 4 * PER_UPSTREAM_LIMIT or clients.crash is not None, 120,
                 f"{4 * PER_UPSTREAM_LIMIT} baseline requests to complete")
        live, discarded = learn_quiet_baseline(lambda: FleetLive(targets), base_ticks, RETRY_BASELINE_TRIES,
                                               "retry-storm")
        os.killpg(b.pid, signal.SIGKILL)  # the whole server group: API server, engine core, worker
        t_kill = time.time()
        for _ in range(10):
            tick = live.tick()
            i = len(live.ticks) - 1
            ratio, share = tick.features.get("arrival_rate_ratio"), tick.features.get("retry_share")
            if i_symptom is None and isinstance(ratio, float) and (
                    ratio >= 3 or (ratio >= 1.8 and isinstance(share, float) and share >= 0.5)):
                i_symptom = i
            if tick.incident == "retry-storm":
                i_diag = i
                break
    finally:
        clients.stop()
        gateway.stop()
        b.stop()  # reap the killed group
    ticks = live.ticks
    last = ticks[-1].features
    d = ticks[-1].diagnosis
    report("retry-storm", clients=2 * PER_UPSTREAM_LIMIT, per_upstream_limit=PER_UPSTREAM_LIMIT, max_tokens=32,
           think_s=THINK_S, baselines_discarded=discarded,
           attempts=clients.attempts, ok=clients.ok, failures=clients.failures,
           baseline_rate=last.get("arrival_rate_baseline"), storm_rate=last.get("arrival_rate"),
           ratio=last.get("arrival_rate_ratio"), retry_share=last.get("retry_share"),
           success_ratio=last.get("success_ratio"),
           kill_to_symptom_s=(ticks[i_symptom].t - t_kill) if i_symptom is not None else None,
           kill_to_diagnosis_s=(ticks[i_diag].t - t_kill) if i_diag is not None else None,
           symptom_to_diagnosis_intervals=(i_diag - i_symptom) if i_diag is not None and i_symptom is not None
           else None, incident=d.incident if d else None)
    print(fleet_trace(ticks, RETRY_FEATURES))
    assert not clients.crash, clients.crash
    assert clients.attempts <= 20000
    assert {x.incident for x in ticks[:base_ticks]} <= {None, "healthy"}, fleet_trace(ticks, RETRY_FEATURES)
    assert i_diag is not None and i_symptom is not None, fleet_trace(ticks, RETRY_FEATURES)
    assert i_diag - i_symptom <= 2, fleet_trace(ticks, RETRY_FEATURES)
    # The errors can be red before the runbook has held for its persistence (2): those scrapes (at most the two the
    # bound above allows between symptom and diagnosis; seen with one and with two on the busy host) page `unknown`
    # naming retry-storm as the closest or forming runbook, and the next one names it. Nothing else may page.
    early = [x for x in ticks if x.incident == "unknown"]
    for x in early:
        assert x.diagnosis is not None and "retry-storm" in x.diagnosis.summary, x.diagnosis.summary
    assert len(early) <= 2 and all(x.t < ticks[i_diag].t for x in early), fleet_trace(ticks, RETRY_FEATURES)
    assert {x.incident for x in ticks} <= {None, "healthy", "retry-storm", "unknown"}, fleet_trace(ticks,
                                                                                                   RETRY_FEATURES)
    assert d is not None and last["pods_down"] == 1
    assert {"arrival_rate_ratio", "success_ratio", "n_restarted"} <= {e.signal for e in d.evidence}
    a.wait_idle()


# --------------------------------------------------------------------------------------------------------------
# long-context starvation: two long-prompt clients join short chat traffic on server a


LONG_WORDS = 1000  # ≈ 1310 tokens with the tiny tokenizer: 41 of the 47 usable blocks before any decoding
SHORT_PROMPT = "the water is long and"


def _document(words: int) -> str:
    rng = random.Random(0)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo"]
    return " ".join("".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(words))


STARVATION_FEATURES = ("prompt_shift", "admitted_prompt_shift", "ttft_ratio", "arrival_rate_ratio", "waiting_per_pod")


def _diagnoses(live: Live) -> list[Diagnosis | None]:
    """The diagnosis of each tick: one exists from the second scrape on, so the ticks without one come first."""
    return [None] * (len(live.ticks) - len(live.diagnoses)) + list(live.diagnoses)


def _starvation_trace(live: Live) -> str:
    """Each scrape's gauges and the features the runbook reads, and for a tick that is neither healthy nor the
    incident, the diagnosis' own account (what it found closest and what was missing): a failure says why."""
    lines = trace(live.ticks).splitlines()
    out = []
    for line, x, d in zip(lines, live.ticks, _diagnoses(live), strict=True):
        feats = " ".join(f"{k}={x.features.get(k)}" for k in STARVATION_FEATURES)
        out.append(f"{line} | {feats}")
        if x.incident not in (None, "healthy", "long-context-starvation") and d is not None:
            out.append(f"        {d.summary}")
    return "\n" + "\n".join(out)


def test_long_context_starvation(server_pair: list[VllmServer]) -> None:
    a = server_pair[0]
    a.wait_idle()
    doc = _document(LONG_WORDS)
    n = int(httpx.post(f"{a.url}/tokenize", json={"model": a.served_model_name, "prompt": doc},
                       timeout=30).json()["count"])
    # Each long request decodes up to max-model-len, so alone it grows to every block of the pool. Two long clients
    # never fit together: one runs while the other waits at the head of the queue, and takes over the (prefix-
    # cached) blocks the moment the first finishes, so a long request holds the cache at every scrape. Running
    # requests are preempted newest first, so the long one keeps its blocks and the short ones queue for theirs.
    long_tokens = PAIR_SETTINGS["max_model_len"] - n
    live = Live(a)
    shorts = Load(a, [Client(SHORT_PROMPT, 16, pause_s=0.3)] * 5, max_requests=2000).start()
    longs: Load | None = None
    i_join = 7
    i_diag: int | None = None
    t_join = 0.0
    try:
        for _ in range(i_join):
            live.tick()
        longs = Load(a, [Client(doc, long_tokens, pause_s=0.0)] * 2, max_requests=200).start()
        t_join = time.monotonic()
        for _ in range(10):
            tick = live.tick()
            if i_diag is None and tick.incident == "long-context-starvation":
                i_diag = len(live.ticks) - 1
    finally:
        shorts.stop()
        if longs is not None:
            longs.stop()
    ticks = live.ticks
    after = ticks[i_join:]
    kv_high = [x.m.get(KV, 0.0) >= 0.95 for x in after]
    pairs = sum(1 for p, q in itertools.pairwise(kv_high) if p and q)
    diagnosed = sum(1 for x in after if x.incident == "long-context-starvation")
    # The symptom, as telemetry can show it: the cache full or short requests' TTFT p99 ×3, with the prompt-length
    # shift on /metrics (vLLM observes a request's prompt length when the request finishes, so the shift shows once
    # the first long request has completed).
    i_symptom = next((i for i, x in enumerate(ticks) if i >= i_join and (x.features.get("prompt_shift") or 0) >= 3
                      and (x.m.get(KV, 0.0) >= 0.95 or (x.features.get("ttft_ratio") or 0.0) >= 3)), None)
    report("long-context-starvation", long_prompt_tokens=n, long_max_tokens=long_tokens, long_clients=2,
           short_clients=5,
           kv_at_scrapes=" ".join(f"{x.m.get(KV, -1):.2f}" for x in after),
           kv_high_scrapes=f"{sum(kv_high)}/{len(after)}", consecutive_high_pairs=pairs,
           diagnosed_scrapes=f"{diagnosed}/{len(after)}",
           join_to_diagnosis_s=(ticks[i_diag].t - t_join) if i_diag is not None else None,
           symptom_to_diagnosis_intervals=(i_diag - i_symptom) if i_diag is not None and i_symptom is not None
           else None,
           max_waiting=max(x.m.get(WAITING, 0.0) for x in after),
           max_running=max(x.m.get(RUNNING, 0.0) for x in after),
           prompt_shift=after[-1].features.get("prompt_shift"),
           arrival_ratio=after[-1].features.get("arrival_rate_ratio"),
           ttft_ratio=max((x.features.get("ttft_ratio") or 0.0) for x in after))
    # A starved short request may lose its connection on the overloaded host (seen once: a ReadError among ~100).
    assert len(shorts.errors) <= max(1, shorts.ok // 50) and (longs is None or not longs.errors), (
        shorts.ok, shorts.errors[:2], longs and longs.errors[:2])
    # Never another incident (kv-capacity's queue is not there, nor a stall). The short requests' TTFT can turn red
    # before vLLM has observed a long prompt (it does when the request finishes, or on admission in the prompt-token
    # counter a scrape later): such scrapes page `unknown` naming long-context-starvation as the closest runbook, at
    # most two in a row, while the diagnosis forms (as the retry storm's errors do before its persistence holds). It
    # forms again after a gap between two long requests in which the short ones' TTFT was back (seen once: three green
    # scrapes, then the second long request); a held diagnosis never turns into `unknown` from one scrape to the next.
    run = 0
    for prev, x, d in zip([None, *ticks], ticks, _diagnoses(live), strict=False):
        if x.incident != "unknown":
            run = 0
            continue
        run += 1
        assert d is not None and "long-context-starvation" in d.summary, _starvation_trace(live)
        assert run <= 2 and (prev is None or prev.incident != "long-context-starvation"), _starvation_trace(live)
    wrong = {x.incident for x in ticks} - {None, "healthy", "long-context-starvation", "unknown"}
    assert not wrong, (wrong, _starvation_trace(live))
    assert {x.incident for x in ticks[:i_join]} <= {None, "healthy"}, _starvation_trace(live)
    if i_symptom is None:  # the set-up did not produce the incident in this run: no diagnosis to judge
        pytest.xfail(f"no long request finished with the cache full in 10 scrapes (KV {sum(kv_high)}/{len(after)})")
    assert i_diag is not None and i_diag - i_symptom <= 2, (i_symptom, i_diag, _starvation_trace(live))
    a.wait_idle()
