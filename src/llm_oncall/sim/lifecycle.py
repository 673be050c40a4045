"""What the cluster does to pods: create, load the model, become Ready, crash-loop, roll out, scale, log."""

from __future__ import annotations

import dataclasses
import math

from llm_oncall.sim import logs
from llm_oncall.sim.config import FleetConfig
from llm_oncall.sim.dcgm import Gpu
from llm_oncall.sim.engine import EngineConfig
from llm_oncall.sim.hooks import FleetHooks
from llm_oncall.sim.pods import CRASH_BACKOFF_S, CRASHLOOP, DOWN, READY, STARTING, TERMINATED, Pod, Revision, Rollout
from llm_oncall.sim.router import mix64


def cache_labels(cfg: FleetConfig) -> tuple[tuple[str, str], ...]:
    return engine_cache_labels(cfg.engine)


def engine_cache_labels(e: EngineConfig) -> tuple[tuple[str, str], ...]:
    """The labels of `vllm:cache_config_info` for one engine's configuration."""
    return (
        ("_block_size_resolved", "True"), ("block_size", str(e.block_size)), ("cache_dtype", "auto"),
        ("cache_hit_alignment_tokens", "None"), ("effective_attention_block_size", str(e.block_size)),
        ("enable_mamba_shared_prefix_checkpoint", "False"),
        ("enable_prefix_caching", str(e.enable_prefix_caching)),
        ("gpu_memory_utilization", str(e.gpu_memory_utilization)), ("hash_block_size", "None"),
        ("is_attention_free", "False"), ("kv_cache_dtype_skip_layers", "[]"), ("kv_cache_layout", "None"),
        ("kv_cache_max_concurrency", f"{e.num_gpu_blocks * e.block_size / e.max_model_len:.2f}"),
        ("kv_cache_memory_bytes", "None"), ("kv_cache_size_tokens", str(e.num_gpu_blocks * e.block_size)),
        ("kv_offloading_backend", "native"), ("kv_offloading_size", "None"),
        ("kv_sharing_fast_prefill", "False"), ("mamba_block_size", "None"), ("mamba_cache_dtype", "auto"),
        ("mamba_cache_mode", "none"), ("mamba_page_size_padded", "None"), ("mamba_ssm_cache_dtype", "float32"),
        ("num_cpu_blocks", "None"), ("num_gpu_blocks", str(e.num_gpu_blocks)),
        ("num_gpu_blocks_override", "None"), ("prefix_cache_retention_interval", "0"),
        ("prefix_caching_hash_algo", "sha256"), ("prefix_match_unit", "None"), ("replayssm_buffer_len", "16"),
        ("skip_page_size_padded", "None"), ("sliding_window", "None"), ("swa_bounded_replay", "True"),
        ("use_kda_recoverssm", "False"), ("use_replayssm", "False"), ("user_specified_block_size", "False"),
    )


def _node_name(i: int) -> str:
    return f"gpu-node-{i:02d}"


NO_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")


def schedulable(fleet: FleetHooks, node: str) -> bool:
    """A cordoned node (spec.unschedulable) or one with a NoSchedule/NoExecute taint takes no new pods (the
    vLLM pods tolerate none of them)."""
    if node in fleet.cordoned or node in fleet.rebooting:
        return False
    return not any(t.get("effect") in NO_SCHEDULE_EFFECTS for t in fleet.taints.get(node, ()))


def _place(fleet: FleetHooks, tp: int, group: int) -> tuple[str, list[Gpu]]:
    """Pods of one group share a node (their collectives run over its NVLink)."""
    cfg = fleet.cfg
    want_node = None
    for p in fleet.pods:
        if p.state != TERMINATED and p.group == f"{cfg.deployment}-g{group}":
            want_node = p.node
    nodes = [want_node] if want_node else [n for n in fleet.gpus if schedulable(fleet, n)]
    for node in nodes:
        free = [g for g in fleet.gpus[node] if not g.pod]
        if len(free) >= tp:
            return node, free[:tp]
    name = _node_name(len(fleet.gpus))
    gpus = []
    for i in range(cfg.gpus_per_node):
        h = mix64(mix64(fleet.seed) ^ (len(fleet.gpus) * 64 + i))
        gpus.append(Gpu(i, f"GPU-{h >> 32:08x}-{(h >> 16) & 0xFFFF:04x}-{h & 0xFFFF:04x}-"
                           f"{(h >> 48) & 0xFFFF:04x}-{h & 0xFFFFFFFFFFFF:012x}"))
    fleet.gpus[name] = gpus
    fleet.kernel_logs[name] = []
    return name, gpus[:tp]


def lws_pod_name(deployment: str, group: int, worker: int) -> str:
    """LeaderWorkerSet naming: the leader (= the group) is `<lws>-<group>`, workers `<lws>-<group>-<worker>`."""
    return f"{deployment}-{group}" if worker == 0 else f"{deployment}-{group}-{worker}"


