"""A HorizontalPodAutoscaler on a per-pod average of a custom metric (e.g. vllm:num_requests_waiting)."""

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


class Autoscaler:
    def __init__(self, cfg: HpaConfig) -> None:
        self.cfg = cfg
        self.history: deque[tuple[float, int]] = deque()
        self.next_eval = cfg.period_s

    def due(self, t: float) -> bool:
        if not self.cfg.enabled or t < self.next_eval:
            return False
        self.next_eval = t + self.cfg.period_s
        return True

    def desired(self, t: float, current: int, metric_avg: float) -> int:
        cfg = self.cfg
        ratio = metric_avg / cfg.target_value if cfg.target_value > 0 else 1.0
        want = current if abs(ratio - 1.0) <= cfg.tolerance else math.ceil(current * ratio)
        want = max(cfg.min_replicas, min(cfg.max_replicas, want))
        self.history.append((t, want))
        while self.history and self.history[0][0] < t - cfg.scale_down_stabilization_s:
            self.history.popleft()
        if want < current:
            # scale down only to the highest recommendation of the stabilization window
            want = min(current, max(w for _, w in self.history))
        return want
