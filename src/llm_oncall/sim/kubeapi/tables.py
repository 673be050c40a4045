"""Server-side printing: `Accept: application/json;as=Table;g=meta.k8s.io;v=v1` answers a meta.k8s.io Table, as
kube-apiserver does for `kubectl get` (its columns and cells follow kubernetes pkg/printers/internalversion).

As a real server, every cell is computed (the server prints wide; kubectl hides priority-1 columns unless
`-o wide`), ages are relative to the server's clock (here the fleet's virtual one), and each row carries the
object's metadata (`includeObject=Metadata`, the default; `Object` or `None` as asked) so that kubectl can add
NAMESPACE and label columns. Custom resources get Name and Age (a `date` cell kubectl turns into an age).
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
Cell = str | int

NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, although some resources "
            "may allow a client to request the generation of an appropriate name automatically.")
AGE_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created."


def wants_table(accept: str) -> str | None:
    """The meta.k8s.io Table version the Accept header asks for first (kubectl sends v1, then v1beta1)."""
    for media in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in media.split(";")[1:] if "=" in p)
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            return params["v"]
    return None


def _col(name: str, type_: str = "string", description: str = "", priority: int = 0, fmt: str = "") -> Obj:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return float(calendar.timegm(time.strptime(stamp.split(".")[0].rstrip("Z"), "%Y-%m-%dT%H:%M:%S")))


class Printer:
    def __init__(self, now: float) -> None:
        self.now = now

    def since(self, stamp: str | None) -> str:
        t = _epoch(stamp)
        return "<unknown>" if t is None else human_duration(self.now - t)

    def age(self, o: Obj) -> str:
        return self.since(o["metadata"].get("creationTimestamp"))

    # ---- per kind (pkg/printers/internalversion/printers.go) ----------------------------------------------
    def pod(self, o: Obj) -> tuple[list[Cell], list[Obj]]:
        spec, status = o.get("spec") or {}, o.get("status") or {}
        restarts, ready, last_restart = 0, 0, None
        reason = status.get("reason") or status.get("phase") or ""
        initializing = False
        inits = spec.get("initContainers") or []
        for i, c in enumerate(status.get("initContainerStatuses") or []):
            restarts += int(c.get("restartCount") or 0)
            last_restart = _later(last_restart, ((c.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
            state = c.get("state") or {}
            term, wait = state.get("terminated"), state.get("waiting")
            if term is not None and term.get("exitCode") == 0:
                continue
            if term is not None:
                reason = "Init:" + (term.get("reason") or (f"Signal:{term['signal']}" if term.get("signal")
                                                           else f"ExitCode:{term.get('exitCode')}"))
            elif wait is not None and wait.get("reason") and wait["reason"] != "PodInitializing":
                reason = "Init:" + wait["reason"]
            else:
                reason = f"Init:{i}/{len(inits)}"
            initializing = True
            break
        if not initializing:
            restarts, running = 0, False
            for c in reversed(status.get("containerStatuses") or []):
                restarts += int(c.get("restartCount") or 0)
                last_restart = _later(last_restart,
                                      ((c.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
                state = c.get("state") or {}
                wait, term = state.get("waiting"), state.get("terminated")
                if wait is not None and wait.get("reason"):
                    reason = wait["reason"]
                elif term is not None and term.get("reason"):
                    reason = term["reason"]
                elif term is not None:
                    reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode')}"
                elif c.get("ready") and state.get("running") is not None:
                    running = True
                    ready += 1
            if reason == "Completed" and running:
                reason = "Running" if _condition(status, "Ready") else "NotReady"
        if o["metadata"].get("deletionTimestamp"):
            reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
        shown = str(restarts) if last_restart is None else f"{restarts} ({self.since(last_restart)} ago)"
        ips = status.get("podIPs") or []
        gates = spec.get("readinessGates") or []
        gates_cell = "<none>" if not gates else (
            f"{sum(1 for g in gates if _condition(status, g.get('conditionType', '')))}/{len(gates)}")
        cells: list[Cell] = [o["metadata"]["name"], f"{ready}/{len(spec.get('containers') or [])}", reason, shown,
                             self.age(o), (ips[0].get("ip") if ips else "") or "<none>",
                             spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>",
                             gates_cell]
        phase = status.get("phase")
        conditions = [{"type": "Completed", "status": "True", "reason": phase,
                       "message": "The pod has completed successfully." if phase == "Succeeded" else "The pod failed."}
                      ] if phase in ("Succeeded", "Failed") else []
        return cells, conditions

    def node(self, o: Obj) -> list[Cell]:
        status, labels = o.get("status") or {}, o["metadata"].get("labels") or {}
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        shown = ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
        if (o.get("spec") or {}).get("unschedulable"):
            shown.append("SchedulingDisabled")
        roles = sorted({k.removeprefix("node-role.kubernetes.io/") for k in labels
                        if k.startswith("node-role.kubernetes.io/") and k != "node-role.kubernetes.io/"}
                       | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()))
        info = status.get("nodeInfo") or {}

        def address(kind: str) -> str:
            return next((a["address"] for a in status.get("addresses") or [] if a.get("type") == kind), "<none>")
        return [o["metadata"]["name"], ",".join(shown), ",".join(roles) or "<none>", self.age(o),
                info.get("kubeletVersion", ""), address("InternalIP"), address("ExternalIP"),
                info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
                info.get("containerRuntimeVersion") or "<unknown>"]

    def deployment(self, o: Obj) -> list[Cell]:
        spec, status = o.get("spec") or {}, o.get("status") or {}
        names, images = _containers(spec)
        return [o["metadata"]["name"], f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas') or 0)}",
                int(status.get("updatedReplicas") or 0), int(status.get("availableReplicas") or 0), self.age(o),
                names, images, _selector(spec.get("selector"))]

    def replicaset(self, o: Obj) -> list[Cell]:
        spec, status = o.get("spec") or {}, o.get("status") or {}
        names, images = _containers(spec)
        return [o["metadata"]["name"], int(spec.get("replicas") or 0), int(status.get("replicas") or 0),
                int(status.get("readyReplicas") or 0), self.age(o), names, images, _selector(spec.get("selector"))]

    def configmap(self, o: Obj) -> list[Cell]:
        return [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}), self.age(o)]

    def namespace(self, o: Obj) -> list[Cell]:
        return [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""), self.age(o)]

    def lease(self, o: Obj) -> list[Cell]:
        return [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity") or "", self.age(o)]

    def pdb(self, o: Obj) -> list[Cell]:
        spec, status = o.get("spec") or {}, o.get("status") or {}
        return [o["metadata"]["name"], str(spec["minAvailable"]) if "minAvailable" in spec else "N/A",
                str(spec["maxUnavailable"]) if "maxUnavailable" in spec else "N/A",
                int(status.get("disruptionsAllowed") or 0), self.age(o)]

    def event(self, o: Obj) -> list[Cell]:
        first = self.since(o.get("firstTimestamp")) if o.get("firstTimestamp") else self.since(o.get("eventTime"))
        last = self.since(o.get("lastTimestamp")) if o.get("lastTimestamp") else first
        count = int(o.get("count") or 0)
        series = o.get("series")
        if series:
            last, count = self.since(series.get("lastObservedTime")), int(series.get("count") or 0)
        elif count == 0:
            count = 1
        inv = o.get("involvedObject") or {}
        target = f"{str(inv.get('kind', '')).lower()}/{inv['name']}" if inv.get("name") else str(
            inv.get("kind", "")).lower()
        src = o.get("source") or {}
        component = src.get("component") or o.get("reportingComponent") or o.get("reportingController") or ""
        host = src.get("host") or o.get("reportingInstance") or ""
        source = f"{component}, {host}" if component and host else component or host
        return [last, o.get("type", ""), o.get("reason", ""), target, inv.get("fieldPath", ""), source,
                str(o.get("message", "")).strip(), first, count, o["metadata"]["name"]]

    def hpa(self, o: Obj) -> list[Cell]:
        """pkg/printers/internalversion printHorizontalPodAutoscaler (Pods metrics: `<current>/<target>`)."""
        spec, status = o.get("spec") or {}, o.get("status") or {}
        ref = spec.get("scaleTargetRef") or {}
        current = {((m.get("pods") or {}).get("metric") or {}).get("name"): (m.get("pods") or {}).get("current", {})
                   for m in status.get("currentMetrics") or [] if m.get("type") == "Pods"}
        targets = []
        for m in spec.get("metrics") or []:
            if m.get("type") != "Pods":
                targets.append("<unknown>")
                continue
            name = ((m.get("pods") or {}).get("metric") or {}).get("name")
            want = ((m.get("pods") or {}).get("target") or {}).get("averageValue", "")
            now = (current.get(name) or {}).get("averageValue", "<unknown>")
            targets.append(f"{now}/{want}")
        lo = spec.get("minReplicas")
        return [o["metadata"]["name"], f"{ref.get('kind', '')}/{ref.get('name', '')}",
                ", ".join(targets) or "<none>", "<unset>" if lo is None else str(lo), int(spec.get("maxReplicas") or 0),
                int(status.get("currentReplicas") or 0), self.age(o)]

    def default(self, o: Obj) -> list[Cell]:
        """A custom resource without printer columns: Name and the `date` column Age, printed as an age."""
        return [o["metadata"]["name"], self.age(o)]


def _later(a: str | None, b: str | None) -> str | None:
    if not b:
        return a
    return b if a is None or (_epoch(b) or 0.0) > (_epoch(a) or 0.0) else a


def _condition(status: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or [])


def _containers(spec: Obj) -> tuple[str, str]:
    cs = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return ",".join(c.get("name", "") for c in cs), ",".join(c.get("image", "") for c in cs)


def _selector(sel: Obj | None) -> str:
    """metav1.LabelSelectorAsSelector(...).String(): requirements sorted by key."""
    if not sel:
        return "<none>"
    reqs = [(k, f"{k}={v}") for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e.get("key", ""), e.get("operator", ""), sorted(e.get("values") or [])
        text = {"In": f"{k} in ({','.join(vals)})", "NotIn": f"{k} notin ({','.join(vals)})", "Exists": k,
                "DoesNotExist": f"!{k}"}.get(op, k)
        reqs.append((k, text))
    return ",".join(t for _, t in sorted(reqs)) or "<none>"


COLUMNS: dict[str, list[Obj]] = {
    "Pod": [_col("Name", fmt="name", description=NAME_DOC),
            _col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", description="The aggregate status of the containers in this pod."),
            _col("Restarts", description="The number of times the containers in this pod have been restarted and "
                                         "when the last container in this pod has restarted."),
            _col("Age", description=AGE_DOC),
            _col("IP", priority=1, description="podIP address allocated to the pod."),
            _col("Node", priority=1, description="NodeName indicates in which node this pod is scheduled."),
            _col("Nominated Node", priority=1, description="nominatedNodeName is set only when this pod preempts "
                                                           "other pods on the node."),
            _col("Readiness Gates", priority=1, description="If specified, all readiness gates will be evaluated "
                                                            "for pod readiness.")],
    "Node": [_col("Name", fmt="name", description=NAME_DOC), _col("Status", description="The status of the node"),
             _col("Roles", description="The roles of the node"), _col("Age", description=AGE_DOC),
             _col("Version", description="Kubelet Version reported by the node."),
             _col("Internal-IP", priority=1, description="List of addresses reachable to the node."),
             _col("External-IP", priority=1, description="List of addresses reachable to the node."),
             _col("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release."),
             _col("Kernel-Version", priority=1, description="Kernel Version reported by the node from 'uname -r'."),
             _col("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node.")],
    "Deployment": [_col("Name", fmt="name", description=NAME_DOC),
                   _col("Ready", description="Number of the pod with ready state"),
                   _col("Up-to-date", description="Total number of non-terminating pods targeted by this "
                                                  "deployment that have the desired template spec."),
                   _col("Available", description="Total number of available non-terminating pods targeted by "
                                                 "this deployment."),
                   _col("Age", description=AGE_DOC),
                   _col("Containers", priority=1, description="Names of each container in the template."),
                   _col("Images", priority=1, description="Images referenced by each container in the template."),
                   _col("Selector", priority=1, description="Label selector for pods.")],
    "ReplicaSet": [_col("Name", fmt="name", description=NAME_DOC),
                   _col("Desired", "integer", "Replicas is the number of desired pods."),
                   _col("Current", "integer", "Replicas is the most recently observed number of non-terminating "
                                              "pods."),
                   _col("Ready", "integer", "The number of non-terminating pods targeted by this ReplicaSet with a "
                                            "Ready Condition."),
                   _col("Age", description=AGE_DOC),
                   _col("Containers", priority=1, description="Names of each container in the template."),
                   _col("Images", priority=1, description="Images referenced by each container in the template."),
                   _col("Selector", priority=1, description="Selector is a label query over pods.")],
    "ConfigMap": [_col("Name", fmt="name", description=NAME_DOC),
                  _col("Data", "integer", "Data contains the configuration data."), _col("Age", description=AGE_DOC)],
    "Namespace": [_col("Name", fmt="name", description=NAME_DOC),
                  _col("Status", description="The status of the namespace"), _col("Age", description=AGE_DOC)],
    "Lease": [_col("Name", fmt="name", description=NAME_DOC), _col("Holder", description="The holder of the lease"),
              _col("Age", description=AGE_DOC)],
    "PodDisruptionBudget": [_col("Name", fmt="name", description=NAME_DOC),
                            _col("Min Available", description="The minimum number of pods that must be available."),
                            _col("Max Unavailable",
                                 description="The maximum number of pods that may be unavailable."),
                            _col("Allowed Disruptions", "integer",
                                 "Calculated number of pods that may be disrupted at this time."),
                            _col("Age", description=AGE_DOC)],
    "Event": [_col("Last Seen", description="The time at which the most recent occurrence of this event was "
                                            "recorded."),
              _col("Type", description="Type of this event (Normal, Warning)."),
              _col("Reason", description="This should be a short, machine understandable string that gives the "
                                         "reason for the transition into the object's current status."),
              _col("Object", description="The object that this event is about."),
              _col("Subobject", priority=1, description="The field of the object the event is about."),
              _col("Source", priority=1, description="The component reporting this event."),
              _col("Message", description="A human-readable description of the status of this operation."),
              _col("First Seen", priority=1, description="The time at which the event was first recorded."),
              _col("Count", priority=1, description="The number of times this event has occurred."),
              _col("Name", priority=1, fmt="name", description=NAME_DOC)],
    "HorizontalPodAutoscaler": [
        _col("Name", fmt="name", description=NAME_DOC),
        _col("Reference", description="reference to scaled resource; horizontal pod autoscaler will learn the current "
                                      "resource consumption and will set the desired number of pods by using its "
                                      "Scale subresource."),
        _col("Targets", description="metrics contains the specifications for which to use to calculate the desired "
                                    "replica count (the maximum replica count across all metrics will be used)."),
        _col("MinPods", description="minReplicas is the lower limit for the number of replicas to which the "
                                    "autoscaler can scale down."),
        _col("MaxPods", "integer", "maxReplicas is the upper limit for the number of replicas to which the "
                                   "autoscaler can scale up."),
        _col("Replicas", "integer", "currentReplicas is current number of replicas of pods managed by this "
                                    "autoscaler, as last seen by the autoscaler."),
        _col("Age", description=AGE_DOC)],
}
DEFAULT_COLUMNS = [_col("Name", fmt="name", description=NAME_DOC), _col("Age", "date", AGE_DOC)]
PRINTERS: dict[str, Callable[[Printer, Obj], list[Cell]]] = {
    "Node": Printer.node, "Deployment": Printer.deployment, "ReplicaSet": Printer.replicaset,
    "ConfigMap": Printer.configmap, "Namespace": Printer.namespace, "Lease": Printer.lease,
    "PodDisruptionBudget": Printer.pdb, "Event": Printer.event, "HorizontalPodAutoscaler": Printer.hpa,
}


def table(kind: str, api_version: str, body: Obj, now: float, version: str = "v1", include: str = "Metadata") -> Obj:
    """A Table for a list or a single object of `kind`; `now` is the server's clock (unix seconds)."""
    items: list[Obj] = body.get("items", [body])
    printer = Printer(now)
    rows = []
    for o in items:
        conditions: list[Obj] = []
        if kind == "Pod":
            cells, conditions = printer.pod(o)
        else:
            fn = PRINTERS.get(kind)
            cells = fn(printer, o) if fn is not None else printer.default(o)
        row: Obj = {"cells": cells}
        if conditions:
            row["conditions"] = conditions
        if include == "Object":
            row["object"] = {"apiVersion": api_version, "kind": kind, **o}
        elif include != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}",
                             "metadata": o["metadata"]}
        rows.append(row)
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k in ("resourceVersion", "continue")}
    if "items" not in body:
        meta = {"resourceVersion": body["metadata"].get("resourceVersion", "")}
    return {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}", "metadata": meta,
            "columnDefinitions": COLUMNS.get(kind, DEFAULT_COLUMNS), "rows": rows}
