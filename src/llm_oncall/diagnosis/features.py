"""Features: the named numbers runbook conditions read, derived from Snapshot history + evidence.

Baselines are relative: the fleet against its own recent past (median of the snapshots
before the recent ones, or of a baseline the caller froze before a change), and a pod against
the median of its peers.  A feature that cannot be computed is None (unknown), never 0.

The user-facing symptoms come first (`symptom_*`): TTFT and ITL p99 against the baseline and a
configured SLO, errors, throughput and availability.  They say whether anything is wrong; the
runbooks say why.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from llm_oncall.diagnosis.changes import config_changes, prefix_caching_off, unserved_arrivals
from llm_oncall.diagnosis.symptoms import COMPARABLE_LOAD, P90_MIN_REQUESTS, P99_MIN_REQUESTS, Slo, Value, mark
from llm_oncall.evidence import xid
from llm_oncall.evidence.model import Finding
from llm_oncall.signals.snapshot import PodSnapshot, Snapshot
from llm_oncall.signals.store import restarted_pod

RECENT = 3
"""Snapshots at the end of the history that are 'now' and never part of a baseline."""

ECC_XIDS = frozenset(code for code, e in xid.catalog().items() if e.category == "gpu-memory")
"""GPU-memory Xids (ECC, row remapping, contained/uncontained errors): from the Xid catalogue, the one source."""
NVLINK_XIDS = frozenset(code for code, e in xid.catalog().items() if e.category == "nvlink")


@dataclass(frozen=True)
class Features:
    t: float
    values: Mapping[str, Value]
    sources: Mapping[str, str] = field(default_factory=dict)
    pod_sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    node_sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    """Named strings for reports and scope (e.g. the bad revision, the recent config change)."""
    findings: tuple[Finding, ...] = ()

    def get(self, name: str) -> Value:
        return self.values.get(name)


# Where each feature comes from, for the evidence list (PromQL for metrics).
SOURCES: dict[str, str] = {
    "waiting": "sum(vllm:num_requests_waiting)",
    "waiting_per_pod": "avg(vllm:num_requests_waiting)",
    "kv_max": "max(vllm:kv_cache_usage_perc)",
    "kv_median": "quantile(0.5, vllm:kv_cache_usage_perc)",
    "preemptions_per_s": "sum(rate(vllm:num_preemptions_total[1m]))",
    "finished_rate": "sum(rate(vllm:request_success_total[1m]))",
    "abort_share": 'sum(rate(vllm:request_success_total{finished_reason="abort"}[1m])) / finished',
    "prefix_caching_off": 'count(vllm:cache_config_info{enable_prefix_caching="False"})',
    "prefix_caching_turned_off": 'pods whose vllm:cache_config_info enable_prefix_caching went True → False',
    "arrival_rate": "sum(rate(gateway_requests_received_total[1m])) or max(finished + Δ(running+waiting)/Δt, "
                    "sum(rate(http_requests_total{handler=~\"/v1/(chat/)?completions|…\",status!=\"4xx\"}[1m])))",
    "arrival_rate_ratio": "arrival rate now / its median over the preceding snapshots",
    "success_rate": 'sum(rate(vllm:request_success_total{finished_reason=~"stop|length"}[1m]))',
    "success_ratio": "success rate now / its baseline",
    "error_share": "5xx + error + abort share of requests",
    "hit_rate": "sum(rate(vllm:prefix_cache_hits_total[1m])) / sum(rate(vllm:prefix_cache_queries_total[1m]))",
    "hit_rate_baseline": "median prefix hit rate over the preceding snapshots",
    "prefix_queries_per_s": "sum(rate(vllm:prefix_cache_queries_total[1m])) (tokens looked up per second)",
    "prompt_p99": "histogram_quantile(0.99, sum by (le) (rate(vllm:request_prompt_tokens_bucket[1m])))",
    "prompt_mean": "rate(vllm:prompt_tokens_total) / rate(vllm:request_success_total)",
    "prompt_shift": "max(prompt p99 ratio, prompt mean ratio) vs baseline",
    "admitted_prompt_shift": "prefix-cache tokens looked up per arriving request, ratio vs baseline",
    "miss_ratio": "(1 - prefix hit rate) now / its baseline",
    "cold_pods": "pods restarted in the last 4 scrapes (their prefix caches start empty)",
    "window_requests": "requests finished in the window (the sample size of rates and quantiles)",
    "ttft_p99": "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[1m])))",
    "ttft_p90_ratio": "TTFT p90 now / its baseline (with 30–100 requests in the window it must agree with the p99)",
    "itl_p99": "histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[1m])))",
    "n_stalled": "pods with requests and a flat vllm:iteration_tokens_total_count for ≥ 2 scrapes",
    "n_restarted": "process_start_time_seconds changes / counter resets / kube restarts",
    "restarts_since_change": "pods restarted since the symptom's change point (the baseline freeze)",
    "retry_share": "sum(rate(gateway_retries_total)) / sum(rate(gateway_requests_total))",
    "bad_rev_quality": "gateway format/repetition/control-char share of the worst revision",
    "bad_rev_thumbs_down": "gateway_feedback_total{rating=\"down\"} share of the worst revision",
    "n_ecc_gpus": "DCGM ECC SBE/DBE, row remap, a GPU-memory Xid of the catalogue (48, 63, 64, 94, 95, …)",
    "probe_mismatch_top_share": "llm_oncall_probe_mismatches_total share of the top pod",
    "n_crashloop": "pods not scrapeable with restarts / CrashLoopBackOff",
    "log_cuda_graph": "vLLM logs: CUDA-graph capture error",
    "n_outliers": "pods whose TTFT/ITL p99 is ≥ 2× the median of their peers",
    "outlier_ratio": "the slowest outlier's mean inter-token latency / the median of its peers'",
}


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _ratio(a: float | None, b: float | None, floor: float = 1e-9) -> float | None:
    if a is None or b is None or b <= floor:
        return None
    return a / b


def _sum_extra(snap: Snapshot, name: str, **match: str) -> float | None:
    rows = snap.extra_rates(name)
    if not rows:
        return None
    return sum(v for labels, v in rows if all(labels.get(k) == w for k, w in match.items()))


def arrival_rate(snap: Snapshot, prev: Snapshot | None) -> float | None:
    """Requests arriving per second: the gateway's arrival count, else finished + queue growth."""
    # Status-code counters move only when a response is sent; a storm of hanging requests shows
    # on the arrival counter first.
    gw = _sum_extra(snap, "gateway_requests_received_total")
    if gw is None:
        gw = _sum_extra(snap, "gateway_requests_total")
    if gw is not None:
        return gw
    f = snap.fleet
    if f.requests_per_s is None:
        return f.http_inference_per_s if f.http_inference_per_s is not None else f.http_requests_per_s
    growth = 0.0
    if prev is not None and snap.t > prev.t:
        now_q = (f.running or 0.0) + (f.waiting or 0.0)
        before_q = (prev.fleet.running or 0.0) + (prev.fleet.waiting or 0.0)
        growth = max(0.0, (now_q - before_q) / (snap.t - prev.t))
    engine = f.requests_per_s + growth
    # The HTTP server counts every inference request when it ends, also one its client cut off before the engine
    # finished it (and one the engine never admitted): in a flood where clients give up, the engine's counters
    # fall while the HTTP server's climb. Arrivals are the larger of the two.
    if f.http_inference_per_s is not None and f.http_inference_per_s > engine:
        return f.http_inference_per_s
    return engine


