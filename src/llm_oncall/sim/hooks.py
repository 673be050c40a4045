"""What the fleet's parts (lifecycle, faults, kube-state rendering) see of the fleet: a protocol, so they
depend on the fleet's state and hooks, not on the `Fleet` class that wires them together."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol

from llm_oncall.sim.autoscaler import Autoscaler
from llm_oncall.sim.clients import Workload
from llm_oncall.sim.config import FleetConfig, GroundTruth
from llm_oncall.sim.dcgm import Gpu
from llm_oncall.sim.gateway import Gateway
from llm_oncall.sim.pods import Pod, Revision, Rollout
from llm_oncall.sim.request import Request
from llm_oncall.sim.router import Router


class FleetHooks(Protocol):
    cfg: FleetConfig
    seed: int
    rng: random.Random
    fault_rng: random.Random
    pods: list[Pod]
    by_name: dict[str, Pod]
    pods_created: int
    revisions: list[Revision]
    weights: dict[str, float]
    gpus: dict[str, list[Gpu]]
    kernel_logs: dict[str, list[str]]
    workload: Workload
    router: Router
    gateway: Gateway
    hpa: Autoscaler
    rollout: Rollout | None
    rate_factor: float
    configmap_version: int
    generation: int
    observed_generation: int
    desired_replicas: int
    truth: GroundTruth
    cordoned: set[str]
    node_events: list[dict[str, Any]]
    """A GPU-health agent's reports per node ({t, node, reason, message}): Node conditions and Warning Events."""
    rebooting: set[str]
    """Nodes rebooting (NotReady): no new pods land there."""
    """Nodes with spec.unschedulable (cordoned): no new pods land there."""
    taints: dict[str, list[dict[str, str]]]
    """Node taints as the Kubernetes API holds them (`key`, `value`, `effect`, `timeAdded`)."""

    def schedule(self, t: float, fn: Callable[[float], None]) -> None: ...

    def record_event(self, t: float, kind: str, detail: str, **extra: Any) -> None: ...

    def new_revision(self, **changes: Any) -> Revision: ...

    def connection_lost(self, pod: Pod, requests: list[Request], t: float) -> None: ...
