"""`drill INCIDENT --what-if FIX`: the same seeded incident twice — as it is, and with one of its runbook's long-term
fixes in place beforehand — both worked by the on-call loop (auto mode) over the same window, impact side by side.

A fix is a change to the simulated fleet's configuration, made before the fleet starts, the way the fix would be
deployed before the next incident. The impact of each side is read from that run's own telemetry record (the same
rows a postmortem reads): scrapes with a user-facing symptom red after the onset, the requests they carried, the
failed ones, the pages, and the time to recovery.
"""

from __future__ import annotations

import math
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llm_oncall.drills.act import ActResult, run_act
from llm_oncall.drills.runner import INTERVAL_S
from llm_oncall.postmortem.impact import violated
from llm_oncall.postmortem.telemetry import read
from llm_oncall.sim import FaultSpec, FleetConfig, scenario
from llm_oncall.sim.autoscaler import HpaConfig

WATCH_S = 1500.0
"""Both sides run this long after the planned onset: the incident, the response and the recovery fit in it."""


@dataclass(frozen=True)
class Fix:
    name: str
    incident: str
    doc: str
    apply: Callable[[FleetConfig, FaultSpec], tuple[FleetConfig, FaultSpec]]


def _hpa_waiting_3(cfg: FleetConfig, fault: FaultSpec) -> tuple[FleetConfig, FaultSpec]:
    hpa = HpaConfig(enabled=True, min_replicas=cfg.pods, max_replicas=2 * cfg.pods,
                    metric="vllm:num_requests_waiting", target_value=3.0, period_s=15.0)
    return replace(cfg, hpa=hpa), fault


def _warm_pool_20(cfg: FleetConfig, fault: FaultSpec) -> tuple[FleetConfig, FaultSpec]:
    pods = math.ceil(cfg.pods * 1.2)
    # The same demand on 20 % more loaded replicas: rate_per_pod is per initial replica.
    return replace(cfg, pods=pods, rate_per_pod=cfg.rate_per_pod * cfg.pods / pods), fault


def _retry_budget(cfg: FleetConfig, fault: FaultSpec) -> tuple[FleetConfig, FaultSpec]:
    return cfg, replace(fault, params={**fault.params, "client_retry": "backoff"})


def _gateway_ratelimit(cfg: FleetConfig, fault: FaultSpec) -> tuple[FleetConfig, FaultSpec]:
    return replace(cfg, rate_limit_rps=1.5 * cfg.rate_per_pod * cfg.pods), fault


