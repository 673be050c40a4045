"""The twin: try each planned action on a simulated copy of the fleet before applying it.

From what the live fleet exposes — its Snapshots and the diagnosis features (pods serving, their tensor-parallel
groups, arrival rate, the prompt-length histogram, KV capacity, config changes) and the diagnosis (its incident,
scope and evidence) — `calibrate` builds a simulated fleet of the same shape, with the diagnosed fault reproduced
by the simulator's own model of that fault, parameterised from the evidence (never from a simulator's ground
truth: a drill's fleet is as opaque to the twin as a real one). `predict` then runs that twin forward once for doing
nothing, once for each candidate action alone and once for the plan as it would execute (its allowed actions
together), each for HORIZON_S simulated seconds after the action, and judges every run with the rules the loop
itself uses: recovery is the incident's recovery signals and the user-facing symptoms back for RECOVERED_ROUNDS
consecutive scrapes (actions/verify.py), SLO minutes are the scrapes with the SLO violated (postmortem/impact.py).

Candidates are ranked by predicted SLO minutes burned over the horizon, then by minutes with the incident's own
signal out (harm the SLO does not see: wrong answers), then by predicted seconds to recovery. Every run replays the
same seed (common random numbers): the runs differ only by the action.

Assumptions (docs/actions.md, "Twin"): the model load time is the simulator's default for the tensor-parallel
degree seen (90 s per pod, +25 % per extra rank), the clients' mix and retry behaviour are the simulator's default
population rescaled to the observed arrival rate, an autoscaler the fleet may have is not modelled (a scale-out
lands at once), and where the incident stands at plan time is matched on the live fleet's trailing run of red
scrapes: the twin acts once its own diagnosis pages the incident and it has been red as many scrapes in a row.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from llm_oncall.actions import pools, verify
from llm_oncall.actions.model import Action, Plan, Prediction
from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.diagnosis.features import Features
from llm_oncall.postmortem.impact import violated
from llm_oncall.respond.responder import RECOVERED_ROUNDS
from llm_oncall.respond.simsource import SimSource
from llm_oncall.signals.snapshot import Snapshot
from llm_oncall.sim import FaultSpec, Fleet, FleetConfig, lifecycle
from llm_oncall.sim.engine import EngineConfig
from llm_oncall.sim.kubeapi import fleetops, jobs
from llm_oncall.sim.kubeapi.routing import ROUTER_KEY
from llm_oncall.sim.pods import READY, TERMINATED, Pod

HORIZON_S = 480.0
"""Each candidate runs this long after its action (8 simulated minutes, all of them: a recovery that relapses, or a
signal that comes and goes, counts; ≈ 4–8 s of CPU a run)."""
WARMUP_S = 285.0
"""Healthy scrapes before the twin's fault: the baselines its features and recovery signals compare against."""
ALIGN_MAX_S = 600.0
"""The longest the twin waits for its fault to show before acting anyway."""
SEED = 1
"""One seed for every run of a prediction (common random numbers)."""


@dataclass(frozen=True)
class TwinSpec:
    """The twin of a live fleet: its configuration, its fault, and where the incident stood at plan time."""

    cfg: FleetConfig
    fault: FaultSpec
    red_scrapes: int
    """Scrapes of the live fleet red in a row when the plan was made: the twin acts once its own diagnosis pages
    the incident and it has been red as many scrapes in a row."""
    interval_s: float
    notes: tuple[str, ...] = ()
    """What was calibrated from what (and what fell back to a default)."""

    def to_json(self) -> dict[str, Any]:
        c = self.cfg
        return {"pods": c.pods, "tp": c.tp, "group_size": c.group_size, "rate_per_pod": round(c.rate_per_pod, 3),
                "kv_blocks": c.engine.num_gpu_blocks, "fault": self.fault.kind,
                "fault_params": {k: v for k, v in self.fault.params.items()},
                "red_scrapes": self.red_scrapes, "notes": list(self.notes)}


