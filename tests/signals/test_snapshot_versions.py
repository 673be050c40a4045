"""Snapshot values from the pages of each engine version, in every wire format.

One scenario, replayed on vLLM V0 0.6, V1 0.8, V1 0.10, V1 0.32 and SGLang 0.5: a long
lifetime history before the window (slow TTFTs, many preemptions), then a known amount of
traffic inside the window.  The Snapshot must show the window, not the lifetime.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_oncall.signals.snapshot import PodSnapshot

from .pages import (
    DIALECTS,
    ITL_NEW,
    ITL_OLD,
    REQ_064,
    REQ_NEW,
    SGL_E2E,
    SGL_ITL,
    SGL_TTFT,
    TTFT_NEW,
    TTFT_OLD,
    Engine,
    cumulative,
    prom_quantile,
    request_tokens_buckets,
    router_page,
    store_of,
)

FORMATS = ("text", "openmetrics", "escaped-text", "escaped-openmetrics")
WINDOW = 30.0
REAL_PAGE = Path(__file__).resolve().parents[2] / "src/llm_oncall/data/pages/vllm-0.32.0-cpu-idle.prom"

# Per scrape interval inside the window:
FAST_TTFT, SLOW_TTFT = 98, 2
ITL_FAST, ITL_SLOW = 1000, 20
PROMPT_SHORT, PROMPT_HUGE = 30, 1


def bounds(dialect: str) -> dict[str, tuple[float, ...]]:
    if dialect.startswith("sglang"):
        return {"ttft": SGL_TTFT, "itl": SGL_ITL, "e2e": SGL_E2E, "queue": SGL_E2E}
    old = dialect == "vllm-0.6"
    req = REQ_064 if old else REQ_NEW
    return {"ttft": TTFT_OLD if old else TTFT_NEW, "itl": ITL_OLD if old else ITL_NEW, "e2e": req, "queue": req,
            "prompt_len": request_tokens_buckets(4096)}


def traffic(e: Engine) -> None:
    """One scrape interval of in-window traffic."""
    e.preempt(3)
    e.finish("stop", 20).finish("length", 10).finish("abort", 3)
    if e.dialect == "vllm-0.32":
        e.finish("error", 2)
    e.tokens(3000, 1500).prefix(300, 1000)
    e.observe("ttft", 0.05, FAST_TTFT).observe("ttft", 3.0, SLOW_TTFT)
    e.observe("itl", 0.02, ITL_FAST).observe("itl", 0.6, ITL_SLOW)
    e.observe("e2e", 2.0, 30).observe("queue", 0.1, 30)
    e.observe("prompt_len", 500, PROMPT_SHORT).observe("prompt_len", 3000, PROMPT_HUGE)
    e.step(10)


def timeline(dialect: str, fmt: str) -> list[tuple[float, str]]:
    e = Engine(dialect)
    # Lifetime history, all before the window: it must not leak into rates or quantiles.
    e.preempt(100).finish("stop", 500).tokens(1e6, 5e5).prefix(9000, 10000).hit_rate(0.9)
    e.observe("ttft", 8.0, 500).observe("itl", 2.0, 500).observe("e2e", 50.0, 500).step(1000)
    pages = [(0.0, e.render(fmt))]
    e.preempt(50).observe("ttft", 9.0, 100)
    pages.append((15.0, e.render(fmt)))
    traffic(e)
    pages.append((30.0, e.render(fmt)))
    traffic(e)
    e.set(running=7, waiting=12, kv=0.93).hit_rate(0.42)
    pages.append((45.0, e.render(fmt)))
    return pages


def window_quantile(dialect: str, kind: str, q: float) -> float:
    per_interval = {
        "ttft": [0.05] * FAST_TTFT + [3.0] * SLOW_TTFT,
        "itl": [0.02] * ITL_FAST + [0.6] * ITL_SLOW,
        "e2e": [2.0] * 30,
        "queue": [0.1] * 30,
        "prompt_len": [500.0] * PROMPT_SHORT + [3000.0] * PROMPT_HUGE,
    }[kind]
    return prom_quantile(q, cumulative(per_interval * 2, bounds(dialect)[kind]))


def pod(dialect: str, fmt: str) -> PodSnapshot:
    snap = store_of({"pod-a": timeline(dialect, fmt)}).snapshot(window_s=WINDOW)
    p = snap.pod("pod-a")
    assert p is not None
    return p


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_windowed_values_per_version_and_format(dialect: str, fmt: str) -> None:
    p = pod(dialect, fmt)
    sglang = dialect.startswith("sglang")
    approx = pytest.approx
    assert p.up and p.error is None and p.restarts == 0
    assert p.model_name == "m"
    assert (p.running, p.waiting, p.kv_usage) == (7, 12, approx(0.93))
    # rates are window increases / 30 s, never lifetime totals
    if sglang:
        assert p.preemptions_per_s is None  # SGLang has no preemption counter: unknown, not 0
    else:
        assert p.preemptions_per_s == approx(6 / WINDOW)
    errors = 4 if dialect == "vllm-0.32" else 0
    finished = 2 * (20 + 10 + 3) + errors
    assert p.requests_per_s == approx(finished / WINDOW)
    assert p.aborts_per_s == approx(6 / WINDOW)
    if sglang:
        assert p.errors_per_s is None  # SGLang exports no error count: unknown, not zero
    else:
        assert p.errors_per_s == approx(errors / WINDOW)
    assert p.success_per_s == approx((finished - 6 - errors) / WINDOW)
    assert p.prompt_tokens_per_s == approx(6000 / WINDOW)
    assert p.generation_tokens_per_s == approx(3000 / WINDOW)
    if dialect == "vllm-0.6":
        assert p.prefix_hit_rate == approx(0.42)  # V0 only has the hit-rate gauge
    elif sglang:
        assert p.prefix_hit_rate == approx(600 / 6000)  # cached tokens / prompt tokens
    else:
        assert p.prefix_hit_rate == approx(600 / 2000)  # Δhits/Δqueries, not the lifetime 0.9
    for field, kind, q in (("ttft_p50", "ttft", 0.5), ("ttft_p99", "ttft", 0.99), ("itl_p50", "itl", 0.5),
                           ("itl_p99", "itl", 0.99), ("e2e_p99", "e2e", 0.99), ("queue_time_p99", "queue", 0.99)):
        assert getattr(p, field) == approx(window_quantile(dialect, kind, q)), field
    # the lifetime history (500 TTFTs at 8 s) would put p99 near 8 s
    assert p.ttft_p99 is not None and p.ttft_p99 < 5.0
    if sglang:
        assert p.dialect == "sglang"
        assert p.prompt_len_p99 is None
    else:
        assert p.prompt_len_p50 == approx(window_quantile(dialect, "prompt_len", 0.5))
        # 2 of 62 prompts are longer than the top finite bucket (2000): p99 clamps there
        assert p.prompt_len_p99 == 2000.0
        assert p.engine_steps_per_s == approx(20 / WINDOW)
        assert p.seconds_since_progress == 0.0
        # only the old KV name marks a pre-0.12 page; 0.10 already has the current one
        expected = "vllm ≤0.11" if dialect in ("vllm-0.6", "vllm-0.8") else "vllm"
        assert p.dialect is not None and p.dialect.startswith(expected)
        assert ("escaped" in p.dialect) == fmt.startswith("escaped")


def test_hand_computed_ttft_p99() -> None:
    """The oracle agrees with arithmetic done by hand: 196 fast, 4 at 3 s in (2.5, 5.0]."""
    p = pod("vllm-0.32", "text")
    # rank 0.99 * 200 = 198; 196 observations at or below 2.5, 4 in the bucket -> 2.5 + 2.5 * 2/4
    assert p.ttft_p99 == pytest.approx(3.75)
    assert window_quantile("vllm-0.32", "ttft", 0.99) == pytest.approx(3.75)


def test_versions_agree_where_their_buckets_agree() -> None:
    """Same traffic, same snapshot: the dialect only changes names."""
    a, b = pod("vllm-0.8", "text"), pod("vllm-0.32", "escaped-openmetrics")
    for field in ("running", "waiting", "kv_usage", "preemptions_per_s", "prompt_tokens_per_s", "prefix_hit_rate",
                  "ttft_p99", "itl_p99", "e2e_p99", "prompt_len_p99"):
        assert getattr(a, field) == pytest.approx(getattr(b, field)), field


def test_current_name_wins_over_deprecated_alias() -> None:
    """0.10 shows both KV names and both prefix counters; the current ones are read."""
    e = Engine("vllm-0.10")
    e.kv[0].labels(**e.labels).set(0.25)  # vllm:kv_cache_usage_perc
    e.kv[1].labels(**e.labels).set(0.75)  # vllm:gpu_cache_usage_perc (deprecated)
    first = e.render()
    e.hits[0].labels(**e.labels).inc(10)  # vllm:prefix_cache_hits_total
    e.queries[0].labels(**e.labels).inc(100)
    e.hits[1].labels(**e.labels).inc(1)  # vllm:gpu_prefix_cache_hits_total (blocks in 0.9+, other unit)
    e.queries[1].labels(**e.labels).inc(1)
    p = store_of({"p": [(0.0, first), (15.0, e.render())]}).snapshot()
    assert p.pods[0].kv_usage == 0.25
    assert p.pods[0].prefix_hit_rate == pytest.approx(0.1)


def test_old_v1_prefix_counters_are_read() -> None:
    """V1 0.7.3–0.9.1 only has `gpu_prefix_cache_*_total`."""
    e = Engine("vllm-0.8")
    first = e.render()
    assert "vllm:prefix_cache_hits_total" not in first and "vllm:gpu_prefix_cache_hits_total" in first
    e.prefix(hits=45, queries=50)
    p = store_of({"p": [(0.0, first), (15.0, e.render())]}).snapshot().pods[0]
    assert p.prefix_hit_rate == pytest.approx(0.9)


def test_real_vllm_0_32_page() -> None:
    text = REAL_PAGE.read_text()
    p = store_of({"tiny": [(0.0, text)]}).snapshot().pods[0]
    assert p.up and p.model_name == "tiny" and p.dialect == "vllm"
    assert (p.running, p.waiting, p.kv_usage) == (0.0, 0.0, 0.0)
    # one scrape: no window, so no rates — and certainly not the lifetime 109 preemptions
    assert p.preemptions_per_s is None and p.requests_per_s is None and p.ttft_p99 is None
    assert p.kv_capacity_tokens is not None and p.kv_capacity_tokens > 0


def _bump(text: str, changes: dict[str, float]) -> str:
    """Replace the value of the sample lines that start with each given prefix."""
    out: list[str] = []
    for line in text.splitlines():
        for prefix, value in changes.items():
            if line.startswith(prefix):
                line = f"{line.rsplit(' ', 1)[0]} {value}"
        out.append(line)
    return "\n".join(out) + "\n"


def test_real_vllm_0_32_page_over_a_window() -> None:
    """The real page as the baseline, the same page with traffic 15 s later."""
    text = REAL_PAGE.read_text()
    ttft = 'vllm:time_to_first_token_seconds_bucket{engine="0",le='
    later = _bump(text, {
        "vllm:num_preemptions_total{": 109 + 30,
        'vllm:request_success_total{engine="0",finished_reason="length"': 138 + 45,
        'vllm:request_success_total{engine="0",finished_reason="abort"': 15,
        "vllm:num_requests_running{": 4,
        "vllm:num_requests_waiting{": 9,
        "vllm:kv_cache_usage_perc{": 0.97,
        # 20 new first tokens, all between 5 and 7.5 s: cumulative counts from le=7.5 up
        **{f'{ttft}"{le}"': 126 + 20 for le in ("7.5",)},
        **{f'{ttft}"{le}"': 138 + 20 for le in ("10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0",
                                                 "+Inf")},
        'vllm:time_to_first_token_seconds_count{': 158,
    })
    # buckets up to le=5.0 are unchanged; le=7.5 gained 20, so the window histogram is 20 obs in (5, 7.5]
    p = store_of({"tiny": [(0.0, text), (15.0, later)]}).snapshot().pods[0]
    assert p.preemptions_per_s == pytest.approx(30 / 15)
    assert p.requests_per_s == pytest.approx(60 / 15)
    assert p.aborts_per_s == pytest.approx(15 / 15)
    assert (p.running, p.waiting, p.kv_usage) == (4, 9, 0.97)
    assert p.ttft_p99 == pytest.approx(5.0 + 2.5 * (0.99 * 20) / 20)
    assert p.ttft_p50 == pytest.approx(6.25)


def test_router_series_are_ignored() -> None:
    """production-stack router series share names with the engine but carry `server`, no `model_name`."""
    e = Engine("vllm-0.32").set(running=3, waiting=4, kv=0.5)
    first = e.render() + router_page({"http://a:8000": 50, "http://b:8000": 70})
    e.prefix(80, 100)
    second = e.render() + router_page({"http://a:8000": 55, "http://b:8000": 90})
    p = store_of({"p": [(0.0, first), (15.0, second)]}).snapshot().pods[0]
    assert (p.running, p.waiting, p.kv_usage) == (3, 4, 0.5)
    assert p.prefix_hit_rate == pytest.approx(0.8)
    router_only = store_of({"router": [(0.0, router_page({"http://a:8000": 50}))]}).snapshot().pods[0]
    assert router_only.running is None and router_only.waiting is None and router_only.kv_usage is None


def test_v0_page_has_no_engine_label_and_no_created() -> None:
    text = Engine("vllm-0.6").render()
    assert "_created" not in text and 'engine="' not in text
    assert "vllm:time_per_output_token_seconds_bucket" in text and "vllm:inter_token_latency" not in text
    assert 'le="10.0"' in text and 'le="20.0"' not in text.split("vllm:time_to_first_token_seconds_count")[0]
    # ITL comes from the old TPOT name with the pre-0.8.4 buckets
    assert pod("vllm-0.6", "text").itl_p99 == pytest.approx(window_quantile("vllm-0.6", "itl", 0.99))