def _length_routing(cfg: FleetConfig, fault: FaultSpec) -> tuple[FleetConfig, FaultSpec]:
    return replace(cfg, router="length_pools", long_pool_pods=max(1, cfg.pods // 4)), fault


def _params(**params: Any) -> Callable[[FleetConfig, FaultSpec], tuple[FleetConfig, FaultSpec]]:
    """A fix the fault's own controller models (sim/faults.py): the parameters it takes."""
    return lambda cfg, fault: (cfg, replace(fault, params={**fault.params, **params}))


FIXES: dict[str, Fix] = {f.name: f for f in (
    Fix("hpa-waiting-3", "kv-capacity", "an HPA on vllm:num_requests_waiting, target 3 per pod, up to 2× the "
        "replicas, scaling every 15 s", _hpa_waiting_3),
    Fix("warm-pool-20", "kv-capacity", "20 % more replicas loaded and serving, for the same demand",
        _warm_pool_20),
    Fix("retry-budget", "retry-storm", "the clients' SDK keeps jittered exponential backoff and a 10 % retry "
        "budget when its timeout is cut", _retry_budget),
    Fix("gateway-ratelimit", "retry-storm", "a gateway rate limit at 1.5× the fleet's normal arrivals",
        _gateway_ratelimit),
    Fix("length-routing", "long-context-starvation", "a quarter of the replicas as a long-context pool, the "
        "router sending prompts over 16k tokens there", _length_routing),
    Fix("nccl-timeout", "engine-hang", "an NCCL/PyTorch collective timeout of 30 s (the default is 10 min): the hang "
        "becomes a crash, the kubelet restarts the group's containers and they reload the model",
        _params(nccl_timeout_s=30.0)),
    Fix("liveness-probe", "engine-hang", "the forward-progress liveness probe (llm-oncall probe serve --stall 30s; the "
        "kubelet's periodSeconds 10, failureThreshold 3): a hung engine's containers are killed about 60 s after the "
        "freeze, restart and reload the model", _params(liveness_probe_s=60.0)),
    Fix("canary-quality-gate", "bad-model-rollout", "the rollout's canary analysis on the quality proxies "
        "(format compliance, repetition, probes; one 60 s analysis run) aborts the canary: weight 0, canary pods "
        "deleted", _params(quality_gate_s=60.0)),
    Fix("ecc-autocordon", "gpu-ecc", "a DCGM health check cordons the node 30 s after a double-bit ECC error / "
        "pending row remap and evicts the failing GPU's pod; it is rescheduled elsewhere and reloads",
        _params(autocordon_s=30.0)),
    Fix("staging-canary", "cuda-graph-crash", "the vLLM upgrade runs its benchmark in staging first: the CUDA-graph "
        "capture crash happens there and the rollout never reaches production", _params(staging_canary=True)),
    Fix("config-canary", "prefix-cache-drop", "an SLO check on every config change (hit rate, TTFT) reverts it "
        "after 60 s; modelled at full traffic (the simulated router has no traffic split), an upper bound on a "
        "canary's impact", _params(config_canary_s=60.0)),
)}


def impact(r: ActResult, db: Path, onset: float, epoch: float, end: float) -> dict[str, Any]:
    """IMPACT of one side, from its record: the scrapes from onset to `end` (simulated seconds)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        samples, _ = read(con, epoch + onset, epoch + end)
        pages = int(con.execute("SELECT COUNT(*) FROM incidents").fetchone()[0])
    finally:
        con.close()
    by_t: dict[float, dict[str, float]] = {}
    for s in samples:
        if s.scope == "fleet":
            by_t.setdefault(s.t, {})[s.signal] = s.value
    red = [t for t, v in sorted(by_t.items()) if violated(v)]
    over = sum(v.get("arrival_rate", 0.0) * INTERVAL_S for t, v in by_t.items() if violated(v))
    failed = sum(v.get("arrival_rate", 0.0) * v.get("error_share", 0.0) * INTERVAL_S for v in by_t.values())
    if r.seconds_to_recovery is not None:
        mttr: float | None = r.seconds_to_recovery
    elif not red:
        mttr = 0.0  # the symptom never showed: nothing to recover from
    elif pages == 0 or not r.actions:
        mttr = round(red[-1] - epoch - onset + INTERVAL_S, 1)  # it went away by itself: its last red scrape
    else:
        mttr = None
    return {"slo_minutes_burned": round(len(red) * INTERVAL_S / 60.0, 2), "requests_failed": round(failed),
            "requests_over_slo": round(over), "mttr_s": mttr, "pages": pages}


def run(incident: str, fix_name: str, seed: int) -> dict[str, Any]:
    fix = FIXES.get(fix_name)
    if fix is None or fix.incident != incident:
        known = ", ".join(f"{f.name} ({f.incident})" for f in FIXES.values())
        raise ValueError(f"no what-if {fix_name!r} for {incident}; modelled: {known}")
    cfg, fault = scenario(incident, seed)
    assert fault is not None
    fixed_cfg, fixed_fault = fix.apply(cfg, fault)
    out: dict[str, Any] = {"incident": incident, "fix": fix_name, "doc": fix.doc, "seed": seed,
                           "window_s": WATCH_S}
    with tempfile.TemporaryDirectory(prefix="llm-oncall-whatif-") as tmp:
        for side, (c, f) in (("without", (cfg, fault)), ("with", (fixed_cfg, fixed_fault))):
            db = Path(tmp) / f"{side}.db"
            r = run_act(incident, seed, record=db, cfg=c, fault=f, watch_s=WATCH_S)
            onset = r.drill.onset if r.drill.onset is not None else f.at
            out[side] = impact(r, db, onset, c.epoch, f.at + WATCH_S)
    return out
