"""The fleet's autoscaler as the API shows it: an `autoscaling/v2` HorizontalPodAutoscaler on the workload, and
when KEDA runs it, the `keda.sh/v1alpha1` ScaledObject that owns that HPA.

The HPA is derived from the fleet's autoscaler (sim/autoscaler.py: its bounds, last recommendation, metric and
conditions); a write to its `spec.minReplicas` / `spec.maxReplicas` sets the autoscaler's bounds, validated as
kube-apiserver validates them, and the autoscaler's next sync acts on them. Under KEDA the ScaledObject is a
stored object (as a user applied it) and the KEDA operator owns the HPA: it names it `keda-hpa-<scaledobject>`,
sets its owner reference and labels, and on its next reconcile (the fleet's next tick: it watches the HPA) puts
the ScaledObject's `minReplicaCount`/`maxReplicaCount` back into it — a direct write to KEDA's HPA does not last.
"""

from __future__ import annotations

from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi.identity import object_meta, owner_ref, ts, uid_of
from llm_oncall.sim.kubeapi.model import BY_KIND, ApiStatus, Key, invalid
from llm_oncall.sim.kubeapi.templates import lws_mode
from llm_oncall.sim.pods import TERMINATED

KEDA_API = "keda.sh/v1alpha1"
KEDA_LABEL = "scaledobject.keda.sh/name"
HPA_KEY = "horizontalpodautoscalers.autoscaling"
SO_KEY = "scaledobjects.keda.sh"


def scale_target(fleet: Fleet) -> dict[str, str]:
    if lws_mode(fleet):
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": fleet.cfg.deployment}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": fleet.cfg.deployment}


def hpa_name(fleet: Fleet) -> str:
    return f"keda-hpa-{fleet.cfg.deployment}" if fleet.cfg.hpa.keda else fleet.cfg.deployment


def metric_name(metric: str) -> str:
    """The name prometheus-adapter serves a vLLM series under in the custom metrics API (colons are not allowed
    there: production-stack's adapter maps `vllm:num_requests_waiting` to `vllm_num_requests_waiting`)."""
    return metric.replace(":", "_")


