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
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.sim import FAULTS, FaultSpec, FleetConfig, Spike
from llm_oncall.sim.autoscaler import HpaConfig
from llm_oncall.sim.clients import DEFAULT_CLIENTS
from llm_oncall.sim.engine import StepModel

HEALTHY = "healthy"
CLASSES: tuple[str, ...] = (*FAULTS, HEALTHY)
HEALTHY_PER_BLOCK = 3
"""Each block of 12 consecutive scenarios holds the 9 incidents once and 3 healthy runs (25 %)."""
BLOCK = len(FAULTS) + HEALTHY_PER_BLOCK
CONFOUNDERS: tuple[str, ...] = ("diurnal", "deploy", "spike", "hpa", "client-mix")
ROLLOUT_INCIDENTS = frozenset({"bad-model-rollout", "cuda-graph-crash"})
ROUTER_POLICIES = ("random", "round_robin", "least_loaded")
NEW_VLLM_VERSIONS = ("0.33.0", "0.33.1", "0.34.0")
HEALTHY_AFTER_S = 150.0
"""A healthy run lasts 300 s (warm-up) + this: 30 scrape intervals."""
ONSET_RANGE_S = (150.0, 330.0)
"""Onset after 10–22 scrape intervals of history."""


SHAPES: tuple[str, ...] = ("small-fleet", "preempt-first", "partial-hit-drop", "ramp", "cold-start", "flapping-target",
                           "client-give-up", "idle-hang", "config-restart")
