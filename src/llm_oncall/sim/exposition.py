"""Render an engine's state as the /metrics page vLLM writes (0.32 V1 layout, or the V0-era 0.6 names).

Plain string building: a scrape of a busy engine is ~600 lines, and drills render every pod every interval.
Label names are written in sorted order and `le` as a float string, exactly like the reference page.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_oncall.sim.engine import FINISHED_REASONS, Engine
from llm_oncall.sim.histograms import (
    HTTP_FEW_BUCKETS,
    HTTP_HIGHR_BUCKETS,
    V0_ITERATION_TOKENS_BUCKETS,
    V0_ITL_BUCKETS,
    V0_REQUEST_LATENCY_BUCKETS,
    V0_TTFT_BUCKETS,
    Histogram,
)


@dataclass(frozen=True)
class PageContext:
    model_name: str
    process_start_epoch: float
    now_epoch: float
    http_latency: Histogram
    http_latency_few: Histogram
    flavor: str = "v1"  # "v1" = vLLM 0.32 names; "v0" = vLLM 0.6 names
    cache_labels: tuple[tuple[str, str], ...] = ()
    engine_id: str = "0"


def fmt(v: float) -> str:
    """prometheus_client's float formatting (Go-style exponent for large values)."""
    if v == float("inf"):
        return "+Inf"
    s = repr(float(v))
    dot = s.find(".")
    if v > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def _le_strings(bounds: tuple[float, ...]) -> list[str]:
    return [fmt(b) for b in bounds] + ["+Inf"]


_LE_CACHE: dict[tuple[float, ...], list[str]] = {}
# "<name>_bucket{<labels>le="<le>"<labels>} " per (name, pre, post, bounds): bucket lines are built once
_BUCKET_PREFIX: dict[tuple[str, str, str, tuple[float, ...]], list[str]] = {}


def _les(bounds: tuple[float, ...]) -> list[str]:
    les = _LE_CACHE.get(bounds)
    if les is None:
        les = _le_strings(bounds)
        _LE_CACHE[bounds] = les
    return les


class _Page:
    __slots__ = ("created", "lines", "v1")

    def __init__(self, created: float, v1: bool) -> None:
        self.lines: list[str] = []
        self.created = fmt(created)
        self.v1 = v1

    def head(self, name: str, kind: str, help_: str) -> None:
        self.lines.append(f"# HELP {name} {help_}\n# TYPE {name} {kind}")

    def gauge(self, name: str, help_: str, rows: list[tuple[str, float]]) -> None:
        self.head(name, "gauge", help_)
        self.lines.extend(f"{name}{{{lab}}} {fmt(v)}" if lab else f"{name} {fmt(v)}" for lab, v in rows)

    def counter(self, base: str, help_: str, rows: list[tuple[str, float]], created: bool = True) -> None:
        self.head(f"{base}_total", "counter", help_)
        self.lines.extend(f"{base}_total{{{lab}}} {fmt(v)}" if lab else f"{base}_total {fmt(v)}"
                          for lab, v in rows)
        if self.v1 and created:
            self.head(f"{base}_created", "gauge", help_)
            self.lines.extend(f"{base}_created{{{lab}}} {self.created}" for lab, _ in rows)

    def histogram(self, name: str, help_: str, pre: str, post: str, h: Histogram) -> None:
        """`pre`/`post` are the label strings sorting before/after `le` (with their commas)."""
        self.head(name, "histogram", help_)
        lines = self.lines
        key = (name, pre, post, h.bounds)
        prefixes = _BUCKET_PREFIX.get(key)
        if prefixes is None:
            if len(_BUCKET_PREFIX) > 4096:
                _BUCKET_PREFIX.clear()
            prefixes = [f'{name}_bucket{{{pre}le="{le}"{post}}} ' for le in _les(h.bounds)]
            _BUCKET_PREFIX[key] = prefixes
        lines.extend([f"{prefix}{c}.0" for prefix, c in zip(prefixes, h.cumulative(), strict=True)])
        lab = (pre + post.lstrip(",")).rstrip(",")
        sel = f"{{{lab}}}" if lab else ""
        lines.append(f"{name}_count{sel} {h.count}.0")
        lines.append(f"{name}_sum{sel} {fmt(h.sum)}")
        if self.v1:
            self.head(f"{name}_created", "gauge", help_)
            lines.append(f"{name}_created{sel} {self.created}")


