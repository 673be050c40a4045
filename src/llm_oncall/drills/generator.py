"""Seeded scenario generator for the drill suite.

Every scenario is a `FleetConfig` plus an optional `FaultSpec` built only from knobs the simulator has:
fleet size, tensor parallelism and group size, load level, client mix, onset, the fault's own parameters,
and confounders that a healthy fleet also shows (diurnal ramps, a routine deploy with no fault, brief
traffic spikes, HPA scaling, a different client mix).  Scenario `i` of seed `s` depends only on `(s, i)`,
so a suite of 40 is a prefix of the suite of 400 with the same seed.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.sim import INCIDENTS, FaultSpec, FleetConfig, Spike
from llm_oncall.sim.autoscaler import HpaConfig
from llm_oncall.sim.clients import DEFAULT_CLIENTS

HEALTHY = "healthy"
CLASSES: tuple[str, ...] = (*INCIDENTS, HEALTHY)
HEALTHY_PER_BLOCK = 3
"""Each block of 12 consecutive scenarios holds the 9 incidents once and 3 healthy runs (25 %)."""
BLOCK = len(INCIDENTS) + HEALTHY_PER_BLOCK
CONFOUNDERS: tuple[str, ...] = ("diurnal", "deploy", "spike", "hpa", "client-mix")
ROLLOUT_INCIDENTS = frozenset({"bad-model-rollout", "cuda-graph-crash"})
ROUTER_POLICIES = ("random", "round_robin", "least_loaded")
NEW_VLLM_VERSIONS = ("0.33.0", "0.33.1", "0.34.0")
HEALTHY_AFTER_S = 150.0
"""A healthy run lasts 300 s (warm-up) + this: 30 scrape intervals."""
ONSET_RANGE_S = (150.0, 330.0)
"""Onset after 10–22 scrape intervals of history."""


@dataclass(frozen=True)
class Scenario:
    index: int
    incident: str
    """The injected incident id, or "healthy"."""
    seed: int
    cfg: FleetConfig
    fault: FaultSpec | None
    confounders: tuple[str, ...] = ()
    notes: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        cfg = self.cfg
        parts = [f"{cfg.pods} pods", f"TP{cfg.tp}"]
        if cfg.group_size > 1:
            parts.append(f"groups of {cfg.group_size}")
        parts.append(f"{cfg.rate_per_pod:.1f} req/s/pod")
        if self.fault is not None:
            parts.append(f"onset {self.fault.at:.0f}s")
            params = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.fault.params.items()))
            if params:
                parts.append(params)
        if self.confounders:
            parts.append("+" + "+".join(self.confounders))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "index": self.index, "incident": self.incident, "seed": self.seed, "pods": cfg.pods, "tp": cfg.tp,
            "group_size": cfg.group_size, "rate_per_pod": round(cfg.rate_per_pod, 3),
            "onset": self.fault.at if self.fault else None,
            "params": {k: _short(v) for k, v in (self.fault.params if self.fault else {}).items()},
            "confounders": list(self.confounders), "notes": dict(self.notes),
        }


def _short(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 3)
    if isinstance(v, tuple):
        return [_short(x) for x in v]
    return v


def _rng(seed: int, *salt: int) -> random.Random:
    return random.Random(":".join(str(x) for x in (seed, *salt)))  # noqa: S311 - simulation, not crypto


def class_of(seed: int, index: int) -> str:
    """Stratified: every block of 12 scenarios is a seeded shuffle of the 9 incidents and 3 healthy runs."""
    block, slot = divmod(index, BLOCK)
    order = [*INCIDENTS, *([HEALTHY] * HEALTHY_PER_BLOCK)]
    _rng(seed, block, 0xB10C).shuffle(order)
    return order[slot]


def _pods(rng: random.Random) -> int:
    """Mostly small fleets (speed), with a tail up to 64 pods."""
    u = rng.random()
    if u < 0.85:
        return rng.randint(4, 6)
    if u < 0.95:
        return rng.randint(7, 12)
    if u < 0.99:
        return rng.randint(13, 24)
    return rng.randint(25, 64)


def _topology(rng: random.Random, incident: str, pods: int) -> tuple[int, int]:
    """(tp, group_size): TP 1–8 GPUs per pod; multi-pod groups (shared collectives) for some hangs."""
    tp = rng.choice((1, 1, 2, 2, 4, 8))
    group = 1
    if incident == "engine-hang" and rng.random() < 0.6:
        group = 2 if pods >= 4 else 1
    return tp, group


def _load(rng: random.Random, incident: str) -> float:
    """Requests per second per initial pod (capacity is ≈ 12 req/s per pod with the default step model)."""
    if incident == "kv-capacity":
        return rng.uniform(8.0, 9.5)
    if incident == "retry-storm":
        return rng.uniform(8.0, 9.0)
    return rng.uniform(4.0, 8.5)


def _fault_params(rng: random.Random, incident: str, pods: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fault parameters the simulator's fault handlers read, plus fleet overrides some faults need."""
    p: dict[str, Any] = {}
    over: dict[str, Any] = {}
    if incident == "kv-capacity":
        p["factor"] = rng.uniform(2.0, 2.6)
    elif incident == "engine-hang":
        p["crc_per_s"] = rng.uniform(5.0, 40.0)
    elif incident == "prefix-cache-drop":
        if rng.random() < 0.7:
            p["variant"] = "router"
            p["policy"] = rng.choice(ROUTER_POLICIES)
            p["lag_s"] = rng.uniform(10.0, 60.0)
        else:
            p["variant"] = "unique-prefix"
            p["share"] = rng.uniform(0.8, 1.0)
    elif incident == "retry-storm":
        p["timeout_s"] = rng.uniform(3.0, 6.0)
        p["pod_index"] = rng.randrange(pods)
        over["oom_queue_limit"] = rng.randint(250, 350)
    elif incident == "bad-model-rollout":
        p["weight"] = rng.uniform(0.1, 0.3)
        p["model_revision"] = f"ft-2026-{rng.randint(1, 12):02d}-rc{rng.randint(1, 9)}"
    elif incident == "gpu-ecc":
        p["wrong_rate"] = rng.uniform(0.01, 0.03)
        p["sbe_per_s"] = rng.uniform(0.5, 5.0)
        p["pod_index"] = rng.randrange(pods)
    elif incident == "cuda-graph-crash":
        p["vllm_version"] = rng.choice(NEW_VLLM_VERSIONS)
    elif incident == "long-context-starvation":
        p["share"] = rng.uniform(0.03, 0.06)
        p["prompt_tokens"] = (rng.randint(4_000, 8_000), rng.randint(60_000, 120_000))
    elif incident == "pod-outlier":
        p["factor"] = rng.uniform(2.0, 4.0)
        p["pod_index"] = rng.randrange(pods)
    return p, over


