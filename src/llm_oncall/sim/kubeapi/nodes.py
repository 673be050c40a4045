"""The cluster's infrastructure objects: Nodes (cordons, taints, the kubelet's status), their Leases in
kube-node-lease, and the namespaces."""

from __future__ import annotations

import time
from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi.identity import Bookkeeping, object_meta, ts, uid_of


def node_address(fleet: Fleet, node: str) -> str:
    return f"10.0.{list(fleet.gpus).index(node) // 250}.{list(fleet.gpus).index(node) % 250 + 10}"


UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def node(fleet: Fleet, name: str, book: Bookkeeping) -> dict[str, Any]:
    created = book.created_at(("node", name), -86_400.0 * 12)
    gpus = str(len(fleet.gpus[name]))
    meta = object_meta(name, None, {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "p5.48xlarge", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": gpus}, {"node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"})
    meta["uid"] = uid_of("node", name)
    meta["creationTimestamp"] = ts(fleet, created)
    spec: dict[str, Any] = {"podCIDR": f"10.244.{list(fleet.gpus).index(name)}.0/24",
                            "podCIDRs": [f"10.244.{list(fleet.gpus).index(name)}.0/24"],
                            "providerID": f"aws:///us-east-1a/i-{uid_of('i', name)[-17:]}"}
    taints = [dict(t) for t in fleet.taints.get(name, [])]
    if name in fleet.cordoned:
        spec["unschedulable"] = True
        since = book.created_at(("cordon", name), fleet.now)
        taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule", "timeAdded": ts(fleet, since)})
    if taints:
        spec["taints"] = taints
    capacity = {"cpu": "192", "memory": "2097152000Ki", "ephemeral-storage": "7499362304Ki", "nvidia.com/gpu": gpus,
                "pods": "110", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    beat = ts(fleet, fleet.now - fleet.now % 300.0)  # kubelets report unchanged status every 5 minutes
    conds = [("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
             ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
             ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
             ("Ready", "True", "KubeletReady", "kubelet is posting ready status")]
    if name in fleet.rebooting:  # the node controller's view of a node whose kubelet stopped posting
        conds[-1] = ("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    boots = fleet.boots.get(name, 0)
    boot_id = uid_of("boot", name) if not boots else uid_of("boot", name, boots)
    status = {
        "capacity": capacity, "allocatable": {**capacity, "cpu": "191450m", "memory": "2080000000Ki"},
        "conditions": [{"type": c, "status": s, "reason": r, "message": m, "lastHeartbeatTime": beat,
                        "lastTransitionTime": ts(fleet, since)} for c, s, r, m, since in _agent(fleet, name, created)]
        + [{"type": c, "status": s, "reason": r, "message": m, "lastHeartbeatTime": beat,
            "lastTransitionTime": ts(fleet, created)} for c, s, r, m in conds],
        "addresses": [{"type": "InternalIP", "address": node_address(fleet, name)},
                      {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"architecture": "amd64", "bootID": boot_id, "containerRuntimeVersion":
                     "containerd://1.7.27", "kernelVersion": "6.8.0-1024-aws", "kubeProxyVersion": "v1.33.1",
                     "kubeletVersion": "v1.33.1", "machineID": uid_of("machine", name).replace("-", ""),
                     "operatingSystem": "linux", "osImage": "Ubuntu 24.04.2 LTS",
                     "systemUUID": uid_of("system", name)},
    }
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def node_lease(fleet: Fleet, name: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease", "uid": uid_of("lease", name),
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                              "uid": uid_of("node", name)}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                     "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z",
                                                time.gmtime(fleet.cfg.epoch + fleet.now - fleet.now % 10))}}


def namespaces(fleet: Fleet) -> list[dict[str, Any]]:
    out = []
    for ns in ("default", "kube-system", "kube-node-lease", fleet.cfg.namespace):
        out.append({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns, "uid": uid_of("ns", ns),
                                 "labels": {"kubernetes.io/metadata.name": ns}},
                    "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    return out


AGENT_WINDOW_S = 600.0
"""How long NPD's GPU check keeps GPUXIDErrors True after the last Xid it saw (its kernel-log look-back)."""


def _agent(fleet: Fleet, name: str, created: float) -> list[tuple[str, str, str, str, float]]:
    """node-problem-detector's conditions on the node (names: evidence/catalog/node_problems.yaml): its kernel
    monitor's KernelDeadlock and the GPU health checks' GPUXIDErrors / GPUMissing."""
    out = [("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock", created)]
    last = next((e for e in reversed(fleet.node_events) if e["node"] == name), None)
    gpus = fleet.gpus.get(name, [])
    xid = last is not None and fleet.now - float(last["t"]) <= AGENT_WINDOW_S and any(g.xid for g in gpus)
    if xid and last is not None:
        out.append(("GPUXIDErrors", "True", "GPUXIDErrorsDetected", str(last["message"]), float(last["t"])))
    else:
        out.append(("GPUXIDErrors", "False", "NoGPUXIDErrors", "no Xid errors in the kernel log", created))
    lost = sum(1 for g in gpus if g.fault == "off_bus")
    if lost:
        since = next((float(e["t"]) for e in reversed(fleet.node_events) if e["node"] == name), fleet.now)
        out.append(("GPUMissing", "True", "GPUCountMismatch",
                    f"nvidia-smi finds {len(gpus) - lost} of {len(gpus)} GPUs", since))
    else:
        out.append(("GPUMissing", "False", "GPUCountMatches", f"nvidia-smi finds {len(gpus)} of {len(gpus)} GPUs",
                    created))
    return out