def create_pod(fleet: FleetHooks, rev: Revision, warm: bool = False, t: float = 0.0,
               slot: tuple[int, int] | None = None) -> Pod:
    """`slot` = (group, worker) re-creates that member of a group (a LeaderWorkerSet recreating a group)."""
    cfg = fleet.cfg
    n = fleet.pods_created
    fleet.pods_created += 1
    group, worker = slot if slot is not None else (n // cfg.group_size, n % cfg.group_size)
    node, gpus = _place(fleet, cfg.tp, group)
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    name = f"{cfg.deployment}-{rev.name}-" + "".join(fleet.rng.choice(alphabet) for _ in range(5))
    if cfg.group_size > 1:  # groups sharing collectives run as a LeaderWorkerSet: its pod names
        name = lws_pod_name(cfg.deployment, group, worker)
    engine_cfg = cfg.engine if rev.prefix_caching else dataclasses.replace(cfg.engine, enable_prefix_caching=False)
    pod = Pod(name, n, node, gpus, rev, f"{cfg.deployment}-g{group}", engine_cfg, cfg.step, mix64(n + 1))
    for g in gpus:
        g.pod, g.namespace, g.container = name, cfg.namespace, "vllm"
    fleet.pods.append(pod)
    fleet.by_name[name] = pod
    if warm:
        start = -3600.0 - 37.0 * n
        pod.engine.reset(start)
        pod.process_start = start
        pod.state = READY
        pod.engine.now = t
    else:
        _start(fleet, pod, t)
    return pod


def _start(fleet: FleetHooks, pod: Pod, t: float) -> None:
    cfg = fleet.cfg
    pod.state = STARTING
    pod.state_at = t
    pod.process_start = t
    pod.engine.reset(t)
    pod.engine.frozen = False
    pod.hung = False
    pod.http_latency.__init__(pod.http_latency.bounds)  # type: ignore[misc]
    pod.http_latency_few.__init__(pod.http_latency_few.bounds)  # type: ignore[misc]
    pod.next_at = t + cfg.load_s * fleet.rng.uniform(0.9, 1.2)
    rev = pod.revision
    pod.log(logs.startup_lines(cfg.epoch + t, rev.vllm_version, cfg.model_name, cfg.tp, rev.enforce_eager,
                               cfg.engine.num_gpu_blocks))


def advance(fleet: FleetHooks, t: float) -> None:
    for pod in fleet.pods:
        if pod.state == READY or pod.state == TERMINATED or t < pod.next_at:
            continue
        rev = pod.revision
        if pod.state == STARTING:
            if rev.capture_crash and not rev.enforce_eager:
                pod.log(logs.capture_crash_lines(fleet.cfg.epoch + t))
                pod.crashes += 1
                pod.restarts += 1
                pod.state = CRASHLOOP
                pod.next_at = t + CRASH_BACKOFF_S[min(pod.crashes - 1, len(CRASH_BACKOFF_S) - 1)]
                fleet.record_event(t, "restart", f"{pod.name}: container vllm exited with code 1 (Error); "
                                   "Back-off restarting failed container", pod=pod.name, reason="Error")
                continue
            pod.state = READY
            pod.state_at = t
            epoch = fleet.cfg.epoch + t
            pod.log(logs.eager_ready_lines(epoch) if rev.enforce_eager else logs.ready_lines(epoch))
            _on_ready(fleet, pod, t)
        elif pod.state in (CRASHLOOP, DOWN):
            _start(fleet, pod, t)


def _on_ready(fleet: FleetHooks, pod: Pod, t: float) -> None:
    ro = fleet.rollout
    if ro is None or pod.revision is not ro.new or ro.canary_weight is not None:
        return
    old = [p for p in fleet.pods if p.state != TERMINATED and p.revision.name in ro.old]
    if old:
        terminate(fleet, old[0], t)
        if pod.name in ro.surge:
            ro.surge.remove(pod.name)  # it replaced an old replica: a replica now, not surge
    if len(old) > 1:
        ro.add(create_pod(fleet, ro.new, t=t))
    else:
        fleet.observed_generation = fleet.generation
        fleet.rollout = None


def terminate(fleet: FleetHooks, pod: Pod, t: float) -> None:
    pod.state = TERMINATED
    pod.state_at = t
    for g in pod.gpus:
        g.pod = g.namespace = g.container = ""
        g.busy = 0.0


def start_rollout(fleet: FleetHooks, rev: Revision, t: float, kind: str = "rollout",
                  canary_weight: float | None = None) -> Rollout:
    old = sorted({p.revision.name for p in fleet.pods if p.state != TERMINATED})
    fleet.generation += 1
    ro = Rollout(rev, old, kind, canary_weight)
    fleet.rollout = ro
    if canary_weight is not None:
        count = max(1, math.ceil(fleet.cfg.pods * canary_weight))
        for _ in range(count):
            ro.add(create_pod(fleet, rev, t=t))
        share = (1 - canary_weight) / len(old)
        fleet.weights = {**{r: fleet.weights.get(r, share) for r in old}, rev.name: canary_weight}
        fleet.observed_generation = fleet.generation
        detail = f"canary revision {rev.name} at weight {canary_weight:.2f} (model {rev.model_revision})"
    else:
        ro.add(create_pod(fleet, rev, t=t))
        fleet.observed_generation = fleet.generation
        detail = (f"rolling update to revision {rev.name} (vLLM {rev.vllm_version}, model {rev.model_revision}, "
                  f"enforce_eager={rev.enforce_eager})")
    fleet.record_event(t, kind, detail, revision=rev.name, vllm_version=rev.vllm_version)
    return ro


def crash(fleet: FleetHooks, pod: Pod, t: float, reason: str, oom: bool) -> None:
    if oom:
        pod.log(logs.oom_lines(fleet.cfg.epoch + t))
    lost = pod.engine.abort_all(t)
    pod.engine.reset(t)
    pod.state = DOWN
    pod.state_at = t
    pod.restarts += 1
    pod.next_at = t + 3.0
    pod.endpoint_until = t + fleet.cfg.endpoint_lag_s
    fleet.record_event(t, "restart", f"{pod.name}: container vllm restarted ({reason})", pod=pod.name,
                       reason=reason)
    fleet.connection_lost(pod, lost, t)


def scale(fleet: FleetHooks, replicas: int, t: float, why: str) -> None:
    # The pods a rollout surged in belong to the rollout, not to the replica count (Kubernetes scales
    # the Deployment's spec.replicas; maxSurge pods come on top), so scaling never deletes them.  A new
    # pod that already replaced an old one is a replica (see Rollout.surge): counting every pod the
    # rollout ever created as surge made the HPA re-create old-revision pods without end.
    surge = set(fleet.rollout.surge) if fleet.rollout is not None else set()
    live = [p for p in fleet.pods if p.state != TERMINATED and p.name not in surge]
    cur = len(live)
    if replicas == cur:
        return
    if replicas > cur:
        rev = fleet.revisions[-1] if fleet.rollout is None else live[0].revision
        for _ in range(replicas - cur):
            create_pod(fleet, rev, t=t)
    else:
        for p in sorted(live, key=lambda p: (p.state == READY, -p.index))[: cur - replicas]:
            terminate(fleet, p, t)
    fleet.desired_replicas = replicas
    fleet.record_event(t, "scale", f"{fleet.cfg.deployment}: {cur} -> {replicas} replicas ({why})",
                       replicas=replicas)


def autoscale(fleet: FleetHooks, t: float) -> None:
    ready = [p for p in fleet.pods if p.state == READY]
    if not ready:
        return
    if fleet.cfg.hpa.metric.endswith("waiting"):
        metric = sum(p.engine.num_waiting for p in ready) / len(ready)
    else:
        metric = sum(p.engine.num_running for p in ready) / len(ready)
    surge = set(fleet.rollout.surge) if fleet.rollout is not None else set()
    size = max(1, fleet.cfg.group_size)  # the HPA counts the workload's replicas (LeaderWorkerSet groups)
    cur = sum(1 for p in fleet.pods if p.state != TERMINATED and p.name not in surge) // size
    want = fleet.hpa.desired(t, cur, metric)
    if want != cur:
        scale(fleet, want * size, t, f"HPA {fleet.cfg.hpa.metric} avg {metric:.1f}")


def config_change(fleet: FleetHooks, t: float, policy: str, apply: bool = True) -> None:
    """Record the change; `apply=False` leaves the effect to a later reload (config propagation delay)."""
    old = fleet.router.policy
    if apply:
        fleet.router.policy = policy
    fleet.configmap_version += 1
    fleet.record_event(t, "config_change", f"configmap/router-config: routing policy {old} -> {policy}",
                       configmap="router-config", resource_version=str(fleet.configmap_version))


def update_gpus(fleet: FleetHooks, dt: float) -> None:
    tp = fleet.cfg.tp
    for p in fleet.pods:
        if p.state == TERMINATED:
            continue
        e = p.engine
        busy = min(1.0, (e.busy_s - p.busy_mark) / dt) if p.state == READY else (
            0.3 if p.state == STARTING else 0.0)
        p.busy_mark = e.busy_s
        for g in p.gpus:
            g.advance(dt, busy, tp)
    for gpus in fleet.gpus.values():
        for g in gpus:
            if not g.pod:
                g.advance(dt, 0.0, tp)


def log_stats(fleet: FleetHooks, t: float) -> None:
    iv = fleet.cfg.log_interval_s
    epoch = fleet.cfg.epoch + t
    for p in fleet.pods:
        if p.state != READY or p.hung:
            continue
        e = p.engine
        now = (e.prompt_tokens, e.generation_tokens(), e.prefix_queries, e.prefix_hits)
        last = p.last_stats
        if now[0] < last[0]:
            last = (0, 0, 0, 0)
        p.last_stats = now
        dq = now[2] - last[2]
        p.log(logs.stats_line(epoch, (now[0] - last[0]) / iv, (now[1] - last[1]) / iv, e.num_running,
                              e.num_waiting, e.kv_usage(), (now[3] - last[3]) / dq if dq else 0.0))
        for _, kind, total in e.events:
            if kind == "preempt" and total % 50 == 1:
                p.log(logs.preemption_line(epoch, total))
        e.events.clear()
