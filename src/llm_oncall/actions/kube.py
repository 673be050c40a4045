"""The Kubernetes API through lightkube — the same code for a real cluster and the simulator's API.

Objects are handled as plain dicts (what the API returns). Errors become `KubeError` with the HTTP code, the
Status reason and, for 403, the RBAC verb and resource that are missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler
from lightkube.resources.batch_v1 import Job
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Event, Namespace, Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.types import CascadeType, PatchType

from llm_oncall.actions.model import check_label_key, check_label_value, check_name

LeaderWorkerSet = create_namespaced_resource("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet",
                                             "leaderworkersets")
HTTPRoute = create_namespaced_resource("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes")
BackendTrafficPolicy = create_namespaced_resource("gateway.envoyproxy.io", "v1alpha1", "BackendTrafficPolicy",
                                                  "backendtrafficpolicies")
InferenceObjective = create_namespaced_resource("inference.networking.x-k8s.io", "v1alpha2", "InferenceObjective",
                                                "inferenceobjectives")

RESOURCES: dict[str, tuple[Any, str, str, bool]] = {
    # kind: (lightkube resource, API group, plural, custom resource)
    "Namespace": (Namespace, "", "namespaces", False), "Node": (Node, "", "nodes", False),
    "Pod": (Pod, "", "pods", False), "ConfigMap": (ConfigMap, "", "configmaps", False),
    "Event": (Event, "", "events", False), "Deployment": (Deployment, "apps", "deployments", False),
    "ReplicaSet": (ReplicaSet, "apps", "replicasets", False),
    "PodDisruptionBudget": (PodDisruptionBudget, "policy", "poddisruptionbudgets", False),
    "Lease": (Lease, "coordination.k8s.io", "leases", False),
    "LeaderWorkerSet": (LeaderWorkerSet, "leaderworkerset.x-k8s.io", "leaderworkersets", True),
    "HTTPRoute": (HTTPRoute, "gateway.networking.k8s.io", "httproutes", True),
    "BackendTrafficPolicy": (BackendTrafficPolicy, "gateway.envoyproxy.io", "backendtrafficpolicies", True),
    "InferenceObjective": (InferenceObjective, "inference.networking.x-k8s.io", "inferenceobjectives", True),
    "HorizontalPodAutoscaler": (HorizontalPodAutoscaler, "autoscaling", "horizontalpodautoscalers", False),
    "Job": (Job, "batch", "jobs", False),
}
CLUSTER_SCOPED = frozenset({"Namespace", "Node"})


@dataclass
class KubeError(Exception):
    code: int
    reason: str
    message: str
    verb: str
    resource: str
    namespace: str = ""

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    @property
    def rbac(self) -> str | None:
        """For 403: the RBAC rule that is missing, as a Role would say it."""
        if self.code != 403:
            return None
        group, _, res = self.resource.partition("/")
        where = f" in namespace {self.namespace}" if self.namespace else " (cluster-scoped: a ClusterRole)"
        return f"missing RBAC: verbs=[{self.verb}] apiGroups=[\"{group}\"] resources=[{res}]{where}"

    @property
    def transient(self) -> bool:
        return self.code in (0, 500, 502, 503, 504)


class Kube:
    """A lightkube client with the verbs the actions use; every name is validated before it reaches a path."""

    def __init__(self, kubeconfig: Path | None = None, namespace: str | None = None, client: Client | None = None,
                 timeout_s: float = 5.0, field_manager: str = "llm-oncall") -> None:
        if client is None:
            config = KubeConfig.from_file(kubeconfig) if kubeconfig is not None else None
            client = Client(config, namespace=namespace, timeout=httpx2.Timeout(timeout_s),
                            field_manager=field_manager, trust_env=False)
        self.client = client
        self.namespace = namespace or client.namespace

    def close(self) -> None:
        self.client.close()

    def _res(self, kind: str) -> tuple[Any, str]:
        res, group, plural, _ = RESOURCES[kind]
        return res, f"{group}/{plural}"

    def _call(self, verb: str, kind: str, ns: str, fn: Any, sub: str = "") -> Any:
        _, resource = self._res(kind)
        if sub:
            resource += f"/{sub}"
        try:
            return fn()
        except ApiError as exc:
            st = exc.status
            raise KubeError(int(st.code or 0), str(st.reason or ""), str(st.message or ""), verb, resource,
                            ns) from None
        except httpx2.TimeoutException as exc:
            raise KubeError(0, "Timeout", f"no answer: {exc}", verb, resource, ns) from None
        except httpx2.TransportError as exc:
            raise KubeError(0, "Unreachable", str(exc), verb, resource, ns) from None

    @staticmethod
    def _dict(obj: Any) -> dict[str, Any]:
        if obj is None:
            return {}
        if isinstance(obj, dict):
            return dict(obj)
        return dict(obj.to_dict())

    def _ns(self, kind: str, ns: str | None) -> str:
        if kind in CLUSTER_SCOPED:
            return ""
        return check_name(ns or self.namespace, "namespace")

    def get(self, kind: str, name: str, ns: str | None = None) -> dict[str, Any]:
        res, _ = self._res(kind)
        check_name(name)
        n = self._ns(kind, ns)
        kw = {"namespace": n} if n else {}
        return self._dict(self._call("get", kind, n, lambda: self.client.get(res, name, **kw)))

    def list(self, kind: str, ns: str | None = None, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        res, _ = self._res(kind)
        n = self._ns(kind, ns)
        kw: dict[str, Any] = {"namespace": n} if n else {}
        if labels:
            for k, v in labels.items():  # they reach the labelSelector query: validated first
                check_label_key(k)
                check_label_value(v, f"value of label {k}")
            kw["labels"] = labels
        return [self._dict(o) for o in self._call("list", kind, n, lambda: list(self.client.list(res, **kw)))]

    def patch(self, kind: str, name: str, body: Any, patch_type: str, ns: str | None = None,
              dry_run: bool = False) -> dict[str, Any]:
        res, _ = self._res(kind)
        check_name(name)
        n = self._ns(kind, ns)
        pt = {"json": PatchType.JSON, "merge": PatchType.MERGE, "strategic": PatchType.STRATEGIC}[patch_type]
        if RESOURCES[kind][3] and pt == PatchType.STRATEGIC:
            raise ValueError(f"{kind} is a custom resource: strategic merge patch is not accepted (415)")
        kw: dict[str, Any] = {"namespace": n} if n else {}
        return self._dict(self._call("patch", kind, n, lambda: self.client.patch(
            res, name, body, patch_type=pt, dry_run=dry_run, **kw)))

    def create(self, kind: str, obj: dict[str, Any], ns: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        res, _ = self._res(kind)
        n = self._ns(kind, ns)
        check_name(str((obj.get("metadata") or {}).get("name", "")))
        body = res.from_dict(obj) if hasattr(res, "from_dict") and not RESOURCES[kind][3] else res(obj)
        kw = {"namespace": n} if n else {}
        return self._dict(self._call("create", kind, n, lambda: self.client.create(body, dry_run=dry_run, **kw)))

    def replace(self, kind: str, obj: dict[str, Any], ns: str | None = None) -> dict[str, Any]:
        """PUT the whole object; with metadata.resourceVersion the API refuses a stale write (409)."""
        res, _ = self._res(kind)
        n = self._ns(kind, ns)
        check_name(str((obj.get("metadata") or {}).get("name", "")))
        meta = dict(obj.get("metadata") or {})
        if n:
            meta["namespace"] = n  # lightkube takes the namespace from the object
        obj = {**obj, "metadata": meta}
        body = res.from_dict(obj) if hasattr(res, "from_dict") and not RESOURCES[kind][3] else res(obj)
        return self._dict(self._call("update", kind, n, lambda: self.client.replace(body)))

    def delete(self, kind: str, name: str, ns: str | None = None, foreground: bool = False,
               dry_run: bool = False) -> None:
        res, _ = self._res(kind)
        check_name(name)
        n = self._ns(kind, ns)
        kw: dict[str, Any] = {"namespace": n} if n else {}
        cascade = CascadeType.FOREGROUND if foreground else None
        self._call("delete", kind, n, lambda: self.client.delete(
            res, name, cascade=cascade, dry_run=dry_run, **kw))

    def scale(self, kind: str, name: str, replicas: int, ns: str | None = None,
              dry_run: bool = False) -> dict[str, Any]:
        """PATCH the workload's /scale. A HorizontalPodAutoscaler owns its target's replicas, so "scale" on an HPA
        moves its floor (`spec.minReplicas`): its next sync scales the workload to at least that many; the answer
        is shaped as a Scale (`spec.replicas` = the floor)."""
        res, _ = self._res(kind)
        check_name(name)
        n = self._ns(kind, ns)
        if kind == "HorizontalPodAutoscaler":
            out = self.patch(kind, name, {"spec": {"minReplicas": int(replicas)}}, "merge", n, dry_run)
            return {"spec": {"replicas": (out.get("spec") or {}).get("minReplicas")}}
        return self._dict(self._call("patch", kind, n, lambda: self.client.patch(
            res.Scale, name, {"spec": {"replicas": replicas}}, namespace=n, patch_type=PatchType.MERGE,
            dry_run=dry_run), sub="scale"))

    def evict(self, name: str, ns: str | None = None, dry_run: bool = False) -> None:
        check_name(name)
        n = self._ns("Pod", ns)
        ev = Pod.Eviction(metadata=ObjectMeta(name=name, namespace=n))
        self._call("create", "Pod", n, lambda: self.client.create(ev, name=name, namespace=n, dry_run=dry_run),
                   sub="eviction")

    def exists(self, kind: str, name: str, ns: str | None = None) -> bool:
        try:
            self.get(kind, name, ns)
        except KubeError as exc:
            if exc.code == 404:
                return False
            raise
        return True
