"""The Snapshot: the one input of diagnosis, whatever the telemetry source.

Values are windowed (rates from counter increases across the window), None means
unknown (target down, family absent, no traffic to compute a quantile from).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from llm_oncall.signals.catalog import BY_KEY
from llm_oncall.signals.events import Event
from llm_oncall.signals.exposition import Labels, Page
from llm_oncall.signals.gpu import GpuSnapshot, json_safe
from llm_oncall.signals.series import (
    Histogram,
    Scrape,
    TargetSeries,
    counter_increase,
    gauge,
    merge,
    resolve,
    vector,
    window_histogram,
)

_HIST_SIGNALS = ("ttft", "itl", "e2e", "queue_time", "prefill_time", "prompt_len")


@dataclass(frozen=True, slots=True)
class PodSnapshot:
    name: str
    labels: Mapping[str, str]
    up: bool
    error: str | None = None
    age_s: float | None = None
    """Seconds since the last successful scrape (staleness)."""
    model_name: str | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    preemptions_per_s: float | None = None
    requests_per_s: float | None = None
    """Finished requests per second (all finish reasons)."""
    success_per_s: float | None = None
    errors_per_s: float | None = None
    aborts_per_s: float | None = None
    http_requests_per_s: float | None = None
    http_5xx_per_s: float | None = None
    http_inference_per_s: float | None = None
    """Inference requests the HTTP server finished (completions, chat, …; not 4xx, which never reach the engine),
    counted when the response ends — a client that gives up ends it too (vLLM aborts the request)."""
    http_inprogress: float | None = None
    """Requests open at the HTTP server (only when the instrumentator exports its in-progress gauge)."""
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    prefix_hit_rate: float | None = None
    prefix_queries_per_s: float | None = None
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    ttft_p99: float | None = None
    itl_p50: float | None = None
    itl_p99: float | None = None
    e2e_p99: float | None = None
    queue_time_p99: float | None = None
    prefill_time_p99: float | None = None
    prompt_len_p50: float | None = None
    prompt_len_p99: float | None = None
    engine_steps_per_s: float | None = None
    seconds_since_progress: float | None = None
    """Seconds since the engine-step heartbeat (or, without it, the token counter) last moved."""
    restarts: int = 0
    kv_capacity_tokens: float | None = None
    cache_config: tuple[tuple[str, str], ...] = ()
    """The labels of `vllm:cache_config_info` (the engine's cache configuration), `engine` left out."""
    dialect: str | None = None
    """Which metric naming the target speaks (e.g. `vllm-v1`, `vllm-v0`, `sglang`, `escaped`)."""
    histograms: Mapping[str, Histogram] = field(default_factory=dict, repr=False, compare=False)
    prefix_counts: tuple[float, float] | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("histograms", "prefix_counts")}
        out["labels"] = dict(self.labels)
        return json_safe(out)


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    pods_total: int
    pods_up: int
    running: float | None = None
    waiting: float | None = None
    kv_usage_max: float | None = None
    kv_usage_median: float | None = None
    preemptions_per_s: float | None = None
    requests_per_s: float | None = None
    success_per_s: float | None = None
    errors_per_s: float | None = None
    aborts_per_s: float | None = None
    http_requests_per_s: float | None = None
    http_5xx_per_s: float | None = None
    http_inference_per_s: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    prefix_hit_rate: float | None = None
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    ttft_p99: float | None = None
    itl_p50: float | None = None
    itl_p99: float | None = None
    e2e_p99: float | None = None
    queue_time_p99: float | None = None
    prefill_time_p99: float | None = None
    prompt_len_p50: float | None = None
    prompt_len_p99: float | None = None
    restarts: int = 0

    def to_json(self) -> dict[str, Any]:
        return json_safe(asdict(self))