"""Shapes the first suite never had (the diagnosis was tuned on it): 1–3 pods at 0.5–5 req/s, surges that
preempt before they queue, partial hit-rate drops with and without a change event, a healthy load that rises
×1.5 over minutes, pods going from no traffic to normal, a scrape target that flaps while its pod is fine; and
(issue 22) a surge whose clients give up with no gateway counting arrivals (only vLLM's HTTP server sees them), an
engine that freezes while idle (its gauges stay 0), a rolling update that turns prefix caching off."""
SHAPE_ODDS: dict[str, tuple[tuple[str, float], ...]] = {
    HEALTHY: (("ramp", 0.15), ("cold-start", 0.12), ("flapping-target", 0.12), ("small-fleet", 0.15)),
    "kv-capacity": (("small-fleet", 0.2), ("preempt-first", 0.3), ("client-give-up", 0.15)),
    "prefix-cache-drop": (("small-fleet", 0.2), ("partial-hit-drop", 0.35), ("config-restart", 0.15)),
    "engine-hang": (("small-fleet", 0.15), ("idle-hang", 0.2)),
    "gpu-ecc": (("small-fleet", 0.15),),
    "retry-storm": (("small-fleet", 0.15),),
}
FLAP_ODDS = 0.08
"""Any scenario without another shape: one target's scrapes fail now and then while its pod is healthy."""
REFERENCE_RATE = 7.0
"""The default engine's load per pod in the first suite (capacity ≈ 12 req/s): small fleets scale theirs to it."""
SMALL_HEADROOM = 1.4
"""A small fleet gets this much more capacity relative to its load than the first suite's fleets: one pod has no
peers to spread a burst over, and at 1 req/s the simulated traffic needs minutes to reach its steady rate (chat
sessions ramp up), which a server sized to the first-suite utilisation cannot absorb. A surge on it is larger by
the same factor, so that it is as visible."""


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
    shape: str | None = None
    flap: float = 0.0
    """Share of one target's scrapes that fail (the observer's fault, not the pod's)."""

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
        if self.shape:
            parts.append(f"shape {self.shape}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "index": self.index, "incident": self.incident, "seed": self.seed, "pods": cfg.pods, "tp": cfg.tp,
            "group_size": cfg.group_size, "rate_per_pod": round(cfg.rate_per_pod, 3),
            "onset": self.fault.at if self.fault else None,
            "params": {k: _short(v) for k, v in (self.fault.params if self.fault else {}).items()},
            "confounders": list(self.confounders), "notes": dict(self.notes), "shape": self.shape,
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
    order = [*FAULTS, *([HEALTHY] * HEALTHY_PER_BLOCK)]
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
        return rng.uniform(9.0, 10.5)  # hot: the lost eighth of the pods leaves the rest near their capacity
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
        # a timeout the healthy fleet meets (its slowest answers take ≈ 15 s on the default steps), which the queue
        # after a lost pod exceeds: the storm is the retries', not a client that fails on a healthy fleet
        p["timeout_s"] = rng.uniform(18.0, 24.0)
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


# Confounders a shape leaves out: ones that would overwrite the knob it set, and load swings a small server sized
# to its load (1.7× headroom, as in the first suite) cannot absorb without a real, user-visible slowdown.
_CLASHES: dict[str, frozenset[str]] = {"ramp": frozenset({"diurnal"}), "cold-start": frozenset({"spike"}),
                                       "small-fleet": frozenset({"diurnal", "spike"}),
                                       "client-give-up": frozenset({"client-mix"}),
                                       "idle-hang": frozenset({"client-mix", "diurnal", "spike", "hpa"}),
                                       "config-restart": frozenset({"deploy"})}


def _pick_confounders(rng: random.Random, incident: str, shape: str | None = None) -> tuple[str, ...]:
    allowed = [c for c in CONFOUNDERS if not (c == "deploy" and incident in ROLLOUT_INCIDENTS)]
    # healthy: 1–2 confounders (10 % quiet runs); incidents: one confounder 40 % of the time
    quiet = rng.random()
    n = (0 if quiet < 0.1 else rng.choice((1, 1, 2))) if incident == HEALTHY else int(quiet < 0.4)
    picked = rng.sample(allowed, n)
    return tuple(sorted(c for c in picked if c not in _CLASHES.get(shape or "", frozenset())))


def _pick_shape(seed: int, index: int, incident: str) -> str | None:
    # Its own random stream: with shapes off, every scenario is exactly the first suite's.
    rng = _rng(seed, index, 0x5AFE)
    u = rng.random()
    for shape, odds in SHAPE_ODDS.get(incident, ()):
        if u < odds:
            return shape
        u -= odds
    return "flapping-target" if rng.random() < FLAP_ODDS else None


def _slower_steps(rate: float) -> StepModel:
    """A server whose steps are slower by REFERENCE_RATE / rate (a bigger model on the same GPU): its load is as
    close to its capacity as in the first suite, so an incident is as visible on one pod at 1 req/s as on 64
    pods at 7. By Little's law the concurrency, and so the KV usage, stays the same."""
    k = REFERENCE_RATE / rate / SMALL_HEADROOM
    m = StepModel()
    # The per-step and per-token compute scale; the KV read per context token does not (the same attention over
    # the same context), else a multi-turn chat's growing context alone slows a healthy server ×2 over minutes.
    return dataclasses.replace(m, base_s=m.base_s * k, per_seq_s=m.per_seq_s * k,
                               per_prefill_token_s=m.per_prefill_token_s * k)


def _apply_shape(shape: str, rng: random.Random, incident: str, cfg: FleetConfig,
                 params: dict[str, Any]) -> tuple[FleetConfig, dict[str, Any], float]:
    flap = 0.0
    if shape == "small-fleet":
        pods = rng.randint(2, 3) if incident == "retry-storm" else rng.randint(1, 3)
        rate = rng.uniform(0.5, 5.0)
        cfg = dataclasses.replace(cfg, pods=pods, rate_per_pod=rate, group_size=1, step=_slower_steps(rate))
        if "pod_index" in params:
            params["pod_index"] = rng.randrange(pods)
        if "timeout_s" in params:  # the slower server's answers take longer: the client's timeout is set for them
            params["timeout_s"] = params["timeout_s"] * REFERENCE_RATE / rate / SMALL_HEADROOM
        if incident == "kv-capacity":
            params["factor"] = params["factor"] * SMALL_HEADROOM
        if incident == "prefix-cache-drop" and pods == 1:
            params.clear()
            params.update({"variant": "unique-prefix", "share": rng.uniform(0.6, 1.0)})
    elif shape == "preempt-first":
        # KV fills before the batch slots do: a surge preempts before anything queues.
        e = cfg.engine
        cfg = dataclasses.replace(cfg, engine=dataclasses.replace(e, num_gpu_blocks=round(e.num_gpu_blocks
                                                                                          * rng.uniform(0.3, 0.4))))
    elif shape == "partial-hit-drop":
        params.clear()
        if rng.random() < 0.5:
            params.update({"variant": "unique-prefix", "share": rng.uniform(0.4, 0.75)})
        else:
            # A router flip on a fleet of 2–3: a session still lands on its own pod a third to half the time.
            cfg = dataclasses.replace(cfg, pods=rng.randint(2, 3))
            params.update({"variant": "router", "policy": rng.choice(ROUTER_POLICIES),
                           "lag_s": rng.uniform(10.0, 60.0)})
    elif shape == "ramp":
        # Load rising ×1.5 smoothly over minutes: a trough at t≈200 s, the peak 300–350 s later.
        period = rng.uniform(600.0, 700.0)
        cfg = dataclasses.replace(cfg, diurnal_amplitude=0.2, diurnal_period_s=period,
                                  diurnal_phase_s=0.75 * period - 200.0)
    elif shape == "cold-start":
        cfg = dataclasses.replace(cfg, spikes=(Spike(0.0, rng.uniform(150.0, 250.0), 0.0),))
    elif shape == "flapping-target":
        flap = rng.uniform(0.15, 0.35)
    elif shape == "client-give-up":
        # No gateway page: arrivals come from the engines and vLLM's HTTP servers. Clients give up after 15–25 s;
        # vLLM ends each such request at its HTTP server and aborts it in the queue.
        timeout = rng.uniform(15.0, 25.0)
        cfg = dataclasses.replace(cfg, gateway_metrics=False, abort_on_disconnect=True,
                                  clients=tuple(dataclasses.replace(c, timeout_s=timeout) for c in cfg.clients))
    elif shape == "idle-hang":
        # 1–2 pods with light traffic (most of the time nothing runs): the engine freezes between requests, so its
        # gauges read 0 for good; what comes in afterwards ends at the HTTP server at the clients' timeout.
        timeout = rng.uniform(20.0, 30.0)
        cfg = dataclasses.replace(cfg, pods=rng.randint(1, 2), tp=1, group_size=1, rate_per_pod=rng.uniform(0.3, 1.0),
                                  engine_core_gauges=True, abort_on_disconnect=True,
                                  clients=tuple(dataclasses.replace(c, timeout_s=timeout) for c in cfg.clients))
        params["idle_wait_s"] = 120.0
    elif shape == "config-restart":
        params.clear()
        params["variant"] = "config-restart"
    return cfg, params, flap


def generate_one(seed: int, index: int, shapes: bool = True) -> Scenario:
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
    shape = _pick_shape(seed, index, incident) if shapes else None
    flap = 0.0
    if shape is not None:
        # Before the confounders: an HPA or a spike is sized to the fleet the shape makes.
        cfg, params, flap = _apply_shape(shape, _rng(seed, index, 0x5A9E), incident, cfg, params)
    chosen = _pick_confounders(rng, incident, shape)
    around = onset if incident != HEALTHY else 300.0
    for kind in chosen:
        cfg = dataclasses.replace(cfg, **_confounder(rng, kind, cfg, around))
    fault = FaultSpec(incident, onset, params) if incident != HEALTHY else None
    return Scenario(index, incident, sim_seed, cfg, fault, chosen, shape=shape, flap=flap)


def generate(n: int, seed: int, shapes: bool = True) -> list[Scenario]:
    return [generate_one(seed, i, shapes) for i in range(n)]


