"""Pods, revisions and their lifecycle (model load, readiness, crash loops, restarts)."""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_oncall.sim.dcgm import Gpu
from llm_oncall.sim.engine import Engine, EngineConfig, StepModel
from llm_oncall.sim.histograms import HTTP_FEW_BUCKETS, HTTP_HIGHR_BUCKETS, Histogram

STARTING, READY, CRASHLOOP, DOWN, TERMINATED = "starting", "ready", "crashloop", "down", "terminated"
CRASH_BACKOFF_S = (10.0, 20.0, 40.0, 80.0, 160.0, 300.0)


@dataclass(frozen=True)
class Revision:
    name: str  # pod-template hash, e.g. "7d9f8c6b5"
    vllm_version: str
    model_revision: str
    enforce_eager: bool = False
    bad_outputs: bool = False
    capture_crash: bool = False  # this vLLM build fails CUDA-graph capture on this hardware
    prefix_caching: bool = True  # the revision's engine args (False: --no-enable-prefix-caching)


class Pod:
    def __init__(self, name: str, index: int, node: str, gpus: list[Gpu], revision: Revision, group: str,
                 engine_cfg: EngineConfig, step: StepModel, key: int) -> None:
        self.name = name
        self.index = index
        self.node = node
        self.gpus = gpus
        self.revision = revision
        self.group = group
        self.key = key
        self.long_pool = False  # the `length_pools` routing policy's long pool (FleetConfig.long_pool_pods)
        # llm-d's `llm-d.ai/context-length-range` label, parsed: the prompt lengths this pod accepts; None (no
        # label) accepts any length, as the context-length-aware filter treats an unlabelled endpoint
        self.context_range: tuple[int, int] | None = None
        slowdown = step.eager_factor if revision.enforce_eager else 1.0
        self.engine = Engine(engine_cfg, step, 0.0, slowdown)
        self.state = STARTING
        self.state_at = 0.0
        self.next_at = 0.0  # time of the next lifecycle transition
        self.process_start = 0.0
        self.restarts = 0
        self.crashes = 0
        self.endpoint_until = 0.0
        self.logs: list[str] = []
        self.hung = False
        self.wrong_rate = 0.0
        self.completions = 0
        self.busy_mark = 0.0
        self.last_stats = (0, 0, 0, 0)  # prompt, generation, queries, hits at the last stats line
        self.http_latency = Histogram(HTTP_HIGHR_BUCKETS)
        self.http_latency_few = Histogram(HTTP_FEW_BUCKETS)

    @property
    def load(self) -> int:
        return self.engine.num_waiting + self.engine.num_running

    @property
    def ready(self) -> bool:
        return self.state == READY

    def serving(self) -> bool:
        """Accepts connections (a hung engine still does; a down or loading one does not)."""
        return self.state == READY

    def in_endpoints(self, t: float) -> bool:
        return self.state == READY or (self.state != TERMINATED and t < self.endpoint_until)

    def log(self, lines: list[str] | str) -> None:
        if isinstance(lines, str):
            self.logs.append(lines)
        else:
            self.logs.extend(lines)
        if len(self.logs) > 5000:
            del self.logs[:1000]


@dataclass
class Rollout:
    new: Revision
    old: list[str]  # revision names being replaced
    kind: str
    canary_weight: float | None = None
    created: list[str] = field(default_factory=list)
    surge: list[str] = field(default_factory=list)
    """Pods on top of the replica count: canaries, and the one new pod of a rolling update not yet Ready.

    A rolling update's new pod stops being surge once it is Ready and an old pod is terminated for it: from
    then on it is one of the Deployment's replicas (counted by scaling and the HPA)."""

    def add(self, pod: Pod) -> None:
        self.created.append(pod.name)
        self.surge.append(pod.name)
