"""kube-state-metrics series for the fleet's pods, deployment and router ConfigMap."""

from __future__ import annotations

from llm_oncall.sim.exposition import fmt
from llm_oncall.sim.hooks import FleetHooks
from llm_oncall.sim.pods import CRASHLOOP, READY, TERMINATED


def render(fleet: FleetHooks) -> str:
    cfg = fleet.cfg
    ns = cfg.namespace
    pods = [p for p in fleet.pods if p.state != TERMINATED]
    out: list[str] = []

    def family(name: str, kind: str, help_: str, rows: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{{{lab}}} {fmt(v)}" for lab, v in rows)

    family("kube_pod_info", "gauge", "[STABLE] Information about pod.", [
        (f'namespace="{ns}",pod="{p.name}",node="{p.node}",created_by_kind="ReplicaSet",'
         f'created_by_name="{cfg.deployment}-{p.revision.name}"', 1.0) for p in pods])
    family("kube_pod_container_status_restarts_total", "counter", "[STABLE] The number of container restarts "
           "per container.", [(f'namespace="{ns}",pod="{p.name}",container="vllm"', float(p.restarts))
                              for p in pods])
    rows: list[tuple[str, float]] = []
    for p in pods:
        ready = p.state == READY
        for cond, v in (("true", ready), ("false", not ready), ("unknown", False)):
            rows.append((f'namespace="{ns}",pod="{p.name}",condition="{cond}"', 1.0 if v else 0.0))
    family("kube_pod_status_ready", "gauge", "[STABLE] Describes whether the pod is ready to serve requests.",
           rows)
    family("kube_pod_container_status_waiting_reason", "gauge", "[STABLE] Describes the reason the container is "
           "currently in waiting state.", [
               (f'namespace="{ns}",pod="{p.name}",container="vllm",reason="CrashLoopBackOff"', 1.0)
               for p in pods if p.state == CRASHLOOP])
    dep = f'namespace="{ns}",deployment="{cfg.deployment}"'
    family("kube_deployment_metadata_generation", "gauge", "[STABLE] Sequence number representing a specific "
           "generation of the desired state.", [(dep, float(fleet.generation))])
    family("kube_deployment_status_observed_generation", "gauge", "[STABLE] The generation observed by the "
           "deployment controller.", [(dep, float(fleet.observed_generation))])
    family("kube_deployment_spec_replicas", "gauge", "[STABLE] Number of desired pods for a deployment.",
           [(dep, float(fleet.desired_replicas))])
    family("kube_deployment_status_replicas_available", "gauge", "[STABLE] The number of available replicas "
           "per deployment.", [(dep, float(sum(1 for p in pods if p.state == READY)))])
    family("kube_configmap_metadata_resource_version", "gauge", "Resource version representing a specific "
           "version of the configmap.", [(f'namespace="{ns}",configmap="router-config"',
                                          float(fleet.configmap_version))])
    return "\n".join(out) + "\n"
