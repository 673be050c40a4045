"""Default fleet + fault per incident id, used by `llm-oncall drill`: onset ≈ 300 s after a warm-up."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from llm_oncall.incident_ids import FAULTS
from llm_oncall.sim.autoscaler import HpaConfig
from llm_oncall.sim.config import FaultSpec, FleetConfig, Spike

ONSET_S = 300.0


def scenario(incident: str, seed: int = 0, **overrides: Any) -> tuple[FleetConfig, FaultSpec | None]:
    """`overrides` may set any FleetConfig field, plus `at` (onset) and `params` (fault parameters)."""
    if incident != "healthy" and incident not in FAULTS:
        raise ValueError(f"unknown incident {incident!r}")
    rng = random.Random(seed)  # noqa: S311 - simulation, not cryptography
    at = float(overrides.pop("at", ONSET_S + rng.uniform(-30.0, 30.0)))
    params: dict[str, Any] = dict(overrides.pop("params", {}))
    cfg = FleetConfig(pods=8, rate_per_pod=8.0, dcgm_custom_csv=True)
    if incident == "engine-hang":
        cfg = dataclasses.replace(cfg, tp=2, group_size=2)
    elif incident == "retry-storm":
        # a fleet running hot (≈ 80 % of its capacity of ≈ 12.5 req/s per pod) whose API servers OOM when queues
        # explode: one lost pod leaves the rest at ≈ 90 %, where a client that retries at once tips it over
        cfg = dataclasses.replace(cfg, rate_per_pod=10.0, oom_queue_limit=300)
    elif incident == "gpu-ecc" and params.get("variant") in ("off_bus", "repeat") and "gpus_per_node" not in overrides:
        # the node-level rungs drain a whole node: 2 GPUs per node, so one node is a quarter of the fleet (within
        # the default delete cap, 25 % of the serving pods)
        cfg = dataclasses.replace(cfg, gpus_per_node=2)
    cfg = dataclasses.replace(cfg, **overrides)
    if incident == "kv-capacity" and "hpa" not in overrides:
        cfg = dataclasses.replace(cfg, hpa=kv_capacity_hpa(cfg))
    if incident == "healthy":
        return _confounders(cfg, rng), None
    return cfg, FaultSpec(incident, at, params)


def kv_capacity_hpa(cfg: FleetConfig) -> HpaConfig:
    """The HPA the kv-capacity runbook assumes on the workload: floor at today's size, ceiling at twice it, on
    running requests per pod, with the cautious scale-up behaviour GPU pods get (they are costly and slow to
    start): load must stay high for 10 minutes (scale-up stabilization window), then one replica per 5 minutes.
    It is too slow for a doubling of traffic: the emergency fix raises its floor."""
    size = max(1, cfg.pods // max(1, cfg.group_size))
    return HpaConfig(enabled=True, min_replicas=size, max_replicas=2 * size, metric="vllm:num_requests_running",
                     target_value=40.0, scale_up_pods=1, scale_up_period_s=300.0, scale_up_stabilization_s=600.0)


def _confounders(cfg: FleetConfig, rng: random.Random) -> FleetConfig:
    """A healthy fleet is not a flat one: ramps, a routine deploy, brief spikes, autoscaling."""
    pick = rng.randrange(4)
    if pick == 0:
        return dataclasses.replace(cfg, diurnal_amplitude=0.3, diurnal_period_s=3600.0,
                                   diurnal_phase_s=rng.uniform(0, 3600))
    if pick == 1:
        return dataclasses.replace(cfg, routine_deploy_at=ONSET_S + rng.uniform(-60, 60))
    if pick == 2:
        return dataclasses.replace(cfg, spikes=(Spike(ONSET_S + rng.uniform(-60, 60), rng.uniform(10, 30), 1.5),))
    return dataclasses.replace(cfg, diurnal_amplitude=0.3, diurnal_period_s=1800.0,
                               hpa=HpaConfig(enabled=True, min_replicas=max(2, cfg.pods - 2),
                                             max_replicas=2 * cfg.pods, target_value=25.0))