@dataclass(frozen=True, slots=True)
class Snapshot:
    t: float
    window_s: float
    pods: tuple[PodSnapshot, ...]
    fleet: FleetSnapshot
    gpus: tuple[GpuSnapshot, ...] = ()
    events: tuple[Event, ...] = ()
    extra: Mapping[str, Mapping[Labels, float]] = field(default_factory=dict)
    """Other pages (gateway, prober): counter families as per-second rates, gauges as values,
    by label set, keyed by sample name."""

    def extra_rates(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(dict(labels), v) for labels, v in self.extra.get(name, {}).items()]

    def pod(self, name: str) -> PodSnapshot | None:
        for p in self.pods:
            if p.name == name:
                return p
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "window_s": self.window_s,
            "fleet": self.fleet.to_json(),
            "pods": [p.to_json() for p in self.pods],
            "gpus": [g.to_json() for g in self.gpus],
            "events": [e.to_json() for e in self.events],
            "extra": {name: [{"labels": dict(k), "value": v} for k, v in vals.items()]
                      for name, vals in self.extra.items()},
        }


def _rate(increase: float | None, span: float) -> float | None:
    if increase is None or span <= 0:
        return None
    return increase / span


def _dialect(page: Page) -> str | None:
    running = resolve(page, BY_KEY["running"])
    if running is None:
        return None
    if running.spelling.startswith("sglang"):
        return "sglang"
    kv = resolve(page, BY_KEY["kv_usage"])
    name = "vllm ≤0.11" if kv is not None and "gpu_cache" in kv.spelling else "vllm"
    return name if ":" in running.spelling else f"{name} (escaped names)"


def _restarts(scrapes: list[Scrape]) -> int:
    """Restarts seen in the window: a new process start time or a token counter going back."""
    count = 0
    start_sig = BY_KEY["process_start"]
    gen_sig = BY_KEY["generation_tokens"]
    step_sig = BY_KEY["iteration_tokens"]
    prev: Scrape | None = None
    for s in scrapes:
        if prev is not None:
            assert s.page is not None and prev.page is not None
            a, b = gauge(prev.page, start_sig), gauge(s.page, start_sig)
            if a is not None and b is not None and b > a:
                count += 1
            else:
                ga, gb = gauge(prev.page, gen_sig), gauge(s.page, gen_sig)
                ca, cb = _heartbeat(prev.page, step_sig.key), _heartbeat(s.page, step_sig.key)
                if (ga is not None and gb is not None and gb < ga) or (
                        ca is not None and cb is not None and cb < ca):
                    count += 1
        prev = s
    return count


def _heartbeat(page: Any, key: str = "iteration_tokens") -> float | None:
    res = resolve(page, BY_KEY[key])
    if res is None:
        return None
    counts = [s.value for s in res.samples["_count"] if not math.isnan(s.value)]
    return sum(counts) if counts else None


def progress_value(scrape: Scrape) -> float | None:
    """The engine-step heartbeat, falling back to generated tokens on versions without it."""
    if scrape.page is None:
        return None
    beat = _heartbeat(scrape.page)
    if beat is not None:
        return beat
    return gauge(scrape.page, BY_KEY["generation_tokens"])


def seconds_since_progress(series: TargetSeries, end: float) -> float | None:
    """How long the heartbeat has been flat, looking back over the buffer (None: no data).

    0 means it moved between the last two scrapes; a reset counts as movement (the
    engine came back and stepped).
    """
    ok = [s for s in series.scrapes if s.page is not None and s.t <= end]
    if len(ok) < 2:
        return None
    value = progress_value(ok[-1])
    if value is None:
        return None
    flat_since = ok[-1].t
    for s in reversed(ok[:-1]):
        if progress_value(s) != value:
            break
        flat_since = s.t
    return ok[-1].t - flat_since


