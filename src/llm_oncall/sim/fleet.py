"""The simulated fleet: nodes, pods, gateway, router, autoscaler and clients on one virtual clock."""

from __future__ import annotations

import dataclasses
import gc
import heapq
import math
import random
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Callable
from itertools import islice
from typing import Any

from llm_oncall.sim import faults, kubestate, lifecycle, textgen
from llm_oncall.sim.autoscaler import Autoscaler
from llm_oncall.sim.clients import Job, Workload
from llm_oncall.sim.config import FaultSpec, FleetConfig, GroundTruth
from llm_oncall.sim.dcgm import DcgmOptions, Gpu, render_node
from llm_oncall.sim.exposition import PageContext, render_engine_page
from llm_oncall.sim.gateway import Gateway
from llm_oncall.sim.pods import READY, TERMINATED, Pod, Revision, Rollout
from llm_oncall.sim.request import Request
from llm_oncall.sim.router import Router, mix64

EVENT_LOG_KEPT = 5000
"""Cluster events the fleet remembers (a soak records a few per hour; readers take them incrementally)."""


class Fleet:
    def __init__(self, cfg: FleetConfig, seed: int = 0, fault: FaultSpec | None = None) -> None:
        self.cfg = cfg
        self.seed = seed
        self.rng = random.Random(seed)  # noqa: S311 - simulation, not cryptography
        self.traffic_rng = random.Random(mix64(seed * 7 + 1))  # noqa: S311 - simulation, not cryptography
        self.route_rng = random.Random(mix64(seed * 7 + 2))  # noqa: S311 - simulation, not cryptography
        self.quality_rng = random.Random(mix64(seed * 7 + 3))  # noqa: S311 - simulation, not cryptography
        self.fault_rng = random.Random(mix64(seed * 7 + 4))  # noqa: S311 - simulation, not cryptography
        self.now = 0.0
        self.event_log: deque[dict[str, Any]] = deque(maxlen=EVENT_LOG_KEPT)  # the most recent events
        self.events_recorded = 0  # events ever recorded: the sequence number of the next one
        self.event_counts: Counter[str] = Counter()  # events ever recorded, by kind
        self.gpus: dict[str, list[Gpu]] = {}
        self.kernel_logs: dict[str, list[str]] = {}
        # Pods that exist: not terminated, or terminated with requests still running (they finish). A terminated
        # pod leaves once idle: nothing reads it again, and a long run replaces pods without end.
        self.pods: list[Pod] = []
        self.by_name: dict[str, Pod] = {}
        self.pods_created = 0  # pods ever created: the next pod's index
        self.retired_finished = 0  # finished requests of pods that left `pods`
        self.revisions: list[Revision] = []
        self.weights: dict[str, float] = {}
        self.workload = Workload(cfg.clients, self.traffic_rng, cfg.system_prompt_tokens)
        self.workload.max_tokens_cap = cfg.max_tokens_cap
        self.router = Router(cfg.router, self.route_rng, cfg.long_prompt_threshold)
        self.gateway = Gateway([c.name for c in cfg.clients])
        self.gateway.max_tokens_cap = cfg.max_tokens_cap
        if cfg.rate_limit_rps is not None:
            for c in cfg.clients:
                self.gateway.set_rate_limit(c.name, cfg.rate_limit_rps)
        self.hpa = Autoscaler(cfg.hpa)
        self.live: dict[int, Job] = {}  # tag of an attempt in flight -> its job (`job.pod` serves it)
        # client timeouts, bucketed by tick: each tick sorts only the (deadline, tag) pairs that may be due
        self.deadlines: dict[int, list[tuple[float, int]]] = {}
        self._dl_lo = 0
        self._dl_scale = 1.0 / cfg.tick_s
        self.retries: list[tuple[float, int, Job]] = []
        self.retry_tokens: dict[int, float] = {}
        self.actions: list[tuple[float, int, Callable[[float], None]]] = []
        self.next_tag = 0
        self.seq = 0
        self.rate_factor = 1.0
        self.configmap_version = 41_207
        self.generation = 3
        self.observed_generation = 3
        self.rollout: Rollout | None = None
        self.desired_replicas = cfg.pods
        self.truth = GroundTruth("healthy", None)
        self.cordoned: set[str] = set()
        self.boots: dict[str, int] = {}
        """Reboots per node (its bootID changes with each)."""
        self.node_events: list[dict[str, Any]] = []
        """What a GPU-health agent (NPD's GPU checks) reported on a node: {t, node, reason, message}."""
        self.rebooting: set[str] = set()
        """Nodes rebooting: NotReady, no new pods."""
        self.taints: dict[str, list[dict[str, str]]] = {}
        self._next_log = cfg.log_interval_s
        self._next_gpu = 1.0
        self._endpoints: dict[str, list[Pod]] = {}
        self._merged: list[Pod] = []
        self._ep_sig: tuple[int | str, ...] = ()
        self._ep_version = 0
        base = Revision(self._hash(), cfg.vllm_version, "main", cfg.enforce_eager)
        self.revisions.append(base)
        for _ in range(cfg.pods):
            lifecycle.create_pod(self, base, warm=True)
        if cfg.long_pool_pods:
            for p in self.pods[-cfg.long_pool_pods:]:
                p.long_pool = True
        if cfg.routine_deploy_at is not None:
            self.schedule(cfg.routine_deploy_at, self._routine_deploy)
        self.workload.prewarm(self.offered_rate(0.0))
        self.fault = fault
        if fault is not None:
            faults.install(self, fault)

    # ---- public interface ----------------------------------------------------------------------------
    def advance(self, until: float) -> None:
        # The simulation allocates no reference cycles, but keeps ~10^5 live requests, jobs and sessions: with
        # the cyclic collector running, its generational scans of them cost ~20 % of a busy fleet's time. It is
        # paused while the clock runs and restored afterwards (reference counting still frees everything).
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            step = self.cfg.tick_s
            while self.now < until - 1e-9:
                t1 = min(self.now + step, until)
                self._tick(self.now, t1)
                self.now = t1
        finally:
            if paused:
                gc.enable()

    @property
    def ground_truth(self) -> GroundTruth:
        return self.truth

    def targets(self) -> dict[str, dict[str, str]]:
        cfg = self.cfg
        return {p.name: {"pod": p.name, "node": p.node, "revision": p.revision.name, "deployment": cfg.deployment,
                         "group": p.group, "namespace": cfg.namespace}
                for p in self.pods if p.state != TERMINATED}

    def nodes(self) -> list[str]:
        return list(self.gpus)

    def render_metrics(self, pod: str) -> str | None:
        p = self.by_name.get(pod)
        if p is None or p.state != READY:
            return None
        cfg = self.cfg
        ctx = PageContext(cfg.model_name, cfg.epoch + p.process_start, cfg.epoch + self.now, p.http_latency,
                          p.http_latency_few, cfg.metrics_flavor, lifecycle.engine_cache_labels(p.engine.cfg))
        return render_engine_page(p.engine, ctx)

    def render_dcgm(self, node: str) -> str:
        return render_node(node, self.gpus[node], DcgmOptions(self.cfg.dcgm_custom_csv))

    def render_gateway(self) -> str:
        return self.gateway.render() if self.cfg.gateway_metrics else ""

    def render_kube_state(self) -> str:
        return kubestate.render(self)

    def new_log_lines(self, pod: str) -> list[str]:
        p = self.by_name[pod]
        out, p.logs = p.logs, []
        return out

    def new_kernel_log_lines(self, node: str) -> list[str]:
        out = self.kernel_logs.get(node, [])
        self.kernel_logs[node] = []
        return out

    def events(self) -> list[dict[str, Any]]:
        """Copies of the remembered events (the last EVENT_LOG_KEPT), oldest first."""
        return [dict(e) for e in self.event_log]

    def events_since(self, seq: int) -> list[dict[str, Any]]:
        """Copies of the events recorded since sequence number `seq` (see `events_recorded`), oldest first.

        A reader that keeps `events_recorded` between calls gets every event once, without copying the log.
        """
        first = self.events_recorded - len(self.event_log)  # sequence number of event_log[0]
        return [dict(e) for e in islice(self.event_log, max(0, seq - first), None)]

    def complete(self, pod: str, prompt: str, max_tokens: int, temperature: float = 0.0) -> str:
        p = self.by_name.get(pod)
        if p is None or p.state != READY:
            raise ConnectionError(f"{pod}: connection refused")
        if p.hung:
            raise TimeoutError(f"{pod}: no response")
        p.completions += 1
        text = textgen.answer(p.revision.model_revision, prompt, max_tokens)
        if p.revision.bad_outputs:
            return textgen.garbage(text, str(p.completions))
        if p.wrong_rate > 0.0:
            u = mix64(mix64(p.key) ^ p.completions) / 2.0**64
            if u < p.wrong_rate:
                return textgen.subtly_wrong(text, f"{p.name}/{p.completions}")
        return text

    # ---- operator actions (used by drills to apply an emergency fix) --------------------------------
    def scale_to(self, replicas: int) -> None:
        lifecycle.scale(self, replicas, self.now, "manual")

    def set_rate_limit(self, client: str, rps: float | None) -> None:
        self.gateway.set_rate_limit(client, rps)

    def set_retry_limit(self, client: str, rps: float | None) -> None:
        self.gateway.set_retry_limit(client, rps)

    def set_max_tokens_cap(self, cap: int | None) -> None:
        self.gateway.max_tokens_cap = cap
        self.workload.max_tokens_cap = cap

    def set_router_policy(self, policy: str) -> None:
        lifecycle.config_change(self, self.now, policy)

    def restart_pods(self, pods: list[str]) -> None:
        for name in pods:
            pod = self.by_name.get(name)
            if pod is not None and pod.state != TERMINATED:
                lifecycle.crash(self, pod, self.now, "Killed", oom=False)

    # ---- internals -----------------------------------------------------------------------------------
    def schedule(self, t: float, fn: Callable[[float], None]) -> None:
        self.seq += 1
        heapq.heappush(self.actions, (t, self.seq, fn))

    def record_event(self, t: float, kind: str, detail: str, **extra: Any) -> None:
        self.event_log.append({"t": round(t, 3), "kind": kind, "detail": detail, **extra})
        self.events_recorded += 1
        self.event_counts[kind] += 1

    def _hash(self) -> str:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        return "".join(self.rng.choice(alphabet) for _ in range(9))

    def _routine_deploy(self, t: float) -> None:
        lifecycle.start_rollout(self, self.new_revision(), t, kind="deploy")

    def new_revision(self, **changes: Any) -> Revision:
        cur = self.revisions[-1]
        fields: dict[str, Any] = {"bad_outputs": False, "capture_crash": False, **changes}
        rev = dataclasses.replace(cur, name=self._hash(), **fields)
        self.revisions.append(rev)
        return rev

    def offered_rate(self, t: float) -> float:
        cfg = self.cfg
        rate = cfg.rate_per_pod * cfg.pods * self.rate_factor
        if cfg.diurnal_amplitude:
            rate *= 1.0 + cfg.diurnal_amplitude * math.sin(2 * math.pi * (t + cfg.diurnal_phase_s)
                                                           / cfg.diurnal_period_s)
        for s in cfg.spikes:
            if s.at <= t < s.at + s.duration_s:
                rate *= s.factor
        return rate

    def _tick(self, t0: float, t1: float) -> None:
        actions = self.actions
        while actions and actions[0][0] < t1:
            t, _, fn = heapq.heappop(actions)
            fn(max(t, t0))
        lifecycle.advance(self, t0)
        self._endpoints = {}
        merged: list[Pod] = []
        for p in self.pods:
            if p.in_endpoints(t0):
                self._endpoints.setdefault(p.revision.name, []).append(p)
                merged.append(p)
        self._merged = merged
        sig: tuple[int | str, ...] = (*(p.key for p in merged), *self._endpoints)
        if sig != self._ep_sig:
            self._ep_sig = sig
            self._ep_version += 1
        for job in self.workload.arrivals(t0, t1, self.offered_rate(t0)):
            self._dispatch(job, job.created)
        retries = self.retries
        while retries and retries[0][0] < t1:
            t, _, job = heapq.heappop(retries)
            self._dispatch(job, t)
        oom = self.cfg.oom_queue_limit
        retire = False
        for p in self.pods:
            e = p.engine
            if p.state == READY or (p.state == TERMINATED and e.running):
                e.tick(t0, t1)
                if e.finished:
                    self._drain(p)
                if oom is not None and len(e.waiting) > oom and p.state == READY:
                    lifecycle.crash(self, p, t1, "OOMKilled", oom=True)
            elif p.state == TERMINATED:
                retire = True
        if retire:
            self._retire_idle_terminated()
        self._timeouts(t1)
        if t1 >= self._next_gpu:
            lifecycle.update_gpus(self, t1 - self._next_gpu + 1.0)
            self._next_gpu += 1.0
        if t1 >= self._next_log:
            lifecycle.log_stats(self, t1)
            self._next_log += self.cfg.log_interval_s
        if self.hpa.due(t1):
            lifecycle.autoscale(self, t1)

    def _retire_idle_terminated(self) -> None:
        """Drop terminated pods with nothing running: no tick, render, log or endpoint reads them again.

        Their clients' attempts (if any still wait in the dropped queue) time out as before: jobs keep their pod.
        """
        keep: list[Pod] = []
        for p in self.pods:
            if p.state == TERMINATED and not p.engine.running:
                self.retired_finished += sum(p.engine.success.values())
                if self.by_name.get(p.name) is p:
                    del self.by_name[p.name]
            else:
                keep.append(p)
        self.pods = keep

    def finished_requests(self) -> int:
        """Requests the engines finished, including pods that have left."""
        return self.retired_finished + sum(sum(p.engine.success.values()) for p in self.pods)

    def _pick_revision(self) -> str | None:
        """Canary weights split traffic by revision; without them every ready pod is one Service pool."""
        eps = self._endpoints
        if not self.weights:
            return "" if self._merged else None
        live = [(r, w) for r, w in self.weights.items() if w > 0 and r in eps]
        if not live:
            return next(iter(eps), None)
        if len(live) == 1:
            return live[0][0]
        total = sum(w for _, w in live)
        u = self.route_rng.random() * total
        for r, w in live:
            u -= w
            if u <= 0:
                return r
        return live[-1][0]

    def _dispatch(self, job: Job, t: float) -> None:
        ci = job.client
        spec = self.workload.specs[ci]
        client = spec.name
        retry = job.attempts > 0
        if not retry and spec.retry == "backoff":
            tokens = self.retry_tokens.get(ci, 5.0) + spec.retry_budget  # earn_retry_budget, inlined
            self.retry_tokens[ci] = tokens if tokens < 20.0 else 20.0
        job.attempts += 1
        gateway = self.gateway
        if not gateway.admit(client, t, retry):
            self._fail(job, t)
            return
        rev = self._pick_revision() if self.weights else ("" if self._merged else None)
        if rev is None:
            gateway.record(client, "503", "none")
            self._fail(job, t)
            return
        pool = self._endpoints[rev] if rev else self._merged
        version = self._ep_version * 2 + (0 if rev else 1) if len(self._endpoints) <= 1 else -1
        pod = self.router.pick(pool, job.chain, job.prompt_len, version)
        if pod is None or pod.state != READY:  # Pod.serving()
            gateway.record(client, "502", pod.revision.name if pod else "none")
            self._fail(job, t)
            return
        self.next_tag += 1
        tag = self.next_tag
        out_len = job.out_len
        if pod.revision.bad_outputs and self.quality_rng.random() < 0.08:
            out_len = job.max_tokens  # degenerate loops run to the length limit
        if not pod.engine.submit_new((tag, t, job.prompt_len, out_len, job.max_tokens, job.chain, job.system_len,
                                      ci, tag)):
            gateway.record(client, "503", pod.revision.name)
            self._fail(job, t)
            return
        self.live[tag] = job
        job.pod = pod
        job.last_tag = tag
        d = t + spec.timeout_s
        b = int(d * self._dl_scale)
        if b < self._dl_lo:
            b = self._dl_lo
        bucket = self.deadlines.get(b)
        if bucket is None:
            self.deadlines[b] = [(d, tag)]
        else:
            bucket.append((d, tag))

    def _drain(self, p: Pod) -> None:
        e = p.engine
        for r in e.finished:
            lat = r.finish_at - r.arrival
            p.http_latency.observe(lat)
            p.http_latency_few.observe(lat)
            job = self.live.pop(r.tag, None)
            if job is None:
                continue  # the client already gave up; the engine did the work anyway
            rev = p.revision
            self.gateway.record(self.workload.specs[job.client].name, "200", rev.name, lat)
            self._quality(job, rev)
            self.workload.completed(job, r.finish_at, r.gen_before + 1 if r.out_len <= 1 else r.out_len)
        e.finished.clear()

    def _quality(self, job: Job, rev: Revision) -> None:
        q = self.quality_rng.random
        bad = rev.bad_outputs
        violation = q() < (0.22 if bad else 0.01)
        repetition = q() < (0.15 if bad else 0.003)
        control = q() < (0.06 if bad else 0.0005)
        feedback: str | None = None
        if q() < self.workload.specs[job.client].feedback_rate:
            feedback = "down" if q() < (0.2 if bad else 0.025) else "up"
        self.gateway.record_quality(rev.name, violation, repetition, control, feedback)

    def _timeouts(self, t1: float) -> None:
        """Attempts whose client timeout passed by t1 fail (504), in (deadline, tag) order."""
        buckets = self.deadlines
        hi = int(t1 * self._dl_scale)
        lo = self._dl_lo
        if hi < lo:
            hi = lo
        self._dl_lo = hi
        due: list[tuple[float, int]] = []
        for b in range(lo, hi + 1):
            bucket = buckets.pop(b, None)
            if bucket:
                due += bucket
        if not due:
            return
        due.sort()
        if due[-1][0] > t1:  # the last bucket straddles t1: keep what is not due yet
            cut = bisect_right(due, (t1, math.inf))
            buckets[hi] = due[cut:]
            del due[cut:]
        live_pop = self.live.pop
        specs = self.workload.specs
        record = self.gateway.record
        fail = self._fail
        disconnect = self.cfg.abort_on_disconnect
        for t, tag in due:
            job = live_pop(tag, None)
            if job is None:
                continue
            pod = job.pod
            if disconnect and pod is not None:
                pod.engine.client_gone(tag)
            record(specs[job.client].name, "504", pod.revision.name if pod is not None else "none")
            fail(job, t)

    def connection_lost(self, pod: Pod, requests: list[Request], t: float) -> None:
        for r in requests:
            job = self.live.pop(r.tag, None)
            if job is not None:
                self.gateway.record(self.workload.specs[job.client].name, "502", pod.revision.name)
                self._fail(job, t)

    def _fail(self, job: Job, t: float) -> None:
        spec = self.workload.specs[job.client]
        rng = self.traffic_rng
        if spec.retry == "immediate" and job.attempts < 40:
            self.seq += 1
            heapq.heappush(self.retries, (t + rng.uniform(0.05, 0.3), self.seq, job))
            return
        if spec.retry == "backoff" and job.attempts < spec.max_attempts:
            tokens = self.retry_tokens.get(job.client, 5.0)
            if tokens >= 1.0:
                self.retry_tokens[job.client] = tokens - 1.0
                delay = min(30.0, 0.5 * 2.0 ** (job.attempts - 1)) * rng.uniform(0.5, 1.5)
                self.seq += 1
                heapq.heappush(self.retries, (t + delay, self.seq, job))
                return
        self.workload.abandoned(job, t)

    def earn_retry_budget(self, client: int, amount: float) -> None:
        self.retry_tokens[client] = min(20.0, self.retry_tokens.get(client, 5.0) + amount)
