"""The API resources the simulator serves, and the errors it answers with (metav1.Status)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Key = tuple[str, str, str]
"""A stored object: (resource key, namespace or "", name)."""
RW = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
RO = ("get", "list", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool = True
    verbs: tuple[str, ...] = RW
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    crd: bool = False
    """Custom resources: no strategic merge patch (415), items of lists carry apiVersion/kind."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "Namespace", "namespaces", "namespace", namespaced=False, short_names=("ns",),
                 subresources=("status",)),
    ResourceType("", "v1", "Node", "nodes", "node", namespaced=False, short_names=("no",), subresources=("status",)),
    ResourceType("", "v1", "Pod", "pods", "pod", short_names=("po",), subresources=("eviction", "status")),
    ResourceType("", "v1", "ConfigMap", "configmaps", "configmap", short_names=("cm",)),
    ResourceType("", "v1", "Event", "events", "event", short_names=("ev",)),
    ResourceType("apps", "v1", "Deployment", "deployments", "deployment", short_names=("deploy",),
                 subresources=("scale", "status")),
    ResourceType("apps", "v1", "ReplicaSet", "replicasets", "replicaset", short_names=("rs",),
                 subresources=("scale", "status")),
    ResourceType("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget",
                 short_names=("pdb",), subresources=("status",)),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", "lease"),
    ResourceType("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", "leaderworkerset",
                 short_names=("lws",), subresources=("scale", "status"), crd=True),
    ResourceType("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes", "httproute",
                 subresources=("status",), crd=True),
    ResourceType("gateway.envoyproxy.io", "v1alpha1", "BackendTrafficPolicy", "backendtrafficpolicies",
                 "backendtrafficpolicy", short_names=("btp",), subresources=("status",), crd=True),
    ResourceType("inference.networking.x-k8s.io", "v1alpha2", "InferenceObjective", "inferenceobjectives",
                 "inferenceobjective", subresources=("status",), crd=True),
    ResourceType("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                 "horizontalpodautoscaler", short_names=("hpa",), subresources=("status",)),
    ResourceType("batch", "v1", "Job", "jobs", "job", subresources=("status",)),
    ResourceType("keda.sh", "v1alpha1", "ScaledObject", "scaledobjects", "scaledobject",
                 short_names=("so",), subresources=("status",), crd=True),
)
BY_PATH: dict[tuple[str, str, str], ResourceType] = {(r.group, r.version, r.plural): r for r in RESOURCES}
BY_KIND: dict[str, ResourceType] = {r.kind: r for r in RESOURCES}

# metadata.name / namespace: DNS-1123 subdomain (pods, most kinds) — what the apiserver validates
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def valid_name(name: str) -> bool:
    return len(name) <= 253 and bool(_DNS1123_SUBDOMAIN.match(name))


def label_errors(labels: Any) -> list[str]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return ["metadata.labels: must be a map of strings"]
    out = []
    for k, v in labels.items():
        prefix, _, name = k.rpartition("/")
        if (prefix and not valid_name(prefix)) or len(name) > 63 or not _LABEL_NAME.match(name):
            out.append(f"metadata.labels: Invalid value: {k!r}: name part must consist of alphanumeric characters, "
                       "'-', '_' or '.', and must start and end with an alphanumeric character")
        if not isinstance(v, str) or len(v) > 63 or not _LABEL_VALUE.match(v):
            out.append(f"metadata.labels: Invalid value: {v!r}: a valid label must be an empty string or consist "
                       "of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                       "character")
    return out


REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
           406: "NotAcceptable", 409: "Conflict", 410: "Gone", 415: "UnsupportedMediaType", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


class ApiStatus(Exception):
    """An error the API answers with a metav1.Status object."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            out["details"] = self.details
        return out


def not_found(rt: ResourceType, name: str) -> ApiStatus:
    what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiStatus(404, f'{what} "{name}" not found', details={"name": name, "group": rt.group,
                                                                  "kind": rt.plural})


def conflict(rt: ResourceType, name: str, why: str) -> ApiStatus:
    what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiStatus(409, f'Operation cannot be fulfilled on {what} "{name}": {why}',
                     details={"name": name, "group": rt.group, "kind": rt.plural})


def invalid(rt: ResourceType, name: str, causes: list[str]) -> ApiStatus:
    return ApiStatus(422, f'{rt.kind}.{rt.group or "core"} "{name}" is invalid: ' + "; ".join(causes),
                     details={"name": name, "group": rt.group, "kind": rt.kind,
                              "causes": [{"reason": "FieldValueInvalid", "message": c} for c in causes]})