def render_engine_page(e: Engine, ctx: PageContext) -> str:
    e.flush()
    if ctx.flavor == "v0":
        return _render_v0(e, ctx)
    p = _Page(ctx.process_start_epoch + 1.5, True)
    m = ctx.model_name
    el = f'engine="{ctx.engine_id}",model_name="{m}"'
    _process_block(p, e, ctx)
    flops = 16.0e9 * (e.prompt_computed + e.generation_tokens())
    p.counter("vllm:estimated_flops_per_gpu", "Estimated number of floating point operations per GPU "
              "(for Model Flops Utilization calculations).", [(el, flops)])
    p.counter("vllm:estimated_read_bytes_per_gpu", "Estimated number of bytes read from memory per GPU "
              "(for Model Flops Utilization calculations).", [(el, 1.6e10 * e.h_iter.count)])
    p.counter("vllm:estimated_write_bytes_per_gpu", "Estimated number of bytes written to memory per GPU "
              "(for Model Flops Utilization calculations).", [(el, 131072.0 * e.prompt_computed)])
    running, waiting, kv = e.gauges()
    p.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
            [(el, float(running))])
    p.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
            [(el, float(waiting))])
    p.gauge("vllm:num_requests_waiting_by_reason", "Number of waiting requests by reason. Reason labels: "
            "'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints "
            "(LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
            [(f'{el},reason="capacity"', float(waiting)), (f'{el},reason="deferred"', 0.0)])
    p.gauge("vllm:engine_sleep_state", "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 "
            "means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep "
            "level 2.", [(f'{el},sleep_state="awake"', 1.0), (f'{el},sleep_state="weights_offloaded"', 0.0),
                         (f'{el},sleep_state="discard_all"', 0.0)])
    p.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", [(el, kv)])
    p.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
              [(el, float(e.prefix_queries))])
    p.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
              [(el, float(e.prefix_hits))])
    p.counter("vllm:external_prefix_cache_queries", "External prefix cache queries from KV connector "
              "cross-instance cache sharing, in terms of number of queried tokens.", [(el, 0.0)])
    p.counter("vllm:external_prefix_cache_hits", "External prefix cache hits from KV connector "
              "cross-instance cache sharing, in terms of number of cached tokens.", [(el, 0.0)])
    p.counter("vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items.",
              [(el, 0.0)])
    p.counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.", [(el, 0.0)])
    p.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
              [(el, float(e.preemptions))])
    p.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(el, float(e.prompt_tokens))])
    p.counter("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", [
        (f'{el},source="local_compute"', float(e.prompt_computed)),
        (f'{el},source="local_cache_hit"', float(e.prompt_cached)),
        (f'{el},source="external_kv_transfer"', 0.0)])
    p.counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
              [(el, float(e.prompt_cached))])
    p.counter("vllm:prompt_tokens_cached_by_source", "Prefix-cache hit tokens by the cache tier that supplied "
              "them: device (local HBM), host (offloaded to DRAM), disk, p2p (transferred from another vLLM "
              "instance) or external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
              "vllm:external_prefix_cache_hits.", [
                  (f'{el},source="device"', float(e.prompt_cached)), (f'{el},source="host"', 0.0),
                  (f'{el},source="p2p"', 0.0), (f'{el},source="disk"', 0.0),
                  (f'{el},source="external_unspecified"', 0.0)])
    p.counter("vllm:generation_tokens", "Number of generation tokens processed.",
              [(el, float(e.generation_tokens()))])
    p.counter("vllm:request_success", "Count of successfully processed requests.", [
        (f'engine="{ctx.engine_id}",finished_reason="{r}",model_name="{m}"', float(e.success[r]))
        for r in FINISHED_REASONS])
    p.counter("vllm:admission_rejections", "Number of admission attempts rejected by a queue limit, by reason.",
              [(f'model_name="{m}",reason="max_num_queued_reqs"', float(e.admission_rejections)),
               (f'model_name="{m}",reason="max_num_queued_tokens"', 0.0)])
    pre = f'engine="{ctx.engine_id}",'
    post = f',model_name="{m}"'
    hist = p.histogram
    hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", pre, post, e.h_prompt)
    hist("vllm:request_generation_tokens", "Number of generation tokens processed.", pre, post, e.h_gen)
    hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", pre, post, e.h_iter)
    hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation "
         "tokens.", pre, post, e.h_max_gen)
    hist("vllm:request_params_n", "Histogram of the n request parameter.", pre, post, e.h_n)
    hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", pre, post,
         e.h_max_tokens)
    hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", pre, post,
         e.h_ttft)
    hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", pre, post, e.h_itl)
    hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per "
         "request.", pre, post, e.h_tpot)
    hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", pre, post, e.h_e2e)
    hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", pre, post,
         e.h_queue)
    hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", pre,
         post, e.h_inference)
    hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", pre,
         post, e.h_prefill)
    hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", pre, post,
         e.h_decode)
    hist("vllm:request_num_preemptions", "Histogram of the number of times a request was preempted.", pre,
         post, e.h_preempt)
    hist("vllm:request_prefill_kv_computed_tokens", "Histogram of new KV tokens computed during prefill "
         "(excluding cached tokens).", pre, post, e.h_kv_computed)
    labels = dict(ctx.cache_labels)
    labels["engine"] = ctx.engine_id
    info = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    p.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", [(info, 1.0)])
    _http_block(p, e, ctx)
    return "\n".join(p.lines) + "\n"


