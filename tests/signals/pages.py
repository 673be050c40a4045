"""/metrics pages of several engine versions, rendered with prometheus_client.

Names, labels, types and buckets follow the metric reference (vLLM V0 0.6, V1 0.8, 0.10, 0.32;
SGLang 0.5); dcgm-exporter pages are written the way its Go renderer writes them.  Each
`Engine` is one server process: a restart is a new `Engine` (counters start from zero and
the process start time moves).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.openmetrics import exposition as om

from llm_oncall.signals.series import Scrape, TargetSeries
from llm_oncall.signals.source import Batch, Observation, Target, parse_for
from llm_oncall.signals.store import Store

TTFT_OLD = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TTFT_NEW = (*TTFT_OLD, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_OLD = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
ITL_NEW = (*ITL_OLD, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
REQ_064 = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
REQ_NEW = (*REQ_064, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
ITER_V0 = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8096)
ITER_NEW = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
SGL_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGL_ITL = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
           0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
SGL_E2E = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)

DIALECTS = ("vllm-0.6", "vllm-0.8", "vllm-0.10", "vllm-0.32", "sglang-0.5")
FINISH_REASONS = {
    "vllm-0.6": ("stop", "length", "abort"),
    "vllm-0.8": ("stop", "length", "abort"),
    "vllm-0.10": ("stop", "length", "abort"),
    "vllm-0.32": ("stop", "length", "abort", "error", "repetition"),
}


def request_tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 series up to max_model_len."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return tuple(out)
            out.append(float(value))
        exponent += 1


_CREATED = re.compile(r"^(?:# (?:HELP|TYPE) )?[A-Za-z_:][A-Za-z0-9_:]*_created[ {]")


def strip_created(text: str) -> str:
    """V0 disables `_created` series."""
    return "".join(line for line in text.splitlines(keepends=True) if not _CREATED.match(line))


class Engine:
    """One engine process of the given dialect; mutate it, then `render()` a page."""

    def __init__(self, dialect: str = "vllm-0.32", model: str = "m", start_time: float = 1.7e9,
                 max_model_len: int = 4096) -> None:
        if dialect not in DIALECTS:
            raise ValueError(dialect)
        self.dialect = dialect
        self.model = model
        self.registry = CollectorRegistry()
        r = self.registry
        self.sglang = dialect.startswith("sglang")
        self.v0 = dialect == "vllm-0.6"
        Gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
              registry=r).set(start_time)
        if self.sglang:
            self.labels: dict[str, str] = {"model_name": model, "engine_type": "unified", "tp_rank": "0",
                                           "pp_rank": "0", "moe_ep_rank": "0"}
            self.req_labels = {"model_name": model, "engine_type": "unified"}
            self._build_sglang()
        else:
            self.labels = {"model_name": model} if self.v0 else {"model_name": model, "engine": "0"}
            self.req_labels = self.labels
            self._build_vllm(max_model_len)
        self._touch()

    def _touch(self) -> None:
        """Engines pre-create their series, so every family shows a zero from the first scrape."""
        for gauges in (self.running, self.waiting, self.kv, self.hit_rate_gauge):
            for g in gauges:
                g.labels(**self.labels)
        for counters in (self.preemptions, self.hits, self.queries, self.prompt, self.generation):
            for c in counters:
                c.labels(**self.labels)
        for hists in self.hists.values():
            for h in hists:
                h.labels(**self.req_labels)
        if self.sglang:
            self.cached.labels(**self.labels, cache_source="device")
            self.requests.labels(**self.req_labels)
            self.aborted.labels(**self.req_labels)

    # -- families -------------------------------------------------------------------------
    def _g(self, name: str, extra: Sequence[str] = ()) -> Gauge:
        return Gauge(name, name, [*self.labels, *extra], registry=self.registry)

    def _c(self, name: str, extra: Sequence[str] = (), req: bool = False) -> Counter:
        labels = self.req_labels if req else self.labels
        return Counter(name, name, [*labels, *extra], registry=self.registry)

    def _h(self, name: str, buckets: Sequence[float], req: bool = True) -> Histogram:
        labels = self.req_labels if req else self.labels
        return Histogram(name, name, list(labels), buckets=list(buckets), registry=self.registry)

    def _build_vllm(self, max_model_len: int) -> None:
        d = self.dialect
        self.running = [self._g("vllm:num_requests_running")]
        self.waiting = [self._g("vllm:num_requests_waiting")]
        kv_names = {"vllm-0.6": ["vllm:gpu_cache_usage_perc"], "vllm-0.8": ["vllm:gpu_cache_usage_perc"],
                    "vllm-0.10": ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
                    "vllm-0.32": ["vllm:kv_cache_usage_perc"]}[d]
        self.kv = [self._g(n) for n in kv_names]
        self.hit_rate_gauge = [self._g("vllm:gpu_prefix_cache_hit_rate")] if self.v0 else []
        prefix = {"vllm-0.6": [], "vllm-0.8": ["vllm:gpu_prefix_cache"],
                  "vllm-0.10": ["vllm:prefix_cache", "vllm:gpu_prefix_cache"], "vllm-0.32": ["vllm:prefix_cache"]}[d]
        self.hits = [self._c(p + "_hits") for p in prefix]
        self.queries = [self._c(p + "_queries") for p in prefix]
        self.preemptions = [self._c("vllm:num_preemptions")]
        self.success = self._c("vllm:request_success", ["finished_reason"])
        for reason in FINISH_REASONS[d]:
            self.success.labels(**self.labels, finished_reason=reason)  # pre-created at 0
        self.prompt = [self._c("vllm:prompt_tokens")]
        self.generation = [self._c("vllm:generation_tokens")]
        old = self.v0
        ttft = TTFT_OLD if old else TTFT_NEW
        itl = ITL_OLD if old else ITL_NEW
        req = REQ_064 if old else REQ_NEW
        itl_names = {"vllm-0.6": ["vllm:time_per_output_token_seconds"],
                     "vllm-0.8": ["vllm:time_per_output_token_seconds"],
                     "vllm-0.10": ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"],
                     "vllm-0.32": ["vllm:inter_token_latency_seconds"]}[d]
        queue_names = ["vllm:request_queue_time_seconds", "vllm:time_in_queue_requests"] if old else [
            "vllm:request_queue_time_seconds"]
        self.hists: dict[str, list[Histogram]] = {
            "ttft": [self._h("vllm:time_to_first_token_seconds", ttft)],
            "itl": [self._h(n, itl) for n in itl_names],
            "e2e": [self._h("vllm:e2e_request_latency_seconds", req)],
            "queue": [self._h(n, req) for n in queue_names],
            "prompt_len": [self._h("vllm:request_prompt_tokens", request_tokens_buckets(max_model_len))],
            "steps": [self._h("vllm:iteration_tokens_total", ITER_V0 if old else ITER_NEW)],
        }
        if not old:
            info = Gauge("vllm:cache_config_info", "cache config",
                         ["block_size", "cache_dtype", "enable_prefix_caching", "engine", "num_gpu_blocks"],
                         registry=self.registry)
            info.labels(block_size="16", cache_dtype="auto", enable_prefix_caching="True", engine="0",
                        num_gpu_blocks="1000").set(1)

    def _build_sglang(self) -> None:
        self.running = [self._g("sglang:num_running_reqs")]
        self.waiting = [self._g("sglang:num_queue_reqs")]
        self.kv = [self._g("sglang:token_usage")]
        self.hit_rate_gauge = [self._g("sglang:cache_hit_rate")]
        self.cached = self._c("sglang:cached_tokens", ["cache_source"])
        self.hits = []
        self.queries = []
        self.preemptions = []
        self.requests = self._c("sglang:num_requests", req=True)
        self.aborted = self._c("sglang:num_aborted_requests", req=True)
        self.prompt = [self._c("sglang:prompt_tokens")]
        self.generation = [self._c("sglang:generation_tokens")]
        self.hists = {
            "ttft": [self._h("sglang:time_to_first_token_seconds", SGL_TTFT)],
            "itl": [self._h("sglang:inter_token_latency_seconds", SGL_ITL)],
            "e2e": [self._h("sglang:e2e_request_latency_seconds", SGL_E2E)],
            "queue": [self._h("sglang:queue_time_seconds", SGL_E2E)],
        }

    # -- driving --------------------------------------------------------------------------
    def set(self, running: float | None = None, waiting: float | None = None, kv: float | None = None) -> Engine:
        for value, gauges in ((running, self.running), (waiting, self.waiting), (kv, self.kv)):
            if value is not None:
                for g in gauges:
                    g.labels(**self.labels).set(value)
        return self

    def preempt(self, n: float) -> Engine:
        for c in self.preemptions:
            c.labels(**self.labels).inc(n)
        return self

    def finish(self, reason: str, n: float) -> Engine:
        if self.sglang:
            self.requests.labels(**self.req_labels).inc(n)
            if reason == "abort":
                self.aborted.labels(**self.req_labels).inc(n)
        else:
            self.success.labels(**self.labels, finished_reason=reason).inc(n)
        return self

    def tokens(self, prompt: float, generation: float) -> Engine:
        for c in self.prompt:
            c.labels(**self.labels).inc(prompt)
        for c in self.generation:
            c.labels(**self.labels).inc(generation)
        return self

    def prefix(self, hits: float, queries: float) -> Engine:
        """Prefix-cache lookups (SGLang counts hits as cached tokens; its queries are the prompt tokens)."""
        if self.sglang:
            self.cached.labels(**self.labels, cache_source="device").inc(hits)
            return self
        for c in self.hits:
            c.labels(**self.labels).inc(hits)
        for c in self.queries:
            c.labels(**self.labels).inc(queries)
        return self

    def hit_rate(self, value: float) -> Engine:
        for g in self.hit_rate_gauge:
            g.labels(**self.labels).set(value)
        return self

    def observe(self, kind: str, value: float, n: int = 1) -> Engine:
        for h in self.hists.get(kind, []):
            child = h.labels(**self.req_labels)
            for _ in range(n):
                child.observe(value)
        return self

    def step(self, n: int = 1, tokens: float = 64) -> Engine:
        return self.observe("steps", tokens, n)

    # -- rendering ------------------------------------------------------------------------
    def render(self, fmt: str = "text") -> str:
        """`text` (0.0.4), `openmetrics`, `escaped-text` (vllm_ names) or `escaped-openmetrics`."""
        if fmt == "text":
            text = generate_latest(self.registry).decode()
        elif fmt == "openmetrics":
            text = om.generate_latest(self.registry, escaping="allow-utf-8").decode()
        elif fmt == "escaped-openmetrics":
            text = om.generate_latest(self.registry, escaping="underscores").decode()
        elif fmt == "escaped-text":
            text = generate_latest(self.registry).decode().replace("vllm:", "vllm_")
        else:
            raise ValueError(fmt)
        return strip_created(text) if self.v0 else text


def router_page(servers: Mapping[str, float]) -> str:
    """production-stack router series: `vllm:` names with `server` and no `model_name`."""
    r = CollectorRegistry()
    running = Gauge("vllm:num_requests_running", "router running", ["server"], registry=r)
    waiting = Gauge("vllm:num_requests_waiting", "router waiting", ["server"], registry=r)
    usage = Gauge("vllm:gpu_cache_usage_perc", "router kv", ["server"], registry=r)
    hits = Gauge("vllm:gpu_prefix_cache_hits_total", "router copy", ["server"], registry=r)
    queries = Gauge("vllm:gpu_prefix_cache_queries_total", "router copy", ["server"], registry=r)
    for server, value in servers.items():
        running.labels(server).set(value)
        waiting.labels(server).set(value)
        usage.labels(server).set(0.0)
        hits.labels(server).set(0.0)
        queries.labels(server).set(0.0)
    return generate_latest(r).decode()


DCGM_BLANK_INT64 = "9223372036854775792"


def dcgm_page(gpus: Iterable[Mapping[str, float | str | None]], host: str = "node-1",
              host_label: str = "Hostname") -> str:
    """A dcgm-exporter page: field names as series names, counters without `_total`.

    Each GPU mapping holds field values by short key (`util`, `xid`, `sbe`, `dbe`, `remap_unc`,
    `remap_fail`, `crc`); a missing key means the field is not in the exporter's CSV.
    """
    fields = {
        "util": ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
        "xid": ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
        "sbe": ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter"),
        "dbe": ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter"),
        "remap_unc": ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"),
        "remap_fail": ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"),
        "crc": ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter"),
    }
    gpus = list(gpus)
    lines: list[str] = []
    for key, (name, kind) in fields.items():
        rows = [(i, g) for i, g in enumerate(gpus) if key in g]
        if not rows:
            continue
        lines.append(f"# HELP {name} {name}.")
        lines.append(f"# TYPE {name} {kind}")
        for i, g in rows:
            labels = (f'gpu="{i}",UUID="GPU-{i:04d}",pci_bus_id="00000000:{i:02X}:00.0",device="nvidia{i}",'
                      f'modelName="NVIDIA H100 80GB HBM3",{host_label}="{host}"')
            if g.get("pod"):
                labels += f',container="vllm",namespace="prod",pod="{g["pod"]}"'
            if key == "xid":
                code = g[key]
                labels += f',err_code="{code}",err_msg="{"No Error" if code in (0, "0") else "Uncorrectable ECC"}"'
            value = g[key]
            lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


def store_of(pages: Mapping[str, Sequence[tuple[float, str | None]]], interval: float = 15.0,
             kinds: Mapping[str, str] | None = None) -> Store:
    """A Store fed the way every source feeds it: `Observation`s of pages parsed with `parse_for`.

    A page of None is a failed scrape.
    """
    store = Store(interval_s=interval)
    batch = Batch()
    for name, timeline in pages.items():
        target = Target(name, f"http://{name}:8000/metrics", (kinds or {}).get(name, "vllm"))
        for t, text in timeline:
            if text is None:
                batch.observations.append(Observation(target, t, None, "ConnectError: connection refused"))
            else:
                batch.observations.append(Observation(target, t, parse_for(target.kind, text)))
    store.add(batch)
    return store


def series_of(name: str, timeline: Sequence[tuple[float, str]], kind: str = "vllm") -> TargetSeries:
    series = TargetSeries(name)
    for t, text in timeline:
        series.add(Scrape(t, parse_for(kind, text)))
    return series


def prom_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """Prometheus' bucketQuantile (promql/quantile.go, 2.x), transcribed as the test oracle."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    bs = sorted(buckets)
    if not bs or not math.isinf(bs[-1][0]):
        return math.nan
    # coalesce equal bounds, then make the counts monotonic
    merged: list[list[float]] = []
    for le, c in bs:
        if merged and merged[-1][0] == le:
            merged[-1][1] += c
        else:
            merged.append([le, c])
    peak = -math.inf
    for b in merged:
        peak = max(peak, b[1])
        b[1] = peak
    if len(merged) < 2:
        return math.nan
    observations = merged[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(merged) - 1) if merged[i][1] >= rank), len(merged) - 1)
    if b == len(merged) - 1:
        return merged[-2][0]
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start = 0.0
    end = merged[b][0]
    count = merged[b][1]
    if b > 0:
        start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    return start + (end - start) * (rank / count)


def cumulative(observations: Iterable[float], bounds: Sequence[float]) -> tuple[tuple[float, float], ...]:
    """Cumulative (le, count) pairs of observations, +Inf included (what a client would export)."""
    obs = list(observations)
    out = [(float(le), float(sum(1 for o in obs if o <= le))) for le in bounds]
    out.append((math.inf, float(len(obs))))
    return tuple(out)