@dataclass
class Run:
    """One candidate run forward."""

    name: str
    actions: tuple[str, ...]
    seconds_to_recovery: float | None = None
    """From the action to the first scrape of RECOVERED_ROUNDS recovered ones; None: not within the horizon."""
    slo_minutes: float = 0.0
    """SLO minutes burned from the action to the end of the horizon."""
    signal_minutes: float = 0.0
    """Minutes with the incident's own recovery signal away from its baseline (wrong answers, a bad revision's
    outputs: harm the latency and error objectives do not see); the ranking's second key."""
    wall_s: float = 0.0
    error: str | None = None
    age_s: float | None = None
    """The twin's fault age at its action: the twin's own estimate of how long the live incident had lasted."""

    def prediction(self, rank: int, horizon_s: float) -> Prediction:
        return Prediction(predicted_seconds_to_recovery=self.seconds_to_recovery,
                          predicted_slo_minutes=round(self.slo_minutes, 2),
                          predicted_signal_minutes=round(self.signal_minutes, 2), rank=rank, horizon_s=horizon_s,
                          error=self.error)


@dataclass
class Forecast:
    spec: TwinSpec
    runs: list[Run] = field(default_factory=list)
    horizon_s: float = HORIZON_S

    def ranked(self) -> list[Run]:
        """Fewest SLO minutes first, then fewest minutes with the incident's own signal out, then the soonest
        recovery (no recovery last); failed runs last; a tie keeps the order tried (doing nothing first)."""
        return sorted(self.runs, key=lambda r: (r.error is not None, round(r.slo_minutes, 2),
                                                round(r.signal_minutes, 2),
                                                r.seconds_to_recovery if r.seconds_to_recovery is not None
                                                else math.inf))

    def rank_of(self, run: Run) -> int:
        return next(i for i, r in enumerate(self.ranked(), 1) if r is run)


# ---- calibration ----------------------------------------------------------------------------------------------

