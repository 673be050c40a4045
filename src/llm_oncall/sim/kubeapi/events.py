"""core/v1 Events: the fleet's recent cluster events, and those the API records itself (evictions, group
recreation)."""

from __future__ import annotations

from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi.identity import ts, uid_of
from llm_oncall.sim.kubeapi.templates import lws_mode

EVENT_REASONS = {"restart": ("Pod", "BackOff", "Warning"), "scale": ("Deployment", "ScalingReplicaSet", "Normal"),
                 "rollout": ("Deployment", "ScalingReplicaSet", "Normal"),
                 "deploy": ("Deployment", "ScalingReplicaSet", "Normal"),
                 "config_change": ("ConfigMap", "Updated", "Normal")}


def events(fleet: Fleet, extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fleet's recent cluster events as core/v1 Events, plus those the API itself recorded."""
    cfg = fleet.cfg
    out = []
    log = fleet.events()[-200:]
    first = fleet.events_recorded - len(log)
    for i, e in enumerate(log):
        kind, reason, type_ = EVENT_REASONS.get(e["kind"], ("Pod", e["kind"], "Normal"))
        name = str(e.get("pod") or e.get("configmap") or cfg.deployment)
        if kind == "Pod" and "pod" not in e:
            kind, name = "Deployment", cfg.deployment
        if lws_mode(fleet) and kind == "Deployment":
            kind = "LeaderWorkerSet"
        seq = first + i
        out.append(_event(fleet, name, kind, reason, type_, str(e["detail"]), float(e["t"]), seq))
    out.extend(node_events(fleet))
    out.extend(extra)
    return out


def node_events(fleet: Fleet) -> list[dict[str, Any]]:
    """Warning Events a GPU-health agent (NPD's custom plugin monitor) posts on Nodes: in `default`, the namespace
    of a cluster-scoped object's Events."""
    out = []
    for i, e in enumerate(fleet.node_events):
        when = ts(fleet, float(e["t"]))
        node = str(e["node"])
        out.append({"apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": f"{node}.{i:016x}", "namespace": "default",
                                 "uid": uid_of("node-event", node, i), "creationTimestamp": when},
                    "involvedObject": {"kind": "Node", "name": node, "uid": node, "namespace": ""},
                    "reason": str(e["reason"]), "message": str(e["message"]), "type": "Warning", "count": 1,
                    "firstTimestamp": when, "lastTimestamp": when,
                    "source": {"component": "custom-plugin-monitor", "host": node},
                    "reportingComponent": "custom-plugin-monitor", "reportingInstance": node})
    return out


def _event(fleet: Fleet, name: str, kind: str, reason: str, type_: str, message: str, t: float,
           seq: int) -> dict[str, Any]:
    api = {"Pod": "v1", "ConfigMap": "v1", "Node": "v1", "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
           "HTTPRoute": "gateway.networking.k8s.io/v1"}.get(kind, "apps/v1")
    ns = fleet.cfg.namespace
    when = ts(fleet, t)
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.{seq:016x}", "namespace": ns, "uid": uid_of("event", seq),
                         "creationTimestamp": when},
            "involvedObject": {"apiVersion": api, "kind": kind, "name": name,
                               "namespace": "" if kind == "Node" else ns},
            "reason": reason, "message": message, "type": type_, "count": 1, "firstTimestamp": when,
            "lastTimestamp": when, "source": {"component": "llm-oncall-sim"},
            "reportingComponent": "llm-oncall-sim", "reportingInstance": ""}


def api_event(fleet: Fleet, name: str, kind: str, reason: str, message: str, seq: int,
              type_: str = "Normal") -> dict[str, Any]:
    return _event(fleet, name, kind, reason, type_, message, fleet.now, seq)