def _prompt_mean(snap: Snapshot) -> float | None:
    f = snap.fleet
    return _ratio(f.prompt_tokens_per_s, f.requests_per_s, 1e-6)


def _prefix_queries(snap: Snapshot) -> float | None:
    vals = [p.prefix_queries_per_s for p in snap.pods if p.up and p.prefix_queries_per_s is not None]
    return sum(vals) if vals else None


STALL_JITTER = 0.25
"""Share of one interval that scrape timestamps may lose to jitter: live scrape times drift by hundreds of ms on a
busy host, so two flat intervals can span slightly less than 2 × interval and must still count."""


def _recently_restarted(snap: Snapshot, interval_s: float) -> set[str]:
    """Pods whose process restarted in the window, or with a restart event in the last four scrapes or since which
    they have not answered (still loading the model: a TP group takes minutes, and the sessions it held hit other
    pods' caches all that time)."""
    out = {p.name for p in snap.pods if p.restarts > 0}
    away = {p.name for p in snap.pods if not p.up}
    for e in snap.events:
        if e.kind == "restart":
            name = restarted_pod(e)
            if snap.t - e.t <= 4 * interval_s + 1e-6 or name in away:
                out.add(name)
    out.discard("")
    return out


def _stalled(p: PodSnapshot, interval: float) -> bool:
    """Requests held (or, behind gauges frozen at 0, arriving at the HTTP server unserved) while the engine-step
    heartbeat is flat for two intervals. Idle means no arrivals, not zero gauges."""
    busy = (p.running or 0) > 0 or (p.waiting or 0) > 0 or unserved_arrivals(p)
    return p.up and busy and p.seconds_since_progress is not None and \
        p.seconds_since_progress >= (2 - STALL_JITTER) * interval