def _num(f: Features | None, name: str) -> float | None:
    if f is None:
        return None
    v = f.get(name)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _groups(snap: Snapshot | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in snap.pods if snap is not None else ():
        g = p.labels.get("group") or p.labels.get("leaderworkerset.sigs.k8s.io/group-index") or p.name
        out.setdefault(g, []).append(p.name)
    return out


def red(incident: str, f: Features, obs: dict[str, Any], baselines: dict[str, float | None]) -> bool:
    """A scrape of the incident: a user-facing symptom red, or the incident's own recovery signal away from its
    baseline."""
    return f.get("symptom") is True or (bool(verify.signals(incident))
                                        and not verify.signal_back(incident, obs, baselines))


def red_scrapes(incident: str, features: Sequence[Features], snapshots: Sequence[Snapshot]) -> int:
    """The trailing run of red scrapes at the last one (baselines: the first half of the history)."""
    n = min(len(features), len(snapshots))
    if n == 0:
        return 0
    feats, snaps = list(features)[-n:], list(snapshots)[-n:]
    obs = [verify.observe(f, s) for f, s in zip(feats, snaps, strict=True)]
    head = obs[: max(1, n // 2)]
    base = {s.name: verify.baseline(head, s, math.inf) for s in verify.signals(incident)}
    count = 0
    for o, f in zip(reversed(obs), reversed(feats), strict=True):
        if not red(incident, f, o, base):
            break
        count += 1
    return count


def calibrate(d: Diagnosis, features: Sequence[Features], snapshots: Sequence[Snapshot],
              interval_s: float = 15.0, plan: Plan | None = None, model_load_s: float | None = None) -> TwinSpec:
    """The twin's fleet and fault from what the live fleet exposes. `model_load_s`: a pod's start to Ready (one
    rank; telemetry does not show it until a pod has started): the simulator's 90 s for an 8B model unless given."""
    notes: list[str] = []
    f = features[-1] if features else None
    snap = snapshots[-1] if snapshots else None
    groups = _groups(snap)
    group_size = max((len(v) for v in groups.values()), default=1)
    gpus_per_pod: dict[str, int] = {}
    for g in snap.gpus if snap is not None else ():
        if g.pod:
            gpus_per_pod[g.pod] = gpus_per_pod.get(g.pod, 0) + 1
    tp = max(1, round(statistics.median(gpus_per_pod.values()))) if gpus_per_pod else 1
    base_up = _num(f, "pods_up_baseline")
    pods = round(base_up) if base_up else (snap.fleet.pods_total if snap is not None else 8)
    pods = max(group_size, pods - pods % group_size)
    notes.append(f"{pods} pods (serving before the incident), tensor-parallel {tp} (GPUs per pod), "
                 f"groups of {group_size}")
    arrivals = _num(f, "arrival_rate_baseline") or _num(f, "arrival_rate")
    rate_per_pod = arrivals / pods if arrivals else 8.0
    notes.append(f"arrivals {arrivals:.1f}/s before the incident" if arrivals else "arrivals unknown: 8/s per pod")
    caps = [p.kv_capacity_tokens for p in (snap.pods if snap is not None else ()) if p.kv_capacity_tokens]
    engine = EngineConfig()
    if caps:
        engine = replace(engine, num_gpu_blocks=max(1, int(statistics.median(caps)) // engine.block_size))
        notes.append(f"KV capacity {statistics.median(caps):.0f} tokens per pod")
    deployment = next((p.labels.get("deployment") for p in (snap.pods if snap is not None else ())
                       if p.labels.get("deployment")), None) or "vllm-llama-8b"
    cfg = FleetConfig(pods=pods, tp=tp, group_size=group_size, rate_per_pod=rate_per_pod, engine=engine,
                      dcgm_custom_csv=True, deployment=deployment)
    if model_load_s is not None:
        cfg = replace(cfg, model_load_s=model_load_s)
    notes.append(f"model load {cfg.load_s:.0f} s per pod ({'given' if model_load_s is not None else 'default'})")
    cfg, params = _fault(d, f, snapshots, cfg, notes, plan)
    n = red_scrapes(d.incident, features, snapshots)
    notes.append(f"{n} scrape(s) red when the plan was made: the twin acts after as many of its own")
    return TwinSpec(cfg, FaultSpec(d.incident, WARMUP_S + interval_s / 2.0, params), n, interval_s,
                    tuple(notes))


OOM_QUEUE_EVIDENCE = 50
"""The deepest queue that says something about how many queued requests an API server holds before it is
OOM-killed; a shallower one (the storm's first burst kills a pod before any queue builds) says nothing."""


def _fault(d: Diagnosis, f: Features | None, snapshots: Sequence[Snapshot], cfg: FleetConfig, notes: list[str],
           plan: Plan | None) -> tuple[FleetConfig, dict[str, Any]]:
    """The diagnosed fault's parameters in the simulator's model of it, from the evidence."""
    inc = d.incident
    params: dict[str, Any] = {}
    if inc == "kv-capacity":
        ratio = _num(f, "arrival_rate_ratio")
        params["factor"] = ratio if ratio and ratio > 1.0 else 2.0
        notes.append(f"demand ×{params['factor']:.2f} (arrivals against their baseline)")
    elif inc == "engine-hang":
        params["group"] = f"{cfg.deployment}-g0"
        params["crc_per_s"] = 10.0
        notes.append("one tensor-parallel group frozen")
    elif inc == "retry-storm":
        peak = max((p.waiting or 0.0 for s in snapshots for p in s.pods), default=0.0)
        crashed = f is not None and (_num(f, "n_restarted") or 0.0) > 0
        if crashed and peak >= OOM_QUEUE_EVIDENCE:
            cfg = replace(cfg, oom_queue_limit=int(peak))
            notes.append(f"API servers OOM past {int(peak)} queued requests (the deepest queue seen)")
        elif crashed:
            # a pod was lost with no deep queue in sight: nothing tells how deep a queue the API servers hold
            notes.append(f"a pod was lost with no deep queue seen (deepest {int(peak)}): no queue limit modelled")
        params["pod_index"] = 0
    elif inc == "long-context-starvation":
        share = pools.long_share(snapshots, 16_384)
        lo, hi = 5_000, 100_000
        above = (hi - 16_384) / (hi - lo)  # the twin's long client draws prompts uniformly in [lo, hi]
        params["share"] = min(0.5, max(0.005, share.requests / above)) if share is not None else 0.04
        params["prompt_tokens"] = (lo, hi)
        notes.append(f"long-context client at {params['share']:.1%} of requests (prompt-length histogram)")
    elif inc == "bad-model-rollout":
        rev = d.scope_revision
        snap = snapshots[-1] if snapshots else None
        served = [(p.labels.get("revision"), p.requests_per_s or 0.0) for p in (snap.pods if snap else ())]
        total = sum(r for _, r in served)
        bad = sum(r for v, r in served if rev is not None and v == rev)
        params["weight"] = min(0.9, max(0.05, bad / total)) if total > 0 and bad > 0 else 0.15
        notes.append(f"canary at {params['weight']:.0%} of the traffic (requests its pods finished)")
    elif inc == "gpu-ecc":
        kinds = {a.kind for a in plan.actions} if plan is not None else set()
        params["variant"] = ("off_bus" if "reboot_node" in kinds else "contained"
                             if kinds == {"restart_pod"} else "dbe")
        params["pod_index"] = 0
        if params["variant"] == "off_bus":
            cfg = replace(cfg, gpus_per_node=2)
        rate = _num(f, "probe_mismatch_rate")
        notes.append(f"ECC variant {params['variant']} (the repair rung planned)"
                     + (f"; golden-prompt mismatches {rate:.2f}/s" if rate else ""))
    elif inc == "prefix-cache-drop":
        off = (_num(f, "prefix_caching_off") or 0.0) > 0 or (_num(f, "prefix_caching_turned_off") or 0.0) > 0
        changed = f is not None and f.get("config_change_recent") is True
        params["variant"] = "config-restart" if off else "router" if changed else "share"
        if params["variant"] == "router":
            params["lag_s"] = 0.0
        notes.append(f"prefix-cache drop by {params['variant']} (config evidence)")
    return cfg, params


# ---- actions on the twin -----------------------------------------------------------------------------------

def _scope(fleet: Fleet) -> list[Pod]:
    """The twin's own fault scope (the pods its injected fault hit)."""
    names = set(fleet.ground_truth.pods)
    return [p for p in fleet.pods if p.name in names and p.state != TERMINATED]


def apply(fleet: Fleet, a: Action, t: float) -> None:
    """What the action does to the twin: the same fleet operations the simulator's Kubernetes API performs when the
    action's write lands (sim/kubeapi/fleetops.py), aimed at the twin's counterpart of the action's target."""
    k = a.kind
    if k == "scale_out":
        want, cur = a.params.get("replicas"), a.params.get("from")
        live = sum(1 for p in fleet.pods if p.state != TERMINATED)
        delta = int(want) - int(cur) if isinstance(want, int) and isinstance(cur, int) else 1
        lifecycle.scale(fleet, max(live, fleet.desired_replicas) + max(0, delta), t, "twin")
    elif k == "gateway_cap_max_tokens":
        fleet.set_max_tokens_cap(int(a.params.get("max_tokens", 2048)) or None)
    elif k == "restart_group":
        for g in sorted({fleetops.group_index(p) for p in _scope(fleet)} or {0}):
            fleetops.restart_group(fleet, g, t, graceful=False)
    elif k in ("evict_pods", "restart_pod"):
        for p in _scope(fleet):
            fleetops.delete_pod(fleet, p, t, graceful=k == "evict_pods")
    elif k in ("cordon_node", "taint_node"):
        for node in {p.node for p in _scope(fleet)} | set(fleet.ground_truth.nodes):
            fleetops.set_cordon(fleet, node, True)
    elif k == "reset_gpu":
        for node in set(fleet.ground_truth.nodes):
            for gpu in fleet.gpus.get(node, []):
                if gpu.fault and gpu.fault not in ("off_bus", "hardware") and not gpu.pod:
                    jobs.reset_gpu_state(gpu)
    elif k == "reboot_node":
        for node in set(fleet.ground_truth.nodes):
            jobs.reboot(fleet, node)
    elif k == "rollback" and a.target.kind == "HTTPRoute":
        fleetops.set_canary_weights(fleet, 1, 0)
    elif k == "rollback":
        good = [r for r in fleet.revisions if not (r.capture_crash or r.bad_outputs)]
        if good:
            fleetops.rollout_to(fleet, good[-1], t)
    elif k == "set_engine_args":
        cur = fleet.revisions[-1]
        if "--enforce-eager" in (a.params.get("add") or []):
            fleetops.rollout_to(fleet, fleet.new_revision(enforce_eager=True, capture_crash=cur.capture_crash,
                                                          bad_outputs=cur.bad_outputs), t)
    elif k == "config_rollback":
        text = (a.params.get("data") or {}).get(ROUTER_KEY)
        fleetops.set_router_config(fleet, text if isinstance(text, str) else
                                   json.dumps({"routing_logic": "session"}), t)
        if fleet.fault is not None and fleet.fault.params.get("variant") == "share":
            fleet.workload.unique_prefix_share = 0.0
    elif k == "gateway_rate_limit":
        limits = a.params.get("limits") or {}
        retry_limits = a.params.get("retry_limits") or {}
        for c in fleet.gateway.clients:
            if c in limits:
                fleet.set_rate_limit(c, float(limits[c]) / 60.0)
            if c in retry_limits:
                fleet.set_retry_limit(c, float(retry_limits[c]) / 60.0)
    elif k == "gateway_route_long_prompts":
        lo, hi = int(a.params.get("threshold_tokens", 16_384)), int(a.params.get("max_tokens", 131_072))
        n_long = max(1, len(a.params.get("long_pool") or ()))
        ready = [p for p in fleet.pods if p.state == READY]
        for i, p in enumerate(ready):
            fleetops.set_context_range(fleet, p, f"{lo}-{hi}" if i >= len(ready) - n_long else f"0-{lo}")
        fleet.router.length_aware = True

        def label_new(_: float) -> None:
            # pods that become Ready later (a scale-out's) carry the short label: the action labels every pod of
            # the workload's selector
            for p in fleet.pods:
                if p.state != TERMINATED and p.context_range is None:
                    fleetops.set_context_range(fleet, p, f"0-{lo}")
        label_new(t)
    # hardware_ticket and the manual steps change nothing in the fleet


# ---- running forward -----------------------------------------------------------------------------------------

def run(spec: TwinSpec, incident: str, actions: Sequence[Action], name: str,
        horizon_s: float = HORIZON_S) -> Run:
    """The twin from its healthy warm-up through the fault to the plan time, then `actions` (none: doing
    nothing), then `horizon_s` judged on the loop's own recovery rule and the SLO."""
    t0 = time.perf_counter()
    out = Run(name, tuple(a.id for a in actions))
    iv = spec.interval_s
    fleet = Fleet(spec.cfg, seed=SEED, fault=spec.fault)
    source = SimSource(fleet, iv)
    pilot = Autopilot(iv)
    history: list[dict[str, Any]] = []

    def scrape() -> dict[str, Any]:
        pilot.observe(source.collect())
        pilot.step()
        obs = verify.observe(pilot.features[-1], pilot.snapshots[-1])
        history.append(obs)
        return obs

    while fleet.now < spec.fault.at - 1e-9:
        scrape()
    baselines = {s.name: verify.baseline(history, s, spec.fault.at) for s in verify.signals(incident)}
    # The action comes when the twin's own diagnosis pages the incident and the twin has been red as many scrapes
    # in a row as the live fleet had: the twin's incident then stands where the live one stood (its detection lag,
    # a rollout's progress, a queue's depth). A twin whose diagnosis names something else acts on its red scrapes
    # alone, at the live incident's age: not before the twin's fault is as old as the live fleet's red run.
    streak, paged = 0, False
    age_s = max(1, spec.red_scrapes) * iv
    while fleet.now < spec.fault.at + ALIGN_MAX_S - 1e-9:
        obs = scrape()
        d = pilot.last
        paged = paged or (d is not None and d.pages and d.incident == incident)
        streak = streak + 1 if red(incident, pilot.features[-1], obs, baselines) else 0
        if (paged and streak >= spec.red_scrapes) or (streak >= max(1, spec.red_scrapes)
                                                      and fleet.now >= spec.fault.at + age_s):
            break
    else:
        out.error = f"the twin's fault did not page within {ALIGN_MAX_S:.0f} s"
    act_at = fleet.now
    out.age_s = round(act_at - spec.fault.at, 1)
    for a in actions:
        apply(fleet, a, fleet.now)
    streak = 0
    sigs = verify.signals(incident)
    end = act_at + horizon_s
    while fleet.now < end - 1e-9:
        obs = scrape()
        t = float(obs["t"])
        if violated({k: float(v) for k, v in obs.items() if isinstance(v, int | float) and not isinstance(v, bool)}
                    | {"symptom": 1.0 if obs.get("symptom") is True else 0.0}):
            out.slo_minutes += iv / 60.0
        if sigs and not verify.signal_back(incident, obs, baselines):
            out.signal_minutes += iv / 60.0
        ok = verify.recovered(incident, obs, baselines)
        streak = streak + 1 if ok else 0
        if out.seconds_to_recovery is None and streak >= RECOVERED_ROUNDS:
            out.seconds_to_recovery = round(t - (RECOVERED_ROUNDS - 1) * iv - act_at, 1)
    out.wall_s = round(time.perf_counter() - t0, 2)
    return out


def predict(plan: Plan, d: Diagnosis, features: Sequence[Features], snapshots: Sequence[Snapshot],
            interval_s: float = 15.0, horizon_s: float = HORIZON_S,
            executes: Callable[[Action], bool] | None = None, model_load_s: float | None = None) -> Forecast:
    """Doing nothing, each action alone and the plan as it would execute (`executes`: which actions it takes;
    default those the guard allows), each run forward on the twin; the prediction goes on each action and the plan.
    """
    spec = calibrate(d, features, snapshots, interval_s, plan, model_load_s)
    fc = Forecast(spec, horizon_s=horizon_s)
    takes = executes or (lambda a: a.guard is None or a.guard.allowed)
    candidates = [a for a in plan.actions if a.dry_run is None or a.dry_run.ok]
    nothing = run(spec, d.incident, [], "nothing", horizon_s)
    fc.runs.append(nothing)
    alone: dict[str, Run] = {}
    for a in candidates:
        alone[a.id] = _safe(spec, d.incident, [a], a.id, horizon_s)
        fc.runs.append(alone[a.id])
    taken = [a for a in candidates if takes(a)]
    whole: Run | None = None
    if len(taken) > 1:
        whole = _safe(spec, d.incident, taken, "plan", horizon_s)
        fc.runs.append(whole)
    elif taken:
        whole = alone[taken[0].id]
    for a in plan.actions:
        r = alone.get(a.id)
        a.prediction = r.prediction(fc.rank_of(r), horizon_s) if r is not None else None
    plan.twin = {"horizon_s": horizon_s, "since_onset_s": nothing.age_s,
                 "calibration": spec.to_json(),
                 "nothing": nothing.prediction(fc.rank_of(nothing), horizon_s).model_dump(),
                 "plan": (whole.prediction(fc.rank_of(whole), horizon_s).model_dump() | {
                     "actions": [a.id for a in taken],
                     "predicted_seconds_from_onset": (round(whole.age_s + whole.seconds_to_recovery, 1)
                                                      if whole.seconds_to_recovery is not None
                                                      and whole.age_s is not None else None)})
                 if whole is not None else None,
                 "wall_s": round(sum(r.wall_s for r in fc.runs), 2)}
    return fc


def _safe(spec: TwinSpec, incident: str, actions: Sequence[Action], name: str, horizon_s: float) -> Run:
    """A run whose action the twin cannot model is reported, not raised: the plan is still made."""
    try:
        return run(spec, incident, actions, name, horizon_s)
    except (KeyError, ValueError, IndexError, TypeError) as exc:
        return Run(name, tuple(a.id for a in actions), error=f"{type(exc).__name__}: {exc}")


class Twin:
    """The responder's predictor: each new plan tried on a twin first (respond/responder.py `twin=`)."""

    def __init__(self, interval_s: float = 15.0, horizon_s: float = HORIZON_S,
                 model_load_s: float | None = None) -> None:
        self.interval_s = interval_s
        self.horizon_s = horizon_s
        self.model_load_s = model_load_s

    def __call__(self, plan: Plan, d: Diagnosis, features: Sequence[Features], snapshots: Sequence[Snapshot],
                 executes: Callable[[Action], bool] | None = None) -> Forecast:
        return predict(plan, d, features, snapshots, self.interval_s, self.horizon_s, executes, self.model_load_s)