def pod_snapshot(series: TargetSeries, end: float, window_s: float, stale_after_s: float) -> PodSnapshot:
    latest = series.latest(end)
    latest_ok = series.latest_ok(end)
    labels = dict(series.labels)
    if latest is None or latest_ok is None or latest.page is None or end - latest_ok.t > stale_after_s:
        return PodSnapshot(
            name=series.name, labels=labels, up=False,
            error=(latest.error if latest is not None else "never scraped") or "stale",
            age_s=None if latest_ok is None else end - latest_ok.t,
            restarts=0,
        )
    page = latest.page
    scrapes = series.ok_in_window(end - window_s, end)
    span = scrapes[-1].t - scrapes[0].t if len(scrapes) >= 2 else 0.0

    def rate(key: str, match: Mapping[str, str] | None = None) -> float | None:
        return _rate(counter_increase(scrapes, BY_KEY[key], match), span)

    finished = rate("requests_finished")
    errors: float | None = None
    aborts: float | None = None
    if _has_label(page, "requests_finished", "finished_reason"):
        errors = rate("requests_finished", {"finished_reason": "error"})
        aborts = rate("requests_finished", {"finished_reason": "abort"})
    else:
        # SGLang counts finished requests without a reason label; aborts have their own
        # counter and errors are not exported (unknown, not zero).
        aborts = rate("sglang_aborted")
    success = None
    if finished is not None:
        success = finished - (errors or 0.0) - (aborts or 0.0)
    hits = counter_increase(scrapes, BY_KEY["prefix_hits"])
    queries = counter_increase(scrapes, BY_KEY["prefix_queries"])
    cache_cfg = _cache_config(page)
    prompt_increase = counter_increase(scrapes, BY_KEY["prompt_tokens"])
    if dict(cache_cfg).get("enable_prefix_caching") == "False" and prompt_increase is not None:
        # Prefix caching off: vLLM looks nothing up, so its counters stand still. Every prompt token it computes
        # is a miss — a hit rate of nothing, not missing data.
        hits, queries = 0.0, prompt_increase
    hit_rate: float | None = None
    if hits is not None and queries is not None and queries > 0:
        hit_rate = hits / queries
    elif hits is None:
        hit_rate = gauge(page, BY_KEY["prefix_hit_rate_gauge"])
    hists: dict[str, Histogram] = {}
    for key in _HIST_SIGNALS:
        h = window_histogram(scrapes, BY_KEY[key])
        if h is not None:
            hists[key] = h

    def q(key: str, quantile: float) -> float | None:
        h = hists.get(key)
        return h.quantile(quantile) if h is not None else None

    steps = counter_increase_heartbeat(scrapes)
    http = rate("http_requests")
    http_5xx = rate("http_requests", {"status": "5xx"})
    http_inference = _rate(counter_increase(scrapes, BY_KEY["http_requests"], keep=_inference_request), span)
    model = None
    running_vec = vector(page, BY_KEY["running"])
    if running_vec:
        model = dict(next(iter(running_vec))).get("model_name")
    cache_vec = vector(page, BY_KEY["cache_config"])
    kv_capacity = None
    if cache_vec:
        cfg = dict(next(iter(cache_vec)))
        try:
            kv_capacity = float(cfg.get("num_gpu_blocks", "")) * float(cfg.get("block_size", ""))
        except ValueError:
            kv_capacity = None
    return PodSnapshot(
        name=series.name,
        labels=labels,
        up=True,
        age_s=end - latest_ok.t,
        model_name=model,
        running=gauge(page, BY_KEY["running"]),
        waiting=gauge(page, BY_KEY["waiting"]),
        kv_usage=gauge(page, BY_KEY["kv_usage"]),
        preemptions_per_s=rate("preemptions"),
        requests_per_s=finished,
        success_per_s=success,
        errors_per_s=errors,
        aborts_per_s=aborts,
        http_requests_per_s=http,
        http_5xx_per_s=http_5xx,
        http_inference_per_s=http_inference,
        http_inprogress=gauge(page, BY_KEY["http_inprogress"]),
        prompt_tokens_per_s=_rate(prompt_increase, span),
        generation_tokens_per_s=rate("generation_tokens"),
        prefix_hit_rate=hit_rate,
        prefix_queries_per_s=_rate(queries, span),
        ttft_p50=q("ttft", 0.5),
        ttft_p90=q("ttft", 0.9),
        ttft_p99=q("ttft", 0.99),
        itl_p50=q("itl", 0.5),
        itl_p99=q("itl", 0.99),
        e2e_p99=q("e2e", 0.99),
        queue_time_p99=q("queue_time", 0.99),
        prefill_time_p99=q("prefill_time", 0.99),
        prompt_len_p50=q("prompt_len", 0.5),
        prompt_len_p99=q("prompt_len", 0.99),
        engine_steps_per_s=_rate(steps, span),
        seconds_since_progress=seconds_since_progress(series, end),
        restarts=_restarts(scrapes),
        kv_capacity_tokens=kv_capacity,
        cache_config=cache_cfg,
        dialect=_dialect(page),
        histograms=hists,
        prefix_counts=(hits, queries) if hits is not None and queries is not None else None,
    )