def _revision_quality(snap: Snapshot) -> dict[str, tuple[float, float, float, float]]:
    """Per revision: (inspected responses/s, bad-output share, thumbs-down share, ratings in the window)."""
    out: dict[str, tuple[float, float, float, float]] = {}
    inspected = {labels.get("revision", ""): v for labels, v in snap.extra_rates("gateway_responses_inspected_total")}
    for rev, n in inspected.items():
        if n <= 0:
            continue
        bad = sum((_sum_extra(snap, name, revision=rev) or 0.0) for name in (
            "gateway_format_violations_total", "gateway_repetition_detected_total", "gateway_control_chars_total"))
        down = _sum_extra(snap, "gateway_feedback_total", revision=rev, rating="down") or 0.0
        up = _sum_extra(snap, "gateway_feedback_total", revision=rev, rating="up") or 0.0
        out[rev] = (n, min(1.0, bad / n), down / (down + up) if down + up > 0 else 0.0,
                    (down + up) * snap.window_s)
    return out


def compute(history: Sequence[Snapshot], findings: Sequence[Finding] = (), interval_s: float = 15.0,
            baseline: Sequence[Snapshot] | None = None, slo: Slo | None = None) -> Features:
    """Features at the last snapshot of `history` (oldest first).

    ``baseline``: the snapshots that are "before" — by default the history minus its last RECENT snapshots;
    a caller that detected a change passes the snapshots from before it, so that an incident that lasts
    longer than the history never becomes its own baseline.
    """
    if not history:
        raise ValueError("no snapshots")
    snap = history[-1]
    prev = history[-2] if len(history) > 1 else None
    base = list(baseline) if baseline is not None else list(history[:-RECENT]) if len(history) > RECENT else []
    f = snap.fleet
    v: dict[str, Value] = {}
    labels: dict[str, str] = {}
    pod_sets: dict[str, tuple[str, ...]] = {}
    node_sets: dict[str, tuple[str, ...]] = {}
    up = [p for p in snap.pods if p.up]
    if baseline is not None and base:
        labels["baseline_frozen_at"] = f"{base[-1].t:g}"

    v["interval_s"] = interval_s
    v["window_s"] = float(snap.window_s)
    v["history_len"] = float(len(history))
    v["pods_total"] = float(f.pods_total)
    v["pods_up"] = float(f.pods_up)
    v["pods_down"] = float(f.pods_total - f.pods_up)
    v["pods_up_baseline"] = _median(float(s.fleet.pods_up) for s in base)
    v["waiting"] = f.waiting
    v["running"] = f.running
    v["waiting_per_pod"] = f.waiting / len(up) if f.waiting is not None and up else None
    v["kv_max"] = f.kv_usage_max
    v["kv_median"] = f.kv_usage_median
    v["preemptions_per_s"] = f.preemptions_per_s

    # Rates against the fleet's own recent past.
    arrivals = arrival_rate(snap, prev)
    base_arrivals = _median(arrival_rate(s, base[i - 1] if i else None) for i, s in enumerate(base))
    v["arrival_rate"] = arrivals
    v["arrival_rate_baseline"] = base_arrivals
    v["arrival_rate_ratio"] = _ratio(arrivals, base_arrivals)
    v["finished_rate"] = f.requests_per_s
    # Requests the engine aborted: their clients gave up (timeout or cancel) before an answer came.
    v["abort_share"] = _ratio(f.aborts_per_s, f.requests_per_s, 1e-6) if f.aborts_per_s is not None else None
    v["success_rate"] = f.success_per_s
    base_success = _median(s.fleet.success_per_s for s in base)
    v["success_rate_baseline"] = base_success
    v["success_ratio"] = _ratio(f.success_per_s, base_success)
    gw_total = _sum_extra(snap, "gateway_requests_total")
    gw_5xx = None
    if gw_total is not None:
        gw_5xx = sum(val for lab, val in snap.extra_rates("gateway_requests_total")
                     if lab.get("code", "").startswith("5") or lab.get("code") == "429")
    if gw_total:
        v["error_share"] = (gw_5xx or 0.0) / gw_total
    elif f.http_requests_per_s:
        v["error_share"] = (f.http_5xx_per_s or 0.0) / f.http_requests_per_s
    elif f.requests_per_s:
        v["error_share"] = ((f.errors_per_s or 0.0) + (f.aborts_per_s or 0.0)) / f.requests_per_s
    else:
        v["error_share"] = None
    retries = _sum_extra(snap, "gateway_retries_total")
    v["retry_share"] = _ratio(retries, arrivals) if retries is not None else None

    # How many requests the window's rates and quantiles rest on: a sample size, not a load level.
    v["window_requests"] = f.requests_per_s * snap.window_s if f.requests_per_s is not None else None

    # Prefix cache: judged on the miss rate, which is what the prefill work is proportional to (94 % → 58 %
    # hit is ×7 the recomputed prompt tokens).
    v["prefix_queries_per_s"] = _prefix_queries(snap)
    v["prefix_queries_ratio"] = _ratio(v["prefix_queries_per_s"], _median(_prefix_queries(s) for s in base))
    v["hit_rate"] = f.prefix_hit_rate
    base_hit = _median(s.fleet.prefix_hit_rate for s in base)
    v["hit_rate_baseline"] = base_hit
    v["hit_rate_drop"] = base_hit - f.prefix_hit_rate if base_hit is not None and f.prefix_hit_rate is not None \
        else None
    miss = 1.0 - f.prefix_hit_rate if f.prefix_hit_rate is not None else None
    # Misses a restart explains: the restarted engines' caches are empty, and the sessions they served moved to
    # other pods' caches while they were away. (A rollout's or a scale-out's new pods are not counted: a traffic
    # shift during a routine deploy is still a prefix-cache drop, and new replicas take few sessions each.)
    cold = _recently_restarted(snap, interval_s)
    v["cold_pods"] = float(len(cold))
    pod_sets["cold"] = tuple(sorted(cold))
    base_miss = 1.0 - base_hit if base_hit is not None else None
    v["miss_rate"] = miss
    v["miss_rate_baseline"] = base_miss
    # A baseline miss rate below 1 % is read as 1 %: the ratio is about prefill work, and below that the
    # recomputed tokens are too few to matter.
    v["miss_ratio"] = _ratio(miss, max(base_miss, 0.01)) if miss is not None and base_miss is not None else None
    base_prompt_tps = _median(s.fleet.prompt_tokens_per_s for s in base)
    if miss is not None and base_miss is not None and f.prompt_tokens_per_s is not None and base_prompt_tps:
        v["prefill_work_ratio"] = _ratio(f.prompt_tokens_per_s * miss, base_prompt_tps * max(base_miss, 0.01))
    else:
        v["prefill_work_ratio"] = None

    # Prompt-length mix.
    v["prompt_p99"] = f.prompt_len_p99
    v["prompt_p99_baseline"] = _median(s.fleet.prompt_len_p99 for s in base)
    v["prompt_p99_ratio"] = _ratio(f.prompt_len_p99, v["prompt_p99_baseline"])
    v["prompt_mean"] = _prompt_mean(snap)
    v["prompt_mean_baseline"] = _median(_prompt_mean(s) for s in base)
    v["prompt_mean_ratio"] = _ratio(v["prompt_mean"], v["prompt_mean_baseline"])
    shifts = [x for x in (v["prompt_p99_ratio"], v["prompt_mean_ratio"]) if isinstance(x, float)]
    v["prompt_shift"] = max(shifts) if shifts else None
    # The same shift seen at admission: prompt tokens looked up in the prefix cache per arriving request. The
    # prompt-length histogram is observed when a request finishes, minutes late for a 100k-token prompt.
    qr, ar = v["prefix_queries_ratio"], v["arrival_rate_ratio"]
    v["admitted_prompt_shift"] = qr / ar if isinstance(qr, float) and isinstance(ar, float) and ar > 0 else None

    # Latency.
    v["ttft_p99"] = f.ttft_p99
    v["ttft_p99_baseline"] = _median(s.fleet.ttft_p99 for s in base)
    v["ttft_ratio"] = _ratio(f.ttft_p99, v["ttft_p99_baseline"])
    # A p99 over a few dozen requests is their maximum, and the ratio of two maxima swings ×3 on a healthy pod
    # at 1 req/s (so does a median read off coarse buckets): with fewer than P99_MIN_REQUESTS in the window the
    # symptom needs a quantile that rests on several requests to agree — the p90 from P90_MIN_REQUESTS on (a
    # surge that preempts a fifth of its requests moves it, a hiccup that slows one does not), else the median.
    v["ttft_p50_ratio"] = _ratio(f.ttft_p50, _median(s.fleet.ttft_p50 for s in base))
    v["ttft_p90_ratio"] = _ratio(f.ttft_p90, _median(s.fleet.ttft_p90 for s in base))
    n, p99r = v["window_requests"], v["ttft_ratio"]
    agree = None if isinstance(n, float) and n >= P99_MIN_REQUESTS else (
        v["ttft_p90_ratio"] if isinstance(n, float) and n >= P90_MIN_REQUESTS else v["ttft_p50_ratio"])
    v["ttft_symptom_ratio"] = min(p99r, agree) if isinstance(p99r, float) and isinstance(agree, float) else p99r
    v["itl_p99"] = f.itl_p99
    v["itl_p99_baseline"] = _median(s.fleet.itl_p99 for s in base)
    v["itl_ratio"] = _ratio(f.itl_p99, v["itl_p99_baseline"])
    # Inter-token latency: a CPU hiccup or one long prefill stretches the tail of a light load ×2.5 on a healthy
    # server; a real slowdown moves every token. The symptom needs the median and the p99 to agree.
    v["itl_p50_ratio"] = _ratio(f.itl_p50, _median(s.fleet.itl_p50 for s in base))
    i99, i50 = v["itl_ratio"], v["itl_p50_ratio"]
    v["itl_symptom_ratio"] = min(i99, i50) if isinstance(i99, float) and isinstance(i50, float) else i99
    # A latency baseline from a much quieter fleet (a cold start, the first minutes of traffic) says nothing
    # about latency under today's load: the symptom is then judged against the SLO only.
    base_n = _median(s.fleet.requests_per_s * s.window_s if s.fleet.requests_per_s is not None else None
                     for s in base)
    if isinstance(n, float) and (base_n is None or base_n * COMPARABLE_LOAD < n):
        v["ttft_symptom_ratio"] = v["itl_symptom_ratio"] = None
    mark(v, labels, slo or Slo())

    # Forward progress.
    stalled = tuple(p.name for p in up if _stalled(p, interval_s))
    pod_sets["stalled"] = stalled
    v["n_stalled"] = float(len(stalled))
    busy = [p for p in up if (p.running or 0) > 0 or (p.waiting or 0) > 0]
    v["n_busy"] = float(len(busy))
    groups = {p.labels.get("group") for p in snap.pods if p.name in stalled and p.labels.get("group")}
    group_pods = tuple(p.name for p in snap.pods if p.labels.get("group") in groups) if groups else stalled
    pod_sets["stalled_groups"] = group_pods
    node_sets["stalled"] = tuple(sorted({p.labels.get("node", "") for p in snap.pods
                                         if p.name in group_pods} - {""}))
    v["stalled_max_s"] = max((p.seconds_since_progress or 0.0 for p in up if p.name in stalled), default=None)
    gpu_idle = [g.util_percent for g in snap.gpus if g.node in node_sets["stalled"] and g.util_percent is not None]
    v["stalled_gpu_util"] = max(gpu_idle) if gpu_idle else None
    nvlink = [g.nvlink_crc_increase for g in snap.gpus if g.nvlink_crc_increase is not None]
    v["nvlink_errors"] = sum(x for x in nvlink) if nvlink else None

    # Restarts and pods that do not come up.
    restarted = _recently_restarted(snap, interval_s)
    v["n_restarted"] = float(len(restarted))
    # Since the change the baseline was frozen at: the trigger of a cascade stays its trigger after it came back.
    since_change = set()
    if baseline is not None and base:
        since_change = {restarted_pod(e) for e in snap.events
                        if e.kind == "restart" and e.t >= base[-1].t - interval_s} - {""}
    v["restarts_since_change"] = float(len(since_change)) if baseline is not None else None
    pod_sets["restarted"] = tuple(sorted(restarted | since_change))
    down = [p for p in snap.pods if not p.up]
    ever_restarted = {restarted_pod(e) for e in snap.events if e.kind == "restart"}
    crashloop = tuple(p.name for p in down if p.name in ever_restarted)
    pod_sets["crashloop"] = crashloop
    pod_sets["down"] = tuple(p.name for p in down)
    v["n_crashloop"] = float(len(crashloop))
    revs = {p.labels.get("revision") for p in snap.pods if p.name in crashloop} - {None, ""}
    if len(revs) == 1:
        labels["crashloop_revision"] = str(next(iter(revs)))

    # Output quality by revision (gateway inspector + thumbs).
    quality = _revision_quality(snap)
    if len(quality) >= 2:
        worst = max(quality, key=lambda r: (quality[r][1] + quality[r][2], r))
        others = [q for r, q in quality.items() if r != worst]
        labels["bad_revision"] = worst
        v["bad_rev_quality"] = quality[worst][1]
        v["bad_rev_thumbs_down"] = quality[worst][2]
        v["bad_rev_ratings"] = quality[worst][3]
        v["other_rev_quality"] = max(q[1] for q in others)
        v["other_rev_thumbs_down"] = max(q[2] for q in others)
        v["n_revisions"] = float(len(quality))
        pod_sets["bad_revision"] = tuple(p.name for p in snap.pods if p.labels.get("revision") == worst)
    else:
        v["n_revisions"] = float(len(quality))

    # Golden-prompt probe mismatches by pod.
    probes = snap.extra_rates("llm_oncall_probe_mismatches_total")
    totals = snap.extra_rates("llm_oncall_probe_requests_total")
    if totals:
        by_pod: dict[str, float] = {}
        for lab, val in probes:
            by_pod[lab.get("pod", "")] = by_pod.get(lab.get("pod", ""), 0.0) + val
        total_mm = sum(by_pod.values())
        v["probe_mismatch_rate"] = total_mm
        if total_mm > 0:
            top = max(by_pod, key=lambda k: by_pod[k])
            v["probe_mismatch_top_share"] = by_pod[top] / total_mm
            pod_sets["probe_top"] = (top,)
            revs_mm = {lab.get("revision") for lab, val in probes if val > 0}
            v["probe_mismatch_revisions"] = float(len(revs_mm))

    # GPU memory errors.
    ecc_gpus = [g for g in snap.gpus if (g.ecc_dbe_increase or 0) > 0 or (g.ecc_sbe_increase or 0) > 10
                or (g.row_remap_pending or 0) > 0 or (g.row_remap_failure or 0) > 0
                or (g.xid_last is not None and int(g.xid_last) in ECC_XIDS)]
    v["n_ecc_gpus"] = float(len(ecc_gpus))
    v["ecc_known"] = any(g.ecc_dbe_volatile is not None or g.remapped_rows_uncorrectable is not None
                         or g.xid_last is not None for g in snap.gpus) if snap.gpus else None
    node_sets["ecc"] = tuple(sorted({g.node for g in ecc_gpus}))
    pod_sets["ecc"] = tuple(sorted({g.pod for g in ecc_gpus if g.pod}))
    v["nvlink_xid"] = any(g.xid_last is not None and int(g.xid_last) in NVLINK_XIDS for g in snap.gpus)

    # Config changes shortly before now: announced (events) or read off the engines' `*_info` metrics.
    said = [(e.t, e.detail) for e in snap.events if e.kind == "config_change" and 0 <= snap.t - e.t <= 900]
    seen = config_changes(history)
    changes = sorted(said + [(c.t, c.detail) for c in seen])
    v["config_change_recent"] = bool(changes)
    if changes:
        labels["config_change"] = f"{changes[-1][1]} ({snap.t - changes[-1][0]:.0f}s before this diagnosis)"
        v["config_change_age_s"] = snap.t - changes[-1][0]
    v["prefix_caching_off"] = float(prefix_caching_off(snap.pods))
    v["prefix_caching_turned_off"] = float(len({c.pod for c in seen if c.turned_off("enable_prefix_caching")}))
    rollouts = [e for e in snap.events if e.kind in ("rollout", "deploy") and 0 <= snap.t - e.t <= 1800]
    v["rollout_recent"] = bool(rollouts)
    if rollouts:
        labels["rollout"] = rollouts[-1].detail

    # Pod vs the median of its peers (needs ≥ 3 pods to have peers).  Means, not p99s: a
    # 30-second p99 of one pod rests on a handful of requests and flaps.  Inter-token latency, not
    # TTFT: a slow GPU slows every step, while one pod's TTFT also moves with the prompts it drew.
    outliers: set[str] = set()
    outlier_ratio: float | None = None
    if len(up) >= 3:
        for key in ("itl",):
            means = {p.name: m for p in up if key in p.histograms and p.histograms[key].count >= 5
                     and (m := p.histograms[key].mean) is not None}
            if len(means) < 3:
                continue
            for name, val in means.items():
                peers = statistics.median(x for n, x in means.items() if n != name)
                if peers > 0 and val >= 2.0 * peers and val - peers >= 0.01:
                    outliers.add(name)
                    outlier_ratio = max(outlier_ratio or 0.0, val / peers)
    pod_sets["outliers"] = tuple(sorted(outliers))
    v["outlier_ratio"] = outlier_ratio
    v["n_outliers"] = float(len(outliers))
    v["outlier_share"] = len(outliers) / len(up) if up else None

    # Log and node evidence.
    for f_ in findings:
        if f_.benign or f_.incident_hint is None:
            continue
        key = "log_" + f_.incident_hint.replace("-", "_")
        v[key] = max(float(v.get(key) or 0.0), f_.confidence)
    for kind in ("cuda_graph_crash", "engine_hang", "gpu_ecc", "kv_capacity"):
        v.setdefault("log_" + kind, 0.0 if findings else None)
    v["log_peer_died"] = any(fd.kind == "peer_process_died" for fd in findings) if findings else None

    return Features(t=snap.t, values=v, sources=SOURCES, pod_sets=pod_sets, node_sets=node_sets,
                    labels=labels, findings=tuple(findings))


def known_feature_names() -> set[str]:
    """Names runbooks may use (for `runbooks lint`)."""
    from llm_oncall.signals.snapshot import FleetSnapshot

    empty = Snapshot(t=0.0, window_s=1.0, pods=(), fleet=FleetSnapshot(0, 0))
    names = set(compute([empty]).values)
    names |= {"log_" + i.replace("-", "_") for i in (
        "kv-capacity", "engine-hang", "prefix-cache-drop", "retry-storm", "bad-model-rollout", "gpu-ecc",
        "cuda-graph-crash", "long-context-starvation", "pod-outlier")}
    names |= {"bad_rev_quality", "bad_rev_thumbs_down", "bad_rev_ratings", "other_rev_quality", "other_rev_thumbs_down",
              "probe_mismatch_rate", "probe_mismatch_top_share", "probe_mismatch_revisions",
              "config_change_age_s", "log_peer_died"}
    return names