def _confounder(rng: random.Random, kind: str, cfg: FleetConfig, around: float) -> dict[str, Any]:
    if kind == "diurnal":
        return {"diurnal_amplitude": rng.uniform(0.1, 0.35), "diurnal_period_s": rng.uniform(1800.0, 7200.0),
                "diurnal_phase_s": rng.uniform(0.0, 7200.0)}
    if kind == "deploy":
        return {"routine_deploy_at": around + rng.uniform(-90.0, 60.0)}
    if kind == "spike":
        n = rng.randint(1, 2)
        spikes = tuple(Spike(around + rng.uniform(-150.0, 120.0), rng.uniform(8.0, 30.0), rng.uniform(1.2, 1.7))
                       for _ in range(n))
        return {"spikes": tuple(sorted(spikes, key=lambda s: s.at))}
    if kind == "hpa":
        lo = max(2, cfg.pods - rng.randint(0, 2))
        return {"hpa": HpaConfig(enabled=True, min_replicas=lo, max_replicas=max(lo + 2, 2 * cfg.pods),
                                 target_value=rng.uniform(25.0, 45.0))}
    if kind == "client-mix":
        chat = rng.uniform(0.4, 0.7)
        rag = rng.uniform(0.05, 0.25)
        mobile = max(0.05, 1.0 - chat - rag)
        shares = {"web-chat": chat, "mobile-app": mobile, "rag-search": rag}
        return {"clients": tuple(dataclasses.replace(c, share=shares.get(c.name, c.share)) for c in DEFAULT_CLIENTS)}
    raise ValueError(f"unknown confounder {kind!r}")


def _pick_confounders(rng: random.Random, incident: str) -> tuple[str, ...]:
    allowed = [c for c in CONFOUNDERS if not (c == "deploy" and incident in ROLLOUT_INCIDENTS)]
    # healthy: 1–2 confounders (10 % quiet runs); incidents: one confounder 40 % of the time
    quiet = rng.random()
    n = (0 if quiet < 0.1 else rng.choice((1, 1, 2))) if incident == HEALTHY else int(quiet < 0.4)
    return tuple(sorted(rng.sample(allowed, n)))


def generate_one(seed: int, index: int) -> Scenario:
    incident = class_of(seed, index)
    rng = _rng(seed, index)
    pods = _pods(rng)
    tp, group = _topology(rng, incident, pods)
    rate = _load(rng, incident)
    onset = rng.uniform(ONSET_RANGE_S[0], ONSET_RANGE_S[1])
    sim_seed = rng.randrange(1, 2**31)
    cfg = FleetConfig(pods=pods, tp=tp, group_size=group, rate_per_pod=rate, dcgm_custom_csv=True)
    params: dict[str, Any] = {}
    if incident != HEALTHY:
        params, over = _fault_params(rng, incident, pods)
        cfg = dataclasses.replace(cfg, **over)
    chosen = _pick_confounders(rng, incident)
    around = onset if incident != HEALTHY else 300.0
    for kind in chosen:
        cfg = dataclasses.replace(cfg, **_confounder(rng, kind, cfg, around))
    fault = FaultSpec(incident, onset, params) if incident != HEALTHY else None
    return Scenario(index, incident, sim_seed, cfg, fault, chosen)


def generate(n: int, seed: int) -> list[Scenario]:
    return [generate_one(seed, i) for i in range(n)]


def iter_scenarios(n: int, seed: int) -> Iterator[Scenario]:
    for i in range(n):
        yield generate_one(seed, i)