def _process_block(p: _Page, e: Engine, ctx: PageContext) -> None:
    g = e.h_iter.count // 50
    p.counter("python_gc_objects_collected", "Objects collected during gc", [
        ('generation="0"', 14678.0 + 37 * g), ('generation="1"', 1943.0 + 3 * g), ('generation="2"', 1308.0)],
        created=False)
    p.counter("python_gc_objects_uncollectable", "Uncollectable objects found during GC",
              [(f'generation="{i}"', 0.0) for i in range(3)], created=False)
    p.counter("python_gc_collections", "Number of times this generation was collected", [
        ('generation="0"', 1578.0 + g), ('generation="1"', 144.0 + g // 10), ('generation="2"', 10.0)], created=False)
    p.gauge("python_info", "Python platform information", [
        ('implementation="CPython",major="3",minor="12",patchlevel="11",version="3.12.11"', 1.0)])
    p.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", [("", 9.3e10)])
    p.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", [("", 5.1e9)])
    p.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
            [("", ctx.process_start_epoch)])
    p.counter("process_cpu_seconds", "Total user and system CPU time spent in seconds.",
              [("", round(60.0 + 0.35 * (ctx.now_epoch - ctx.process_start_epoch) + 0.4 * e.busy_s, 2))], created=False)
    p.gauge("process_open_fds", "Number of open file descriptors.", [("", 87.0 + min(e.num_running, 200))])
    p.gauge("process_max_fds", "Maximum number of open file descriptors.", [("", 1048576.0)])


def _http_block(p: _Page, e: Engine, ctx: PageContext) -> None:
    h = 'handler="/v1/completions"'
    p.counter("http_requests", "Total number of requests by method, status and handler.", [
        (f'{h},method="POST",status="2xx"', float(e.http_2xx)),
        (f'{h},method="POST",status="5xx"', float(e.http_5xx))])
    size_help = ("Content length of incoming requests by handler. Only value of header is respected. "
                 "Otherwise ignored. No percentile calculated. ")
    resp_help = ("Content length of outgoing responses by handler. Only value of header is respected. "
                 "Otherwise ignored. No percentile calculated. ")
    done = float(e.http_2xx + e.http_5xx)
    for name, help_, total in (("http_request_size_bytes", size_help, e.http_req_bytes),
                               ("http_response_size_bytes", resp_help, e.http_resp_bytes)):
        p.head(name, "summary", help_)
        p.lines.append(f"{name}_count{{{h}}} {fmt(done)}")
        p.lines.append(f"{name}_sum{{{h}}} {fmt(float(total))}")
        if p.v1:
            p.head(f"{name}_created", "gauge", help_)
            p.lines.append(f"{name}_created{{{h}}} {p.created}")
    p.histogram("http_request_duration_highr_seconds", "Latency with many buckets but no API specific labels. "
                "Made for more accurate percentile calculations. ", "", "", ctx.http_latency)
    p.histogram("http_request_duration_seconds", "Latency with only few buckets by handler. Made to be only "
                "used if aggregation by handler is important. ", f"{h},", ',method="POST"',
                ctx.http_latency_few)


def new_http_histograms() -> tuple[Histogram, Histogram]:
    return Histogram(HTTP_HIGHR_BUCKETS), Histogram(HTTP_FEW_BUCKETS)


def _rebucket(h: Histogram, bounds: tuple[float, ...]) -> Histogram:
    """V0 used narrower layouts; fold the upper buckets into +Inf."""
    out = Histogram(bounds)
    n = len(bounds)
    out.counts = [*h.counts[:n], sum(h.counts[n:])]
    out.sum = h.sum
    out.count = h.count
    return out


def _render_v0(e: Engine, ctx: PageContext) -> str:
    p = _Page(ctx.process_start_epoch, False)
    m = f'model_name="{ctx.model_name}"'
    _process_block(p, e, ctx)
    p.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", [(",".join(
        f'{k}="{v}"' for k, v in sorted(ctx.cache_labels)), 1.0)])
    running, waiting, kv = e.gauges()
    p.gauge("vllm:num_requests_running", "Number of requests currently running on GPU.",
            [(m, float(running))])
    p.gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", [(m, 0.0)])
    p.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
            [(m, float(waiting))])
    p.gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", [(m, kv)])
    p.gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", [(m, 0.0)])
    p.gauge("vllm:cpu_prefix_cache_hit_rate", "CPU prefix cache block hit rate.", [(m, -1.0)])
    rate = e.prefix_hits / e.prefix_queries if e.prefix_queries else 0.0
    p.gauge("vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", [(m, rate)])
    p.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
              [(m, float(e.preemptions))])
    p.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(m, float(e.prompt_tokens))])
    p.counter("vllm:generation_tokens", "Number of generation tokens processed.",
              [(m, float(e.generation_tokens()))])
    hist = p.histogram
    post = f",{m}"
    hist("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", "", post,
         _rebucket(e.h_iter, V0_ITERATION_TOKENS_BUCKETS))
    hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "", post,
         _rebucket(e.h_ttft, V0_TTFT_BUCKETS))
    hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", "", post,
         _rebucket(e.h_itl, V0_ITL_BUCKETS))
    for name, help_, h in (
        ("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", e.h_e2e),
        ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", e.h_queue),
        ("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
         e.h_inference),
        ("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
         e.h_prefill),
        ("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
         e.h_decode),
    ):
        hist(name, help_, "", post, _rebucket(h, V0_REQUEST_LATENCY_BUCKETS))
    hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", "", post, e.h_prompt)
    hist("vllm:request_generation_tokens", "Number of generation tokens processed.", "", post, e.h_gen)
    hist("vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation "
         "tokens.", "", post, e.h_max_gen)
    hist("vllm:request_params_n", "Histogram of the n request parameter.", "", post, e.h_n)
    hist("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", "", post,
         e.h_max_tokens)
    p.counter("vllm:request_success", "Count of successfully processed requests.", [
        (f'finished_reason="{r}",{m}', float(e.success[r])) for r in ("stop", "length", "abort")])
    p.gauge("vllm:avg_prompt_throughput_toks_per_s", "Average prefill throughput in tokens/s.", [(m, 0.0)])
    p.gauge("vllm:avg_generation_throughput_toks_per_s", "Average generation throughput in tokens/s.",
            [(m, 0.0)])
    _http_block(p, e, ctx)
    return "\n".join(p.lines) + "\n"