def quantity(v: float) -> str:
    """A resource.Quantity as the API prints it (`40`, `18500m`)."""
    milli = round(v * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def replicas(fleet: Fleet) -> int:
    surge = set(fleet.rollout.surge) if fleet.rollout is not None else set()
    live = sum(1 for p in fleet.pods if p.state != TERMINATED and p.name not in surge)
    return live // max(1, fleet.cfg.group_size)


def scaled_object(fleet: Fleet) -> dict[str, Any]:
    """The ScaledObject a KEDA user applied for the fleet (seeded into the store when the fleet's HPA is KEDA's)."""
    cfg, h = fleet.cfg, fleet.cfg.hpa
    target = scale_target(fleet)
    ref = {"name": target["name"]} if target["kind"] == "Deployment" else target
    return {"apiVersion": KEDA_API, "kind": "ScaledObject",
            "metadata": {"name": cfg.deployment, "namespace": cfg.namespace, "generation": 1,
                         "labels": {"app": cfg.deployment}},
            "spec": {"scaleTargetRef": ref, "minReplicaCount": h.min_replicas, "maxReplicaCount": h.max_replicas,
                     "pollingInterval": int(h.period_s), "cooldownPeriod": int(h.scale_down_stabilization_s),
                     "triggers": [{"type": "prometheus", "metadata": {
                         "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
                         "query": f'avg(sum by (pod) ({h.metric}{{namespace="{cfg.namespace}"}}))',
                         "threshold": quantity(h.target_value)}}]}}


class Keda:
    """The KEDA operator: the ScaledObject's bounds into the fleet's autoscaler (its HPA) when the ScaledObject
    changes or its HPA does; a deleted ScaledObject takes its HPA with it."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    def reconcile(self, store: dict[Key, dict[str, Any]], force: bool = False) -> dict[str, Any] | None:
        fleet = self.fleet
        if not fleet.cfg.hpa.keda:
            return None
        so = store.get((SO_KEY, fleet.cfg.namespace, fleet.cfg.deployment))
        if so is None:
            fleet.hpa.enabled = False  # KEDA deletes the HPA of a deleted ScaledObject
            return None
        if force:
            spec = so.get("spec") or {}
            lo = max(1, int(spec.get("minReplicaCount", 0) or 0))
            hi = int(spec.get("maxReplicaCount", 100) or 100)
            fleet.hpa.enabled = True
            if (lo, hi) != (fleet.hpa.min_replicas, fleet.hpa.max_replicas):
                fleet.hpa.set_bounds(lo, hi)
        return so

    def watch(self, store: dict[Key, dict[str, Any]]) -> None:
        """KEDA watches the HPAs it owns: a change to one is reconciled on the fleet's next tick, before the HPA
        controller can act on it."""
        def run(_t: float) -> None:
            self.reconcile(store, force=True)
        self.fleet.schedule(self.fleet.now, run)


def hpa(fleet: Fleet, so: dict[str, Any] | None) -> dict[str, Any] | None:
    a = fleet.hpa
    if not a.enabled:
        return None
    cfg, h = fleet.cfg, fleet.cfg.hpa
    name = hpa_name(fleet)
    labels = {"app": cfg.deployment}
    owner = None
    if so is not None:
        labels = {"app.kubernetes.io/managed-by": "keda-operator", "app.kubernetes.io/name": name,
                  "app.kubernetes.io/part-of": so["metadata"]["name"], "app.kubernetes.io/version": "2.17.0",
                  KEDA_LABEL: so["metadata"]["name"]}
        owner = owner_ref(KEDA_API, "ScaledObject", so["metadata"]["name"], so["metadata"]["uid"])
    metric = {"name": metric_name(h.metric)}
    spec: dict[str, Any] = {
        "scaleTargetRef": scale_target(fleet), "minReplicas": a.min_replicas, "maxReplicas": a.max_replicas,
        "metrics": [{"type": "Pods", "pods": {"metric": metric,
                                              "target": {"type": "AverageValue",
                                                         "averageValue": quantity(h.target_value)}}}]}
    if h.scale_up_pods is not None:
        spec["behavior"] = {
            "scaleUp": {"stabilizationWindowSeconds": int(h.scale_up_stabilization_s), "selectPolicy": "Max",
                        "policies": [{"type": "Pods", "value": h.scale_up_pods,
                                      "periodSeconds": int(h.scale_up_period_s)}]},
            "scaleDown": {"stabilizationWindowSeconds": int(h.scale_down_stabilization_s), "selectPolicy": "Max",
                          "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}
    status: dict[str, Any] = {"observedGeneration": a.generation, "currentReplicas": replicas(fleet),
                              "desiredReplicas": a.desired_replicas if a.desired_replicas is not None
                              else replicas(fleet)}
    if a.last_scale_t is not None:
        status["lastScaleTime"] = ts(fleet, a.last_scale_t)
    if a.metric_avg is not None:
        status["currentMetrics"] = [{"type": "Pods", "pods": {"metric": metric,
                                                              "current": {"averageValue": quantity(a.metric_avg)}}}]
    if a.conditions:
        status["conditions"] = [{"type": k, "status": c.status, "reason": c.reason, "message": c.message,
                                 "lastTransitionTime": ts(fleet, c.since)} for k, c in a.conditions.items()]
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": object_meta(name, cfg.namespace, labels, None, owner)
            | {"uid": uid_of("hpa", name), "generation": a.generation},
            "spec": spec, "status": status}


def validate_hpa(name: str, spec: dict[str, Any]) -> list[str]:
    """kube-apiserver's checks on the bounds (pkg/apis/autoscaling/validation)."""
    errors = []
    lo, hi = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if not isinstance(lo, int) or isinstance(lo, bool) or lo < 1:
        errors.append(f"spec.minReplicas: Invalid value: {lo!r}: must be greater than or equal to 1")
    if not isinstance(hi, int) or isinstance(hi, bool) or hi < 1:
        errors.append(f"spec.maxReplicas: Invalid value: {hi!r}: must be greater than 0")
    elif isinstance(lo, int) and hi < lo:
        errors.append(f"spec.maxReplicas: Invalid value: {hi}: must be greater than or equal to `minReplicas`")
    return errors


def validate_scaled_object(name: str, obj: dict[str, Any]) -> None:
    """KEDA's admission webhook: a target, and minReplicaCount ≤ maxReplicaCount."""
    spec = obj.get("spec") or {}
    rt = BY_KIND["ScaledObject"]
    if not (spec.get("scaleTargetRef") or {}).get("name"):
        raise invalid(rt, name, ["spec.scaleTargetRef.name: Required value"])
    lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (lo, hi)):
        raise invalid(rt, name, ["spec: minReplicaCount and maxReplicaCount must be non-negative integers"])
    if lo > hi:
        raise ApiStatus(403, f'admission webhook "vscaledobject.kb.io" denied the request: MinReplicaCount={lo} '
                        f"must be less than MaxReplicaCount={hi}", reason="Forbidden")