_INFERENCE_HANDLER = re.compile(
    r"^(/v1)?/(completions|chat/completions|responses|embeddings|pooling|score|rerank|classify|generate"
    r"|audio/\w+|inference/\S*)$")
"""Handlers whose requests go to the engine (not /v1/models, /tokenize, /health, /metrics …)."""


def _inference_request(labels: Labels) -> bool:
    d = dict(labels)
    handler = d.get("handler")
    return handler is not None and _INFERENCE_HANDLER.match(handler) is not None and \
        not d.get("status", "").startswith("4")


_CONFIG_NOISE = frozenset({"engine"})


def _cache_config(page: Page) -> tuple[tuple[str, str], ...]:
    vec = vector(page, BY_KEY["cache_config"])
    if not vec:
        return ()
    labels = max(vec, key=lambda lab: vec[lab])
    return tuple(sorted((k, v) for k, v in labels if k not in _CONFIG_NOISE))


def _has_label(page: Page, key: str, label: str) -> bool:
    res = resolve(page, BY_KEY[key])
    return res is not None and any(k == label for s in res.samples[""] for k, _ in s.labels)


def counter_increase_heartbeat(scrapes: list[Scrape]) -> float | None:
    """Engine steps across the window (the iteration-tokens histogram count), resets handled."""
    total = 0.0
    prev: float | None = None
    seen = False
    for s in scrapes:
        v = progress_value(s)
        if v is None:
            continue
        if prev is not None:
            total += v - prev if v >= prev else v
            seen = True
        prev = v
    return total if seen else None


def _sum(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def fleet_snapshot(pods: Iterable[PodSnapshot]) -> FleetSnapshot:
    pods = list(pods)
    up = [p for p in pods if p.up]
    kv = [p.kv_usage for p in up if p.kv_usage is not None]
    merged: dict[str, Histogram] = {}
    for key in _HIST_SIGNALS:
        m = merge(p.histograms[key] for p in up if key in p.histograms)
        if m is not None:
            merged[key] = m

    def q(key: str, quantile: float) -> float | None:
        h = merged.get(key)
        return h.quantile(quantile) if h is not None else None

    counts = [p.prefix_counts for p in up if p.prefix_counts is not None]
    hit_rate: float | None = None
    if counts and sum(c[1] for c in counts) > 0:
        hit_rate = sum(c[0] for c in counts) / sum(c[1] for c in counts)
    else:
        gauges = [p.prefix_hit_rate for p in up if p.prefix_hit_rate is not None]
        hit_rate = statistics.fmean(gauges) if gauges else None
    return FleetSnapshot(
        pods_total=len(pods),
        pods_up=len(up),
        running=_sum(p.running for p in up),
        waiting=_sum(p.waiting for p in up),
        kv_usage_max=max(kv) if kv else None,
        kv_usage_median=statistics.median(kv) if kv else None,
        preemptions_per_s=_sum(p.preemptions_per_s for p in up),
        requests_per_s=_sum(p.requests_per_s for p in up),
        success_per_s=_sum(p.success_per_s for p in up),
        errors_per_s=_sum(p.errors_per_s for p in up),
        aborts_per_s=_sum(p.aborts_per_s for p in up),
        http_requests_per_s=_sum(p.http_requests_per_s for p in up),
        http_5xx_per_s=_sum(p.http_5xx_per_s for p in up),
        http_inference_per_s=_sum(p.http_inference_per_s for p in up),
        prompt_tokens_per_s=_sum(p.prompt_tokens_per_s for p in up),
        generation_tokens_per_s=_sum(p.generation_tokens_per_s for p in up),
        prefix_hit_rate=hit_rate,
        ttft_p50=q("ttft", 0.5),
        ttft_p90=q("ttft", 0.9),
        ttft_p99=q("ttft", 0.99),
        itl_p50=q("itl", 0.5),
        itl_p99=q("itl", 0.99),
        e2e_p99=q("e2e", 0.99),
        queue_time_p99=q("queue_time", 0.99),
        prefill_time_p99=q("prefill_time", 0.99),
        prompt_len_p50=q("prompt_len", 0.5),
        prompt_len_p99=q("prompt_len", 0.99),
        restarts=sum(p.restarts for p in pods),
    )
