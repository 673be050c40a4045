"""Canonical signals and every spelling they have had on the wire.

Facts come from the metric reference (vLLM V0 0.6 … V1 0.33, SGLang 0.5, dcgm-exporter 4.x
and the DCGM 4.6 names).  A signal lists its spellings in preference order: the first one a
page actually carries wins, so a V1 page that still shows a deprecated alias (e.g.
`--show-hidden-metrics-for-version`) reads the current name.  Each spelling also matches
its underscore-escaped form (`vllm_num_requests_waiting`): that is what Prometheus stores
when a client library escapes names for a scrape that negotiated the UTF-8-less format.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


class Agg(StrEnum):
    """How series of one signal inside one target (DP engines, GPUs, models) combine."""

    SUM = "sum"
    MAX = "max"
    MEAN = "mean"


class Exporter(StrEnum):
    """Which exporter writes a signal's series (so a scrape of one keeps only its own names)."""

    VLLM = "vllm"
    DCGM = "dcgm"
    KUBE = "kube"


@dataclass(frozen=True, slots=True)
class Spelling:
    name: str
    """Family name as queried in PromQL (counters include `_total`; histograms the base)."""
    engine: str
    """Which engine/version range writes this name, for evidence text."""
    scale: float = 1.0
    """Multiply raw values by this to reach the signal's unit (e.g. DCGM 4.6 ratio → %)."""


@dataclass(frozen=True, slots=True)
class Signal:
    key: str
    kind: Kind
    unit: str
    agg: Agg
    spellings: tuple[Spelling, ...]
    exporter: Exporter = Exporter.VLLM
    description: str = ""

    def sample_names(self) -> frozenset[str]:
        """Every wire sample name this signal can appear under (escaped forms included)."""
        names: set[str] = set()
        for spelling in self.spellings:
            for base in {spelling.name, escape(spelling.name)}:
                # `_created` series are not read: restarts show as counter resets and a new
                # process start time, which every version has.
                if self.kind is Kind.HISTOGRAM:
                    names.update(f"{base}{s}" for s in ("_bucket", "_count", "_sum"))
                else:
                    names.add(base)
        return frozenset(names)


@functools.cache
def escape(name: str) -> str:
    """The legacy-escaped form Prometheus stores for a name with characters outside [a-zA-Z0-9_]."""
    # Cached: called for every catalog spelling on every page read, and the catalog's names are few.
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)


def _s(name: str, engine: str, scale: float = 1.0) -> Spelling:
    return Spelling(name, engine, scale)


_V1 = "vLLM V1"
_V0 = "vLLM V0"
_SGL = "SGLang"

