"""Value types of the simulator's public interface."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_oncall.incident_ids import FAULTS
from llm_oncall.sim.autoscaler import HpaConfig
from llm_oncall.sim.clients import DEFAULT_CLIENTS, ClientSpec
from llm_oncall.sim.engine import EngineConfig, StepModel


@dataclass(frozen=True)
class FaultSpec:
    """`at` is when the symptom starts (virtual seconds); unset params are drawn from the fleet's seed."""

    kind: str
    at: float = 300.0
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ValueError(f"unknown fault {self.kind!r}; expected one of {FAULTS}")


@dataclass(frozen=True)
class GroundTruth:
    incident: str
    onset: float | None
    pods: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    revision: str | None = None


@dataclass(frozen=True)
class Spike:
    at: float
    duration_s: float
    factor: float


@dataclass(frozen=True)
class FleetConfig:
    pods: int = 8
    tp: int = 1
    # pods per tensor-/data-parallel group sharing collectives (LeaderWorkerSet-like); 1 = each pod alone
    group_size: int = 1
    gpus_per_node: int = 8
    namespace: str = "llm"
    deployment: str = "vllm-llama-8b"
    model_name: str = "meta-llama/Llama-3.1-8B-Instruct"
    vllm_version: str = "0.32.0"
    enforce_eager: bool = False
    metrics_flavor: str = "v1"  # "v1" = vLLM 0.32 page, "v0" = vLLM 0.6 names
    rate_per_pod: float = 6.0  # req/s per initial replica at diurnal factor 1
    diurnal_amplitude: float = 0.0  # 0.3 = ±30 % around the mean
    diurnal_period_s: float = 86_400.0
    diurnal_phase_s: float = 0.0
    spikes: tuple[Spike, ...] = ()
    clients: tuple[ClientSpec, ...] = DEFAULT_CLIENTS
    system_prompt_tokens: int = 48
    router: str = "sticky"
    long_prompt_threshold: int = 16_384
    long_pool_pods: int = 0
    rate_limit_rps: float | None = None
    max_tokens_cap: int | None = None
    hpa: HpaConfig = field(default_factory=HpaConfig)
    dcgm_custom_csv: bool = False
    engine: EngineConfig = field(default_factory=EngineConfig)
    step: StepModel = field(default_factory=StepModel)
    model_load_s: float = 90.0
    """A new or restarted pod: scheduled, image present, weights read and loaded (Llama-3.1-8B bf16, ≈16 GB), KV
    cache profiled and CUDA graphs captured before it is Ready and takes traffic: ≈ 90 s. Each start draws
    ×0.9–1.2 of it."""
    tp_load_factor: float = 0.25
    """A tensor-parallel group loads longer: each extra rank adds this share (NCCL init across the ranks, every rank
    capturing its graphs; the group is Ready when its slowest rank is): TP 2 ≈ 112 s, TP 4 ≈ 158 s."""
    # the API server holds queued requests in host memory; past this queue length the container is OOM-killed
    oom_queue_limit: int | None = None
    endpoint_lag_s: float = 10.0  # readiness probe period x failure threshold
    routine_deploy_at: float | None = None
    gateway_metrics: bool = True
    """False: no gateway page with request counters (a plain Service in front of vLLM); arrivals are then read
    from the engines and their HTTP servers."""
    abort_on_disconnect: bool = False
    """True: as vLLM does, a request whose client gave up ends at the pod's HTTP server (`http_requests_total`,
    status 2xx: the handler was cancelled) and, still queued, is aborted by the engine (finished_reason=abort).
    A frozen engine aborts nothing. False: the engine does the work anyway (the first suite's model)."""
    engine_core_gauges: bool = False
    """True: as vLLM V1, the running/waiting/KV gauges come from the engine core, so a frozen engine's page keeps
    the values it had at the freeze (0 when it froze idle) while new requests pile up unseen."""
    tick_s: float = 0.1
    epoch: float = 1_767_225_600.0  # virtual t=0 as unix time (2026-01-01T00:00:00Z)
    log_interval_s: float = 10.0

    @property
    def load_s(self) -> float:
        """Model load of one pod of this fleet (its tensor-parallel degree included)."""
        return self.model_load_s * (1.0 + self.tp_load_factor * (self.tp - 1))
