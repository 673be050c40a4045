"""Read what the cluster already knows — Node conditions and Node Warning Events set by node-problem-detector or
GPU-health agents — through the Kubernetes API (lightkube, the actions' client), as evidence for the round.

Nodes are cluster-scoped; NPD posts its Node Events in the `default` namespace (the Event's namespace for a
cluster-scoped object), so that is where they are listed. A 403 or an unreachable API costs the round nothing:
the reader says why once and the diagnosis goes on without this evidence.
"""

from __future__ import annotations

from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.evidence import nodeproblems
from llm_oncall.evidence.model import Finding

EVENTS_NAMESPACE = "default"


class NodeProblemReader:
    def __init__(self, kube: Kube, window_s: float = 600.0) -> None:
        self.kube = kube
        self.window_s = window_s
        self.problem: str | None = None

    def read(self, now: float) -> list[Finding]:
        try:
            nodes = self.kube.list("Node")
            events = self.kube.list("Event", EVENTS_NAMESPACE)
        except KubeError as exc:
            self.problem = f"node conditions/events not read: {exc.rbac or exc}"
            return []
        self.problem = None
        return nodeproblems.findings(nodes, events, now, self.window_s)
