"""A HorizontalPodAutoscaler on a per-pod average of a custom metric (e.g. vllm:num_requests_waiting).

It decides as the HPA controller does (kubernetes pkg/controller/podautoscaler `reconcileAutoscaler`): replicas
below `minReplicas` go straight to it and above `maxReplicas` straight to it (no behavior policy applies);
otherwise the metric's ratio to its target (within a tolerance) recommends a count, scale-down is held to the
highest recommendation of its stabilization window and scale-up to the lowest of its own (if set), an optional
scale-up policy (`behavior.scaleUp`: at most N pods per period) limits growth, and the result is clamped to
[min, max]. Its bounds are mutable: the API's `autoscaling/v2` HorizontalPodAutoscaler object
(sim/kubeapi/autoscaling.py) is derived from them, and a write to that object sets them. All counts are in the
workload's replicas (LeaderWorkerSet groups, not pods).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class HpaConfig:
    enabled: bool = False
    min_replicas: int = 2
    max_replicas: int = 16
    metric: str = "vllm:num_requests_running"  # or "vllm:num_requests_waiting"
    target_value: float = 40.0
    period_s: float = 15.0
    scale_down_stabilization_s: float = 300.0
    tolerance: float = 0.1
    scale_up_pods: int | None = None
    """`behavior.scaleUp.policies: [{type: Pods, value: N, periodSeconds: scale_up_period_s}]` (None: no policy)."""
    scale_up_period_s: float = 60.0
    scale_up_stabilization_s: float = 0.0
    """`behavior.scaleUp.stabilizationWindowSeconds`: scale up only to the lowest recommendation of the window."""
    keda: bool = False
    """The HPA is KEDA's: a ScaledObject (keda.sh/v1alpha1) owns it and sets its bounds."""


@dataclass
class Condition:
    status: str
    reason: str
    message: str
    since: float


class Autoscaler:
    def __init__(self, cfg: HpaConfig) -> None:
        self.cfg = cfg
        self.enabled = cfg.enabled
        self.min_replicas = cfg.min_replicas
        self.max_replicas = cfg.max_replicas
        self.history: deque[tuple[float, int]] = deque()
        self.scale_ups: deque[tuple[float, int]] = deque()
        """(t, replicas added) of this autoscaler's own scale-ups (the scale-up policy's period counts them)."""
        self.next_eval = cfg.period_s
        self.metric_avg: float | None = None
        self.current: int | None = None
        self.desired_replicas: int | None = None
        self.last_scale_t: float | None = None
        self.conditions: dict[str, Condition] = {}
        self.generation = 1
        """The HorizontalPodAutoscaler object's metadata.generation: +1 per change of its bounds."""

    def set_bounds(self, min_replicas: int, max_replicas: int) -> None:
        """What a write to the HorizontalPodAutoscaler object changes (the API validated min ≤ max)."""
        bounds = (int(min_replicas), int(max_replicas))
        if bounds != (self.min_replicas, self.max_replicas):
            self.min_replicas, self.max_replicas = bounds
            self.generation += 1

    def due(self, t: float) -> bool:
        if not self.enabled or t < self.next_eval:
            return False
        self.next_eval = t + self.cfg.period_s
        return True

    def desired(self, t: float, current: int, metric_avg: float) -> int:
        cfg = self.cfg
        lo, hi = self.min_replicas, self.max_replicas
        self.metric_avg, self.current = metric_avg, current
        ratio = metric_avg / cfg.target_value if cfg.target_value > 0 else 1.0
        raw = current if abs(ratio - 1.0) <= cfg.tolerance else math.ceil(current * ratio)
        want = max(lo, min(hi, raw))
        self.history.append((t, want))
        while self.history and self.history[0][0] < t - max(cfg.scale_down_stabilization_s,
                                                            cfg.scale_up_stabilization_s):
            self.history.popleft()
        limited = ("False", "DesiredWithinRange", "the desired count is within the acceptable range")
        if current < lo:
            want = lo  # "Current number of replicas below Spec.MinReplicas": straight there, no policy
            limited = ("True", "TooFewReplicas", "the desired replica count is less than the minimum replica count")
        elif current > hi:
            want = hi
            limited = ("True", "TooManyReplicas", "the desired replica count is more than the maximum replica count")
        else:
            if want < current:
                # scale down only to the highest recommendation of the stabilization window
                want = min(current, max(w for at, w in self.history if at >= t - cfg.scale_down_stabilization_s))
            if want > current and cfg.scale_up_stabilization_s > 0:
                # scale up only to the lowest recommendation of its stabilization window
                want = max(current, min(w for at, w in self.history if at >= t - cfg.scale_up_stabilization_s))
            if want > current and cfg.scale_up_pods is not None:
                while self.scale_ups and self.scale_ups[0][0] <= t - cfg.scale_up_period_s:
                    self.scale_ups.popleft()
                limit = current - sum(n for _, n in self.scale_ups) + cfg.scale_up_pods
                if want > limit:
                    want = max(current, limit)
                    limited = ("True", "ScaleUpLimit", "the desired replica count is increasing faster than the "
                                                       "maximum scale rate")
            if raw < lo and want == lo:
                limited = ("True", "TooFewReplicas", "the desired replica count is less than the minimum replica "
                                                     "count")
            elif raw > hi and want == hi:
                limited = ("True", "TooManyReplicas", "the desired replica count is more than the maximum replica "
                                                      "count")
        if want > current:
            self.scale_ups.append((t, want - current))
        if want != current:
            self.last_scale_t = t
        self.desired_replicas = want
        self._condition("AbleToScale", "True", "SucceededRescale" if want != current else "ReadyForNewScale",
                        f"the HPA controller was able to update the target scale to {want}" if want != current
                        else "recommended size matches current size", t)
        self._condition("ScalingActive", "True", "ValidMetricFound",
                        f"the HPA was able to successfully calculate a replica count from pods metric {cfg.metric}",
                        t)
        self._condition("ScalingLimited", *limited, t)
        return want

    def _condition(self, kind: str, status: str, reason: str, message: str, t: float) -> None:
        old = self.conditions.get(kind)
        since = old.since if old is not None and old.status == status else t
        self.conditions[kind] = Condition(status, reason, message, since)
