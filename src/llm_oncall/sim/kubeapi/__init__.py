"""The simulated fleet as a Kubernetes cluster: the API subset the actions need, answering like a kube-apiserver."""

from llm_oncall.sim.kubeapi.cluster import KubeCluster
from llm_oncall.sim.kubeapi.server import FaultRule, KubeApiServer

__all__ = ["FaultRule", "KubeApiServer", "KubeCluster"]