SIGNALS: tuple[Signal, ...] = (
    Signal("running", Kind.GAUGE, "requests", Agg.SUM, (
        _s("vllm:num_requests_running", "vLLM V0/V1"), _s("sglang:num_running_reqs", _SGL)),
        description="requests in the execution batch"),
    Signal("waiting", Kind.GAUGE, "requests", Agg.SUM, (
        _s("vllm:num_requests_waiting", "vLLM V0/V1"), _s("sglang:num_queue_reqs", _SGL)),
        description="queued requests"),
    Signal("waiting_by_reason", Kind.GAUGE, "requests", Agg.SUM, (
        _s("vllm:num_requests_waiting_by_reason", "vLLM ≥0.20"),),
        description="queued requests split into capacity / deferred"),
    Signal("kv_usage", Kind.GAUGE, "fraction", Agg.MAX, (
        _s("vllm:kv_cache_usage_perc", "vLLM ≥0.9.2"),
        _s("vllm:gpu_cache_usage_perc", "vLLM ≤0.11 (removed 0.12)"),
        _s("sglang:token_usage", _SGL)),
        description="fraction of KV-cache blocks in use"),
    Signal("preemptions", Kind.COUNTER, "preemptions", Agg.SUM, (
        _s("vllm:num_preemptions_total", "vLLM V0 ≥0.4.3 / V1 ≥0.8"),),
        description="requests preempted for lack of KV blocks"),
    Signal("requests_finished", Kind.COUNTER, "requests", Agg.SUM, (
        _s("vllm:request_success_total", "vLLM V0/V1 (label finished_reason)"),
        _s("sglang:num_requests_total", _SGL)),
        description="finished requests; aborts and errors included"),
    Signal("sglang_aborted", Kind.COUNTER, "requests", Agg.SUM, (
        _s("sglang:num_aborted_requests_total", _SGL),)),
    Signal("prompt_tokens", Kind.COUNTER, "tokens", Agg.SUM, (
        _s("vllm:prompt_tokens_total", "vLLM"), _s("sglang:prompt_tokens_total", _SGL))),
    Signal("generation_tokens", Kind.COUNTER, "tokens", Agg.SUM, (
        _s("vllm:generation_tokens_total", "vLLM"), _s("sglang:generation_tokens_total", _SGL))),
    Signal("prefix_hits", Kind.COUNTER, "tokens", Agg.SUM, (
        _s("vllm:prefix_cache_hits_total", "vLLM ≥0.9.2"),
        _s("vllm:gpu_prefix_cache_hits_total", "vLLM V1 0.7.3–0.11"),
        _s("sglang:cached_tokens_total", _SGL))),
    Signal("prefix_queries", Kind.COUNTER, "tokens", Agg.SUM, (
        _s("vllm:prefix_cache_queries_total", "vLLM ≥0.9.2"),
        _s("vllm:gpu_prefix_cache_queries_total", "vLLM V1 0.7.3–0.11"),
        _s("sglang:prompt_tokens_total", _SGL))),
    Signal("prefix_hit_rate_gauge", Kind.GAUGE, "fraction", Agg.MEAN, (
        _s("vllm:gpu_prefix_cache_hit_rate", "vLLM V0 0.5.5–0.9.0"),
        _s("sglang:cache_hit_rate", _SGL))),
    Signal("ttft", Kind.HISTOGRAM, "seconds", Agg.SUM, (
        _s("vllm:time_to_first_token_seconds", "vLLM"),
        _s("sglang:time_to_first_token_seconds", _SGL)),
        description="time to first token, queueing included"),
    Signal("itl", Kind.HISTOGRAM, "seconds", Agg.SUM, (
        _s("vllm:inter_token_latency_seconds", "vLLM ≥0.10.2"),
        _s("vllm:time_per_output_token_seconds", "vLLM ≤0.14 (removed 0.15)"),
        _s("sglang:inter_token_latency_seconds", _SGL),
        _s("sglang:time_per_output_token_seconds", "SGLang ≤0.4.4")),
        description="gap between output tokens"),
    Signal("e2e", Kind.HISTOGRAM, "seconds", Agg.SUM, (
        _s("vllm:e2e_request_latency_seconds", "vLLM"),
        _s("sglang:e2e_request_latency_seconds", _SGL))),
    Signal("queue_time", Kind.HISTOGRAM, "seconds", Agg.SUM, (
        _s("vllm:request_queue_time_seconds", "vLLM ≥0.7.3"),
        _s("vllm:time_in_queue_requests", "vLLM V0 0.6.4–0.9.0"),
        _s("sglang:queue_time_seconds", _SGL))),
    Signal("prefill_time", Kind.HISTOGRAM, "seconds", Agg.SUM, (
        _s("vllm:request_prefill_time_seconds", "vLLM ≥0.7.3"),)),
    Signal("prompt_len", Kind.HISTOGRAM, "tokens", Agg.SUM, (
        _s("vllm:request_prompt_tokens", "vLLM"),),
        description="prompt length of finished requests"),
    Signal("generation_len", Kind.HISTOGRAM, "tokens", Agg.SUM, (
        _s("vllm:request_generation_tokens", "vLLM"),)),
    Signal("iteration_tokens", Kind.HISTOGRAM, "tokens", Agg.SUM, (
        _s("vllm:iteration_tokens_total", "vLLM ≥0.6.4 (a histogram)"),),
        description="tokens per engine step; its _count is the engine-step heartbeat"),
    Signal("process_start", Kind.GAUGE, "unix seconds", Agg.MAX, (
        _s("process_start_time_seconds", "prometheus_client"),)),
    Signal("cache_config", Kind.GAUGE, "info", Agg.MAX, (
        _s("vllm:cache_config_info", "vLLM"),)),
    Signal("http_requests", Kind.COUNTER, "requests", Agg.SUM, (
        _s("http_requests_total", "prometheus-fastapi-instrumentator"),)),
    Signal("http_inprogress", Kind.GAUGE, "requests", Agg.SUM, (
        _s("http_requests_inprogress", "prometheus-fastapi-instrumentator (should_instrument_requests_inprogress)"),)),
    # dcgm-exporter: one series per GPU; identity labels gpu/UUID/Hostname|hostname.
    Signal("gpu_util", Kind.GAUGE, "percent", Agg.MEAN, (
        _s("DCGM_FI_DEV_GPU_UTIL", "dcgm-exporter"),
        _s("DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM 4.6 names", scale=100.0),
        _s("dcgm_gpu_utilization", "dcgm-exporter 1.x")), exporter=Exporter.DCGM),
    Signal("xid_last", Kind.GAUGE, "xid code", Agg.MAX, (
        _s("DCGM_FI_DEV_XID_ERRORS", "dcgm-exporter"),
        _s("DCGM_FI_DEV_XID_ERROR", "DCGM 4.6 names"),
        _s("dcgm_xid_errors", "dcgm-exporter 1.x")), exporter=Exporter.DCGM,
        description="most recent XID code (a last-value gauge, not a count)"),
    Signal("ecc_sbe_volatile", Kind.COUNTER, "errors", Agg.SUM, (
        _s("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "dcgm-exporter (custom CSV)"),
        _s("dcgm_ecc_sbe_volatile_total", "dcgm-exporter 1.x")), exporter=Exporter.DCGM),
    Signal("ecc_dbe_volatile", Kind.COUNTER, "errors", Agg.SUM, (
        _s("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "dcgm-exporter (custom CSV)"),
        _s("dcgm_ecc_dbe_volatile_total", "dcgm-exporter 1.x")), exporter=Exporter.DCGM),
    Signal("remapped_rows_uncorrectable", Kind.COUNTER, "rows", Agg.SUM, (
        _s("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "dcgm-exporter"),
        _s("DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", "DCGM 4.6 names")), exporter=Exporter.DCGM),
    Signal("remapped_rows_correctable", Kind.COUNTER, "rows", Agg.SUM, (
        _s("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "dcgm-exporter"),
        _s("DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", "DCGM 4.6 names")), exporter=Exporter.DCGM),
    Signal("row_remap_failure", Kind.GAUGE, "bool", Agg.MAX, (
        _s("DCGM_FI_DEV_ROW_REMAP_FAILURE", "dcgm-exporter"),
        _s("DCGM_FI_DEV_ROW_REMAP_FAILED", "DCGM 4.6 names")), exporter=Exporter.DCGM),
    Signal("row_remap_pending", Kind.GAUGE, "bool", Agg.MAX, (
        _s("DCGM_FI_DEV_ROW_REMAP_PENDING", "dcgm-exporter (custom field)"),), exporter=Exporter.DCGM),
    Signal("nvlink_crc_errors", Kind.COUNTER, "errors", Agg.SUM, (
        _s("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "dcgm-exporter (custom CSV)"),
        _s("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL", "DCGM 4.6 names")), exporter=Exporter.DCGM),
    Signal("nvlink_crc_data_errors", Kind.COUNTER, "errors", Agg.SUM, (
        _s("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "dcgm-exporter (custom CSV)"),
        _s("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL", "DCGM 4.6 names")), exporter=Exporter.DCGM),
    Signal("nvlink_replay_errors", Kind.COUNTER, "errors", Agg.SUM, (
        _s("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "dcgm-exporter (custom CSV)"),
        _s("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL", "DCGM 4.6 names")), exporter=Exporter.DCGM),
    Signal("nvlink_recovery_errors", Kind.COUNTER, "errors", Agg.SUM, (
        _s("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "dcgm-exporter (custom CSV)"),
        _s("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL", "DCGM 4.6 names")), exporter=Exporter.DCGM),
    # kube-state-metrics, as a cluster's Prometheus sees it.
    Signal("container_restarts", Kind.COUNTER, "restarts", Agg.SUM, (
        _s("kube_pod_container_status_restarts_total", "kube-state-metrics"),), exporter=Exporter.KUBE),
    Signal("configmap_version", Kind.GAUGE, "resource version", Agg.MAX, (
        _s("kube_configmap_metadata_resource_version", "kube-state-metrics"),), exporter=Exporter.KUBE),
    Signal("deployment_generation", Kind.GAUGE, "generation", Agg.MAX, (
        _s("kube_deployment_metadata_generation", "kube-state-metrics"),), exporter=Exporter.KUBE),
    Signal("deployment_observed_generation", Kind.GAUGE, "generation", Agg.MAX, (
        _s("kube_deployment_status_observed_generation", "kube-state-metrics"),), exporter=Exporter.KUBE),
    Signal("pod_waiting_reason", Kind.GAUGE, "bool", Agg.MAX, (
        _s("kube_pod_container_status_waiting_reason", "kube-state-metrics"),), exporter=Exporter.KUBE),
)

BY_KEY: dict[str, Signal] = {s.key: s for s in SIGNALS}

DCGM_SENTINELS = frozenset(
    float(blank + offset)
    for blank in (0x7FFFFFFFFFFFFFF0, 0x7FFFFFF0, 140737488355328)
    for offset in range(4)  # blank, not found, not supported, not permissioned
)
"""DCGM blank / not-found / not-supported / not-permissioned values: missing, not data."""


def signal(key: str) -> Signal:
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown signal {key!r}; known: {', '.join(sorted(BY_KEY))}") from None


def wanted_names(exporter: Exporter | None = None) -> frozenset[str]:
    """Sample names the parser must keep for the given exporter (all exporters when None)."""
    names: set[str] = set()
    for sig in SIGNALS:
        if exporter is None or sig.exporter is exporter:
            names |= sig.sample_names()
    return frozenset(names)


WANTED_ALL = wanted_names()


def is_router_series(labels: tuple[tuple[str, str], ...]) -> bool:
    """production-stack router series reuse `vllm:` names but carry `server` and no `model_name`."""
    server = False
    for key, _ in labels:
        if key == "model_name":
            return False
        server = server or key == "server"
    return server
