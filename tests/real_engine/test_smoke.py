"""Smoke tests of the real vLLM CPU server: metrics exposition, determinism, the hang and overload signatures."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .vllm_env import GEN, KV, PREEMPT, RUNNING, STEPS, WAITING, VllmServer, sample_sums, start_load

pytestmark = pytest.mark.real_engine

DATA_DIR = Path(__file__).parent / "data"
GOLDEN_LOADED = DATA_DIR / "vllm-cpu-loaded.prom"
LONG_PROMPT = " ".join(["the water is long and people find the way"] * 6)  # 54 tokens


def wait_for(
    server: VllmServer, pred: Callable[[dict[str, float]], bool], timeout_s: float, what: str
) -> dict[str, float]:
    deadline = time.monotonic() + timeout_s
    while True:
        m = server.scrape()
        if pred(m):
            return m
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; last scrape {_brief(m)}")
        time.sleep(0.5)  # each poll renders and parses a 150 kB page: a tight loop competes with the engine


def test_health_and_metrics_exposition(vllm_server: VllmServer) -> None:
    assert vllm_server.health_status() == 200
    text = vllm_server.metrics_text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families[RUNNING].type == "gauge"
    assert families[WAITING].type == "gauge"
    assert families[KV].type == "gauge"
    # Counters lose `_total` in the family name; their samples keep it.
    assert families["vllm:generation_tokens"].type == "counter"
    assert any(s.name == GEN for s in families["vllm:generation_tokens"].samples)
    assert families["vllm:num_preemptions"].type == "counter"
    # iteration_tokens_total is a histogram despite the name: one observation per engine step.
    hist = families["vllm:iteration_tokens_total"]
    assert hist.type == "histogram"
    names = {s.name for s in hist.samples}
    assert {"vllm:iteration_tokens_total_bucket", STEPS, "vllm:iteration_tokens_total_sum"} <= names
    labels = {k for s in families[RUNNING].samples for k in s.labels}
    assert labels == {"engine", "model_name"}
    assert {s.labels["model_name"] for s in families[RUNNING].samples} == {vllm_server.served_model_name}


def test_engine_processes(vllm_server: VllmServer) -> None:
    engine = vllm_server.engine_core_pid()
    assert engine != vllm_server.pid
    workers = vllm_server.worker_pids()
    assert len(workers) == 1 and engine not in workers
    assert vllm_server.rss_total_bytes() > 100 * 2**20


def test_completions_are_deterministic(vllm_server: VllmServer) -> None:
    vllm_server.wait_idle()
    before = vllm_server.scrape()
    a = vllm_server.complete("the water is long and", max_tokens=16)
    b = vllm_server.complete("the water is long and", max_tokens=16)
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    assert a["usage"]["completion_tokens"] == 16
    after = vllm_server.scrape()
    assert after[GEN] - before[GEN] >= 32
    assert after[STEPS] > before[STEPS]
    chat = httpx.post(
        f"{vllm_server.url}/v1/chat/completions",
        json={
            "model": vllm_server.served_model_name,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 8,
            "temperature": 0,
        },
        timeout=60,
    )
    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["role"] == "assistant"


def _brief(m: dict[str, float]) -> dict[str, float]:
    return {k.removeprefix("vllm:"): m.get(k, -1.0) for k in (RUNNING, WAITING, GEN, STEPS)}


@pytest.mark.parametrize("target", ["engine", "worker"])
def test_freeze_gives_hang_signature(vllm_server: VllmServer, target: str) -> None:
    vllm_server.wait_idle()
    base = vllm_server.scrape()
    # 6 × 800 tokens: thousands of engine steps (the 39-block pool holds one full-length request, the others wait
    # or are preempted), far longer than the few seconds to the freeze even on a fast idle host.
    max_tokens = 800
    load = start_load(vllm_server, requests=6, max_tokens=max_tokens, timeout_s=240)
    try:
        seen = wait_for(
            vllm_server,
            lambda m: m[RUNNING] > 0 and m[GEN] > base[GEN] + 20,
            timeout_s=30,
            what="requests running and tokens advancing",
        )
        with vllm_server.frozen(target):  # type: ignore[arg-type]
            done_at_freeze = len(load.results)
            time.sleep(1.0)  # let the last step's stats reach the API server
            scrapes = []
            for _ in range(3):
                scrapes.append(vllm_server.scrape())
                assert vllm_server.health_status() == 200
                time.sleep(1.0)
            brief = {"before": _brief(seen), "frozen": [_brief(m) for m in scrapes],
                     "finished_at_freeze": f"{done_at_freeze}/{load.requests}"}
            assert done_at_freeze < load.requests, brief
            assert all(m[RUNNING] > 0 for m in scrapes), brief
            assert len({m[GEN] for m in scrapes}) == 1, brief
            assert len({m[STEPS] for m in scrapes}) == 1, brief
        frozen_tokens = scrapes[-1][GEN]
        wait_for(vllm_server, lambda m: m[GEN] > frozen_tokens, timeout_s=30, what="tokens advancing after thaw")
    finally:
        vllm_server.thaw()
        results = load.join()
    assert not load.errors(), load.errors()
    assert all(r["usage"]["completion_tokens"] == max_tokens for r in results if isinstance(r, dict))
    vllm_server.wait_idle()


def test_overload_small_kv_pool_queues_and_preempts(vllm_server: VllmServer) -> None:
    vllm_server.wait_idle()
    base = vllm_server.scrape()
    load = start_load(vllm_server, requests=16, max_tokens=900, prompt=LONG_PROMPT, timeout_s=120)
    max_waiting = max_kv = max_running = 0.0
    polls = 0
    m: dict[str, float] = {}
    loaded_page: str | None = None
    best = (0.0, 0.0, 0.0)
    deadline = time.monotonic() + 120
    try:
        while len(load.results) < load.requests and time.monotonic() < deadline:
            text = vllm_server.metrics_text()
            polls += 1
            m = sample_sums(text)
            max_waiting = max(max_waiting, m[WAITING])
            max_running = max(max_running, m[RUNNING])
            max_kv = max(max_kv, m[KV])
            if m[WAITING] > 0 and m[RUNNING] > 0 and m[PREEMPT] > base[PREEMPT] and m[KV] >= 0.75:
                score = (m[WAITING], m[KV], m[PREEMPT])
                if loaded_page is None or score > best:
                    loaded_page, best = text, score
            time.sleep(0.5)
    finally:
        results = load.join()
    after = vllm_server.scrape()
    assert not load.errors(), load.errors()
    assert all(r["usage"]["completion_tokens"] == 900 for r in results if isinstance(r, dict))
    assert max_waiting > 0, f"{polls} scrapes during the load, last {_brief(m)}"
    assert max_running <= 8  # --max-num-seqs
    assert max_kv >= 0.9
    assert after[PREEMPT] > base[PREEMPT]
    assert loaded_page is not None
    if os.environ.get("LLM_ONCALL_WRITE_GOLDEN") == "1":
        DATA_DIR.mkdir(exist_ok=True)
        GOLDEN_LOADED.write_text(loaded_page)
    vllm_server.wait_idle()


def test_golden_loaded_page_parses() -> None:
    """The committed page captured under load (regenerate with LLM_ONCALL_WRITE_GOLDEN=1)."""
    m = sample_sums(GOLDEN_LOADED.read_text())
    assert m[WAITING] > 0 and m[RUNNING] > 0 and m[PREEMPT] > 0
