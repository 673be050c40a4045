"""Fault injection: each fault changes behaviour (load, engine progress, routing, hardware, rollouts) at its
onset, and the telemetry follows from the simulated behaviour. The label goes to the ground-truth channel only.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from llm_oncall.sim import lifecycle, logs
from llm_oncall.sim.clients import ClientSpec
from llm_oncall.sim.config import FaultSpec, GroundTruth
from llm_oncall.sim.dcgm import PCI_BUSES
from llm_oncall.sim.hooks import FleetHooks
from llm_oncall.sim.pods import TERMINATED, Pod

Params = dict[str, Any]


def _live(fleet: FleetHooks) -> list[Pod]:
    return [x for x in fleet.pods if x.state != TERMINATED]


def _pick_index(n: int, p: Params, rng: random.Random) -> int:
    """The fault's pod among n live ones: the scenario's pod_index if it names one, else a random one."""
    idx = p.get("pod_index")
    return int(idx) % n if idx is not None else rng.randrange(n)


def _pick_pod(fleet: FleetHooks, p: Params, rng: random.Random) -> Pod:
    live = _live(fleet)
    return live[_pick_index(len(live), p, rng)]


def _truth(fleet: FleetHooks, kind: str, at: float, pods: list[Pod], revision: str | None = None) -> None:
    fleet.truth = GroundTruth(kind, at, tuple(p.name for p in pods), tuple(sorted({p.node for p in pods})),
                              revision)


def _every(fleet: FleetHooks, start: float, period: float, fn: Callable[[float], None]) -> None:
    def run(t: float) -> None:
        fn(t)
        fleet.schedule(t + period, run)
    fleet.schedule(start, run)


def kv_capacity(fleet: FleetHooks, at: float, p: Params, rng: random.Random) -> None:
    factor = float(p.get("factor", rng.uniform(1.9, 2.5)))

    def onset(t: float) -> None:
        fleet.rate_factor *= factor
        _truth(fleet, "kv-capacity", at, _live(fleet))
    fleet.schedule(at, onset)


def engine_hang(fleet: FleetHooks, at: float, p: Params, rng: random.Random) -> None:
    groups = sorted({x.group for x in fleet.pods if x.state != TERMINATED})
    group = str(p.get("group", groups[rng.randrange(len(groups))]))
    crc_rate = float(p.get("crc_per_s", rng.uniform(5.0, 40.0)))

    idle_wait = float(p.get("idle_wait_s", 0.0))
    core_gauges = fleet.cfg.engine_core_gauges
    nccl_timeout = float(p["nccl_timeout_s"]) if p.get("nccl_timeout_s") is not None else None
    liveness = float(p["liveness_probe_s"]) if p.get("liveness_probe_s") is not None else None

    def onset(t: float) -> None:
        members = [x for x in fleet.pods if x.group == group and x.state != TERMINATED]
        if idle_wait > 0 and t < at + idle_wait and any(x.engine.num_running or x.engine.num_waiting
                                                         for x in members):
            # An idle hang: the engine freezes between requests (its gauges then read 0 for good).
            fleet.schedule(t + fleet.cfg.tick_s, onset)
            return
        for x in members:
            x.engine.freeze(core_gauges)
            x.hung = True
        _truth(fleet, "engine-hang", t, members)
        gpus = [g for x in members for g in x.gpus]

        def link_errors(_: float) -> None:
            for g in gpus:
                g.crc_flit += int(rng.expovariate(1.0 / crc_rate))
                g.crc_data += int(rng.expovariate(4.0 / crc_rate))
                g.replay += int(rng.expovariate(2.0 / crc_rate))
        _every(fleet, t + 1.0, 1.0, link_errors)
        # what-if nccl-timeout: the collective's timeout fires, the process group aborts and the engine exits;
        # what-if liveness-probe: the forward-progress probe fails (no step with requests in flight) until the
        # kubelet's failure threshold kills the containers. Either way each container restarts and the group loads
        # the model again (a crash, not a hang).
        for delay, reason in ((nccl_timeout, "Error: NCCL watchdog timeout"),
                              (liveness, "Liveness probe failed: no forward progress")):
            if delay is not None:
                fleet.schedule(t + delay, functools.partial(_restart_hung, fleet, members, why=reason))
    fleet.schedule(at, onset)


def _restart_hung(fleet: FleetHooks, members: list[Pod], t: float, *, why: str) -> None:
    for x in members:
        if x.hung and x.state != TERMINATED:
            lifecycle.crash(fleet, x, t, why, oom=False)


def prefix_cache_drop(fleet: FleetHooks, at: float, p: Params, rng: random.Random) -> None:
    variant = str(p.get("variant", "router"))
    if variant == "config-restart":
        # A rolling update whose engine args turn prefix caching off: the new pods' vllm:cache_config_info says
        # so, and they look nothing up.
        def onset(t: float) -> None:
            rev = fleet.new_revision(prefix_caching=False)
            lifecycle.start_rollout(fleet, rev, t)
            _truth(fleet, "prefix-cache-drop", at, _live(fleet), rev.name)
    elif variant == "router":
        lag = float(p.get("lag_s", rng.uniform(10.0, 60.0)))
        policy = str(p.get("policy", "random"))
        fleet.schedule(max(0.0, at - lag), lambda t: lifecycle.config_change(fleet, t, policy, apply=False))

        canary = float(p["config_canary_s"]) if p.get("config_canary_s") is not None else None
        before = fleet.router.policy

        def onset(t: float) -> None:
            fleet.router.policy = policy
            _truth(fleet, "prefix-cache-drop", at, _live(fleet))
            if canary is not None:
                def check(t2: float) -> None:
                    # what-if config-canary: the change's SLO check (hit rate, TTFT) fails and the pipeline
                    # reverts it; the router picks the old config up on its next 10 s reload
                    lifecycle.config_change(fleet, t2, before, apply=False)
                    fleet.schedule(t2 + 10.0 - (t2 % 10.0), lambda _: setattr(fleet.router, "policy", before))
                fleet.schedule(t + canary, check)
    else:
        share = float(p.get("share", rng.uniform(0.8, 1.0)))

        def onset(t: float) -> None:
            fleet.workload.unique_prefix_share = share
            _truth(fleet, "prefix-cache-drop", at, _live(fleet))
    fleet.schedule(at, onset)


def retry_storm(fleet: FleetHooks, at: float, p: Params, rng: random.Random) -> None:
    # 20 s on the whole request: above every healthy answer of the default fleet (0.07 % of them take longer at 9
    # req/s per pod), below what a queue builds once a hot fleet loses a pod (docs/drills.md, retry storm)
    timeout = float(p.get("timeout_s", 20.0))
    retry = str(p.get("client_retry", "immediate"))  # "backoff": an SDK that keeps its retry budget (what-if)
    wl = fleet.workload

    def onset(t: float) -> None:
        # The chat clients' aggressive policy (short timeout, immediate unbounded retries) is what
        # turns one OOM kill into a fleet-wide storm; it is armed at the trigger so that the
        # warm-up before onset is a healthy baseline rather than a storm of its own.
        for i, spec in enumerate(wl.specs):
            if spec.kind == "chat":
                wl.specs[i] = replace(spec, retry=retry, timeout_s=timeout)
        # The trigger takes the same share of the capacity on any fleet: an eighth of the serving pods (at least
        # one; one of 8 in the named drill). A single pod of 23 leaves the rest 4 % busier, which no client's
        # retries turn into a storm: that would be a lost pod, not this incident (docs/drills.md, retry storm).
        live = _live(fleet)
        start = _pick_index(len(live), p, rng)
        lost = max(1, math.ceil(len(live) * float(p.get("lost_share", 0.125)) - 1e-9))
        pods = [live[(start + j) % len(live)] for j in range(min(lost, len(live)))]
        for pod in pods:
            lifecycle.crash(fleet, pod, t, "OOMKilled", oom=True)
        _truth(fleet, "retry-storm", at, pods)
    fleet.schedule(at, onset)


def bad_model_rollout(fleet: FleetHooks, at: float, p: Params, rng: random.Random) -> None:
    weight = float(p.get("weight", rng.uniform(0.1, 0.25)))
    model = str(p.get("model_revision", "ft-2026-01-rc3"))

    gate = float(p["quality_gate_s"]) if p.get("quality_gate_s") is not None else None

    def onset(t: float) -> None:
        rev = fleet.new_revision(model_revision=model, bad_outputs=True)
        ro = lifecycle.start_rollout(fleet, rev, t, canary_weight=weight)
        _truth(fleet, "bad-model-rollout", at, [fleet.by_name[n] for n in ro.created], rev.name)
        if gate is not None:
            def analysis(t2: float) -> None:
                # what-if canary-quality-gate: the rollout's analysis reads the canary's quality proxies, fails
                # and aborts: the traffic goes back to the stable revision, the canary pods are deleted
                old = [r for r in fleet.weights if r != rev.name]
                fleet.weights = {**{r: 1.0 / max(1, len(old)) for r in old}, rev.name: 0.0}
                for name in ro.created:
                    pod = fleet.by_name.get(name)
                    if pod is not None and pod.state != TERMINATED:
                        fleet.connection_lost(pod, pod.engine.abort_all(t2), t2)
                        lifecycle.terminate(fleet, pod, t2)
                if fleet.rollout is ro:
                    fleet.rollout = None
                fleet.record_event(t2, "rollout", f"canary {rev.name} aborted by its analysis (quality gate): "
                                   "weight 0, canary pods deleted", revision=rev.name)
            fleet.schedule(t + gate, analysis)
    fleet.schedule(at, onset)


GPU_ECC_VARIANTS = ("dbe", "contained", "off_bus", "repeat")
"""The gpu-ecc fault's `variant` (one per rung of the repair ladder): a double-bit error with a pending row remap
(Xid 48 + 63: reset the GPU; the default), a contained error (Xid 94: restart the application), a DBE after which
the GPU falls off the bus (Xid 48, then 79: reboot the node), and `repeat` — a DBE on a GPU the incident store
has seen before (the drill seeds that history): cordon and a hardware ticket."""


def gpu_ecc(fleet: FleetHooks, at: float, p: Params, rng: random.Random) -> None:
    wrong = float(p.get("wrong_rate", rng.uniform(0.01, 0.03)))
    sbe_rate = float(p.get("sbe_per_s", rng.uniform(0.5, 5.0)))
    variant = str(p.get("variant", "dbe"))
    if variant not in GPU_ECC_VARIANTS:
        raise ValueError(f"gpu-ecc variant {variant!r}: one of {', '.join(GPU_ECC_VARIANTS)}")
    autocordon = float(p["autocordon_s"]) if p.get("autocordon_s") is not None else None

    def onset(t: float) -> None:
        pod = _pick_pod(fleet, p, rng)
        gpu = pod.gpus[0]
        pod.wrong_rate = wrong
        _truth(fleet, "gpu-ecc", at, [pod])
        pci = f"0000:{PCI_BUSES[gpu.index % 8]}:00"
        pid = 4000 + rng.randrange(60000)
        klog = fleet.kernel_logs[pod.node]
        uptime = 86_400.0 * 12 + t
        gpu.dbe_vol += 1
        gpu.dbe_agg += 1

        def agent(line: str, at_t: float) -> None:  # NPD's GPU check quotes the kernel's Xid line on the Node
            fleet.node_events.append({"t": at_t, "node": pod.node, "reason": "GPUXIDErrors", "message": line})
            del fleet.node_events[:-200]
        if variant == "contained":  # an uncorrectable error contained to the process; its page is retired
            gpu.xid = 94
            klog.append(logs.xid_line(uptime, pci, 94, pid))
            agent(klog[-1], t)
            return
        gpu.remapped_uncorr += 1
        gpu.remap_pending = 1
        gpu.xid = 48
        gpu.fault = "ecc"
        klog.append(logs.xid_line(uptime, pci, 48, pid))
        klog.append(logs.xid_line(uptime + 0.002, pci, 63, pid))
        agent(klog[-2], t)
        if variant == "off_bus":
            gpu.fault = "off_bus"
            gpu.xid = 79
            klog.append(logs.xid_line(uptime + 2.0, pci, 79, pid))
            agent(klog[-1], t + 2.0)
            return

        def errors(t2: float) -> None:
            if not gpu.fault:
                return  # the GPU was reset
            n = int(rng.expovariate(1.0 / sbe_rate) * 10)
            gpu.sbe_vol += n
            gpu.sbe_agg += n
            if rng.random() < 0.02:
                gpu.dbe_vol += 1
                gpu.dbe_agg += 1
                gpu.xid = 94
                klog.append(logs.xid_line(86_400.0 * 12 + t2, pci, 94, pid))
        _every(fleet, t + 10.0, 10.0, errors)
        if autocordon is not None:
            def remediate(t2: float) -> None:
                # what-if ecc-autocordon: a DCGM health check sees the DBE / pending row remap, cordons the node and
                # evicts the pods on the failing GPU (draining the whole node took every replica on it: an outage);
                # the ReplicaSet's replacements are scheduled elsewhere and load the model
                fleet.cordoned.add(pod.node)
                for x in [x for x in fleet.pods if gpu in x.gpus and x.state != TERMINATED]:
                    fleet.connection_lost(x, x.engine.abort_all(t2), t2)
                    lifecycle.terminate(fleet, x, t2)
                    new = lifecycle.create_pod(fleet, x.revision, t=t2)
                    fleet.record_event(t2, "restart", f"{x.name}: evicted (node {x.node} cordoned by the GPU health "
                                       f"check); replaced by {new.name}", pod=x.name, reason="Evicted")
            fleet.schedule(t + autocordon, remediate)
    fleet.schedule(at, onset)


def cuda_graph_crash(fleet: FleetHooks, at: float, p: Params, rng: random.Random) -> None:
    version = str(p.get("vllm_version", "0.33.0"))
    eager = bool(p.get("enforce_eager", False))

    staging = bool(p.get("staging_canary", False))

    def onset(t: float) -> None:
        if staging:
            # what-if staging-canary: the upgrade ran its benchmark in staging first, crash-looped there and never
            # reached production (the staging fleet is not this one: nothing here changes)
            _truth(fleet, "healthy", at, [])
            return
        rev = fleet.new_revision(vllm_version=version, capture_crash=True, enforce_eager=eager)
        ro = lifecycle.start_rollout(fleet, rev, t)
        _truth(fleet, "cuda-graph-crash" if not eager else "healthy", at,
               [fleet.by_name[n] for n in ro.created], rev.name)
    fleet.schedule(at, onset)


def long_context_starvation(fleet: FleetHooks, at: float, p: Params, rng: random.Random) -> None:
    share = float(p.get("share", rng.uniform(0.03, 0.05)))
    lo, hi = p.get("prompt_tokens", (5_000, 100_000))

    def onset(t: float) -> None:
        wl = fleet.workload
        total = sum(wl.weights)
        for i in range(len(wl.weights)):
            wl.weights[i] *= 1.0 - share
        wl.add_client(ClientSpec("rag-longdocs", "rag-long", share * total, max_tokens=1024,
                                 answer_tokens=300.0, doc_tokens=(int(lo), int(hi)), timeout_s=300.0))
        fleet.gateway.clients.append("rag-longdocs")
        _truth(fleet, "long-context-starvation", at, _live(fleet))
    fleet.schedule(at, onset)


def pod_outlier(fleet: FleetHooks, at: float, p: Params, rng: random.Random) -> None:
    factor = float(p.get("factor", rng.uniform(2.0, 4.0)))

    def onset(t: float) -> None:
        pod = _pick_pod(fleet, p, rng)
        pod.engine.slowdown *= factor
        for g in pod.gpus:
            g.clock_factor = 1.0 / factor
        _truth(fleet, "pod-outlier", at, [pod])
    fleet.schedule(at, onset)


_HANDLERS: dict[str, Callable[[FleetHooks, float, Params, random.Random], None]] = {
    "kv-capacity": kv_capacity,
    "engine-hang": engine_hang,
    "prefix-cache-drop": prefix_cache_drop,
    "retry-storm": retry_storm,
    "bad-model-rollout": bad_model_rollout,
    "gpu-ecc": gpu_ecc,
    "cuda-graph-crash": cuda_graph_crash,
    "long-context-starvation": long_context_starvation,
    "pod-outlier": pod_outlier,
}


def install(fleet: FleetHooks, spec: FaultSpec) -> None:
    _HANDLERS[spec.kind](fleet, spec.at, dict(spec.params), fleet.fault_rng)
