"""The fleet as Kubernetes objects: what a kube-apiserver would hold for it.

Every field here exists in the Kubernetes (or the CRD's) OpenAPI schema; tests validate the built-in kinds
with kubernetes-validate. Identity (uid, creationTimestamp, resourceVersion) is added by the cluster.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.pods import CRASHLOOP, DOWN, READY, STARTING, TERMINATED, Pod, Revision

IMAGE = "vllm/vllm-openai"
PORT = 8000
LWS = "leaderworkerset.sigs.k8s.io"
CONTEXT_RANGE = "llm-d.ai/context-length-range"
"""llm-d's context-length-aware scorer reads this pod label: `"min-max"` prompt tokens."""
ROUTER_CONFIGMAP = "router-config"
ROUTER_KEY = "dynamic_config.json"
GATEWAY_CONFIGMAP = "llm-gateway-config"
"""The simulator's own gateway: the only one with a max_tokens cap (docs/actions.md)."""
ROUTING_LOGIC = {"sticky": "session", "round_robin": "roundrobin", "random": "random",
                 "least_loaded": "least_loaded", "length_pools": "length_pools"}
"""Sim router policy → production-stack `routing_logic` (session, roundrobin are its names; the other three are
simulator extensions, documented as such)."""
POLICY_OF = {v: k for k, v in ROUTING_LOGIC.items()}
CLIENT_HEADER = "x-client-id"


def ts(fleet: Fleet, t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(fleet.cfg.epoch + t))


def uid_of(*parts: object) -> str:
    h = hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


@dataclass
class Bookkeeping:
    """What the API server remembers beyond the fleet: Deployment revision numbers, creation times."""

    rs_revision: dict[str, int] = field(default_factory=dict)
    rs_history: dict[str, list[int]] = field(default_factory=dict)
    created: dict[tuple[str, ...], float] = field(default_factory=dict)
    next_revision: int = 1

    def revision_number(self, rev: str) -> int:
        if rev not in self.rs_revision:
            self.rs_revision[rev] = self.next_revision
            self.next_revision += 1
        return self.rs_revision[rev]

    def promote(self, rev: str) -> None:
        """The Deployment rolled back to an old ReplicaSet: it gets the next revision number (kubectl/controller)."""
        old = self.rs_revision.get(rev)
        if old is not None and old != self.next_revision - 1:
            self.rs_history.setdefault(rev, []).append(old)
            self.rs_revision[rev] = self.next_revision
            self.next_revision += 1

    def created_at(self, key: tuple[str, ...], t: float) -> float:
        return self.created.setdefault(key, t)


# ---- pod templates ------------------------------------------------------------------------------------
def container(fleet: Fleet, rev: Revision) -> dict[str, Any]:
    cfg = fleet.cfg
    args = ["--model", cfg.model_name, "--revision", rev.model_revision, "--tensor-parallel-size", str(cfg.tp),
            "--port", str(PORT)]
    if rev.enforce_eager:
        args.append("--enforce-eager")
    gpus = str(cfg.tp)
    return {
        "name": "vllm", "image": f"{IMAGE}:v{rev.vllm_version}", "imagePullPolicy": "IfNotPresent",
        "args": args,
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
        "readinessProbe": {"httpGet": {"path": "/health", "port": PORT, "scheme": "HTTP"}, "periodSeconds": 5,
                           "failureThreshold": 2, "successThreshold": 1, "timeoutSeconds": 1},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }


def pod_spec(fleet: Fleet, rev: Revision) -> dict[str, Any]:
    return {"containers": [container(fleet, rev)], "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler", "securityContext": {}}


def template(fleet: Fleet, rev: Revision, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": dict(labels)}, "spec": pod_spec(fleet, rev)}


@dataclass(frozen=True)
class TemplateSpec:
    """What a pod template says about a revision: the image's vLLM version, the model revision, the flags."""

    vllm_version: str
    model_revision: str
    enforce_eager: bool


def parse_template(tpl: Any) -> TemplateSpec | str:
    """The revision a written template asks for, or why the simulator cannot run it."""
    try:
        containers = tpl["spec"]["containers"]
        c = next(x for x in containers if x.get("name") == "vllm")
        image = str(c["image"])
        args = [str(a) for a in c.get("args", [])]
    except (KeyError, TypeError, StopIteration):
        return "spec.template.spec.containers: the vllm container (image, args) is required"
    repo, _, tag = image.rpartition(":")
    if repo != IMAGE or not tag.startswith("v"):
        return f"spec.template.spec.containers[vllm].image: {image!r}: the simulator runs {IMAGE}:v<version> only"
    model = args[args.index("--revision") + 1] if "--revision" in args[:-1] else "main"
    return TemplateSpec(tag[1:], model, "--enforce-eager" in args)


# ---- objects ------------------------------------------------------------------------------------------
def lws_mode(fleet: Fleet) -> bool:
    return fleet.cfg.group_size > 1


def live_pods(fleet: Fleet) -> list[Pod]:
    return [p for p in fleet.pods if p.state != TERMINATED]


def canary_revision(fleet: Fleet) -> Revision | None:
    ro = fleet.rollout
    return ro.new if ro is not None and ro.canary_weight is not None else None


def template_revision(fleet: Fleet) -> Revision:
    """The revision the Deployment's template names (a rolling update's new one; never a canary's)."""
    ro = fleet.rollout
    if ro is not None and ro.canary_weight is None:
        return ro.new
    canary = canary_revision(fleet)
    live = [p.revision for p in live_pods(fleet) if p.revision is not canary]
    if live:
        names = [r.name for r in live]
        return max(live, key=lambda r: (names.count(r.name), fleet.revisions.index(r)))
    return fleet.revisions[-1]


def deployment_of(fleet: Fleet, rev: Revision) -> str:
    return f"{fleet.cfg.deployment}-canary" if rev is canary_revision(fleet) else fleet.cfg.deployment


def _meta(name: str, ns: str | None, labels: dict[str, str] | None = None,
          annotations: dict[str, str] | None = None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name}
    if ns is not None:
        m["namespace"] = ns
    if labels:
        m["labels"] = labels
    if annotations:
        m["annotations"] = annotations
    if owner:
        m["ownerReferences"] = [owner]
    return m


def _owner(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def pod_labels(fleet: Fleet, p: Pod) -> dict[str, str]:
    cfg = fleet.cfg
    if lws_mode(fleet):
        n = int(p.group.rsplit("-g", 1)[1])
        parts = p.name[len(cfg.deployment) + 1:].split("-")
        worker = int(parts[1]) if len(parts) > 1 else 0
        labels = {f"{LWS}/name": cfg.deployment, f"{LWS}/group-index": str(n),
                  f"{LWS}/worker-index": str(worker), f"{LWS}/group-key": uid_of("group", cfg.deployment, n)[:8],
                  f"{LWS}/template-revision-hash": p.revision.name, "app": cfg.deployment}
    else:
        app = deployment_of(fleet, p.revision)
        labels = {"app": app, "pod-template-hash": p.revision.name}
    if p.context_range is not None:
        labels[CONTEXT_RANGE] = f"{p.context_range[0]}-{p.context_range[1]}"
    elif fleet.router.policy == "length_pools":  # the what-if's two pools, labelled as llm-d would see them
        labels[CONTEXT_RANGE] = (f"{fleet.router.long_threshold}-{fleet.cfg.engine.max_model_len}" if p.long_pool
                                 else f"0-{fleet.router.long_threshold}")
    return labels


def _container_status(fleet: Fleet, p: Pod, ready: bool) -> dict[str, Any]:
    image = f"{IMAGE}:v{p.revision.vllm_version}"
    cid = "containerd://" + hashlib.sha256(f"{p.name}/{p.index}/{p.restarts}".encode()).hexdigest()
    status: dict[str, Any] = {"name": "vllm", "image": image, "imageID": f"docker.io/{image}@sha256:"
                              + hashlib.sha256(image.encode()).hexdigest(), "ready": ready,
                              "restartCount": p.restarts, "started": p.state in (READY, STARTING)}
    since = ts(fleet, max(p.state_at, p.process_start))
    if p.state == CRASHLOOP:
        status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": f"back-off restarting failed "
                                       f"container=vllm pod={p.name}_{fleet.cfg.namespace}"}}
    elif p.state == DOWN:
        status["state"] = {"waiting": {"reason": "ContainerCreating"}}
    else:
        status["state"] = {"running": {"startedAt": since}}
        status["containerID"] = cid
    if p.restarts:
        oom = p.crashes == 0
        status["lastState"] = {"terminated": {"exitCode": 137 if oom else 1, "reason": "OOMKilled" if oom else "Error",
                                              "startedAt": since, "finishedAt": since, "containerID": cid}}
    else:
        status["lastState"] = {}
    return status


def pod(fleet: Fleet, p: Pod, book: Bookkeeping, owner_uid: str) -> dict[str, Any]:
    cfg = fleet.cfg
    ns = cfg.namespace
    created = book.created_at(("pod", p.name, str(p.index)), min(p.process_start, fleet.now))
    ready = p.state == READY
    if lws_mode(fleet):
        labels = pod_labels(fleet, p)
        group = labels[f"{LWS}/group-index"]
        leader = labels[f"{LWS}/worker-index"] == "0"
        owner = (_owner("apps/v1", "StatefulSet", cfg.deployment, uid_of("sts", cfg.deployment)) if leader else
                 _owner("apps/v1", "StatefulSet", f"{cfg.deployment}-{group}", uid_of("sts", cfg.deployment, group)))
        annotations = {f"{LWS}/size": str(cfg.group_size)}
        if not leader:
            annotations[f"{LWS}/leader-name"] = f"{cfg.deployment}-{group}"
    else:
        labels = pod_labels(fleet, p)
        owner = _owner("apps/v1", "ReplicaSet", f"{cfg.deployment}-{p.revision.name}", owner_uid)
        annotations = {}
    meta = _meta(p.name, ns, labels, annotations or None, owner)
    meta["uid"] = uid_of("pod", p.name, p.index)
    meta["creationTimestamp"] = ts(fleet, created)
    node_ip = node_address(fleet, p.node)
    spec = pod_spec(fleet, p.revision)
    spec.update({"nodeName": p.node, "serviceAccountName": "default", "enableServiceLinks": True,
                 "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
                 "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300},
                                 {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}]})
    if lws_mode(fleet):
        spec["hostname"] = p.name
    since = ts(fleet, max(p.state_at, p.process_start, created))
    conds = [("PodReadyToStartContainers", True), ("Initialized", True), ("Ready", ready), ("ContainersReady", ready),
             ("PodScheduled", True)]
    ip = f"10.244.{(p.index // 250) % 250}.{p.index % 250 + 2}"
    status = {
        "phase": "Running", "hostIP": node_ip, "hostIPs": [{"ip": node_ip}], "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": ts(fleet, created), "qosClass": "BestEffort",
        "conditions": [{"type": c, "status": "True" if v else "False", "lastProbeTime": None,
                        "lastTransitionTime": since if c in ("Ready", "ContainersReady") else ts(fleet, created)}
                       | ({} if v else {"reason": "ContainersNotReady",
                                        "message": "containers with unready status: [vllm]"})
                       for c, v in conds],
        "containerStatuses": [_container_status(fleet, p, ready)],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def node_address(fleet: Fleet, node: str) -> str:
    return f"10.0.{list(fleet.gpus).index(node) // 250}.{list(fleet.gpus).index(node) % 250 + 10}"


UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def node(fleet: Fleet, name: str, book: Bookkeeping) -> dict[str, Any]:
    created = book.created_at(("node", name), -86_400.0 * 12)
    gpus = str(len(fleet.gpus[name]))
    meta = _meta(name, None, {
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
    status = {
        "capacity": capacity, "allocatable": {**capacity, "cpu": "191450m", "memory": "2080000000Ki"},
        "conditions": [{"type": c, "status": s, "reason": r, "message": m, "lastHeartbeatTime": beat,
                        "lastTransitionTime": ts(fleet, created)} for c, s, r, m in conds],
        "addresses": [{"type": "InternalIP", "address": node_address(fleet, name)},
                      {"type": "Hostname", "address": name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"architecture": "amd64", "bootID": uid_of("boot", name), "containerRuntimeVersion":
                     "containerd://1.7.27", "kernelVersion": "6.8.0-1024-aws", "kubeProxyVersion": "v1.33.1",
                     "kubeletVersion": "v1.33.1", "machineID": uid_of("machine", name).replace("-", ""),
                     "operatingSystem": "linux", "osImage": "Ubuntu 24.04.2 LTS",
                     "systemUUID": uid_of("system", name)},
    }
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def deployment_objects(fleet: Fleet, book: Bookkeeping) -> Iterator[dict[str, Any]]:
    """The Deployment (and a canary Deployment while a canary runs) with their ReplicaSets."""
    cfg = fleet.cfg
    ns = cfg.namespace
    live = live_pods(fleet)
    canary = canary_revision(fleet)
    current = template_revision(fleet)
    for rev in fleet.revisions:  # an API that starts mid-rollout still numbers the older ReplicaSets first
        if rev is not canary and rev is not current and any(p.revision is rev for p in live):
            book.revision_number(rev.name)
    book.revision_number(current.name)
    groups: list[tuple[str, Revision, list[Revision], int]] = [
        (cfg.deployment, current, [r for r in fleet.revisions if r.name in book.rs_revision and r is not canary],
         fleet.desired_replicas)]
    if canary is not None:
        groups.append((f"{cfg.deployment}-canary", canary, [canary],
                       sum(1 for p in live if p.revision is canary)))
    for name, tpl_rev, revs, replicas in groups:
        dep_uid = uid_of("deployment", name)
        pods = [p for p in live if p.revision in revs]
        ready = [p for p in pods if p.state == READY]
        updated = [p for p in pods if p.revision is tpl_rev]
        number = book.revision_number(tpl_rev.name) if name == cfg.deployment else 1
        canary_dep = name != cfg.deployment
        generation = fleet.generation if not canary_dep else 1
        observed = fleet.observed_generation if not canary_dep else 1
        progressing = fleet.rollout is not None and fleet.rollout.canary_weight is None and not canary_dep
        stuck = any(p.state == CRASHLOOP for p in updated)
        status: dict[str, Any] = {
            "observedGeneration": observed, "replicas": len(pods), "updatedReplicas": len(updated),
            "readyReplicas": len(ready), "availableReplicas": len(ready),
            "conditions": [
                {"type": "Available", "status": "True" if len(ready) >= max(0, replicas - 1) else "False",
                 "reason": "MinimumReplicasAvailable" if len(ready) >= max(0, replicas - 1)
                 else "MinimumReplicasUnavailable", "message": "Deployment has minimum availability.",
                 "lastUpdateTime": ts(fleet, 0.0), "lastTransitionTime": ts(fleet, 0.0)},
                {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated" if progressing or stuck
                 else "NewReplicaSetAvailable",
                 "message": f'ReplicaSet "{cfg.deployment}-{tpl_rev.name}" '
                            + ("is progressing." if progressing or stuck else "has successfully progressed."),
                 "lastUpdateTime": ts(fleet, 0.0), "lastTransitionTime": ts(fleet, 0.0)}],
        }
        if len(pods) > len(ready):
            status["unavailableReplicas"] = len(pods) - len(ready)
        labels = {"app": name, "app.kubernetes.io/name": "vllm"}
        yield {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": _meta(name, ns, labels, {"deployment.kubernetes.io/revision": str(number)})
               | {"uid": dep_uid, "generation": generation},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                        "template": template(fleet, tpl_rev, {"app": name}),
                        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1,
                                                                                "maxUnavailable": 0}},
                        "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
               "status": status}
        for rev in revs:
            rs_pods = [p for p in live if p.revision is rev]
            rs_name = f"{cfg.deployment}-{rev.name}"
            rs_labels = {"app": name, "pod-template-hash": rev.name}
            ann = {"deployment.kubernetes.io/desired-replicas": str(replicas),
                   "deployment.kubernetes.io/max-replicas": str(replicas + 1),
                   "deployment.kubernetes.io/revision": str(book.revision_number(rev.name) if not canary_dep else 1)}
            hist = book.rs_history.get(rev.name)
            if hist:
                ann["deployment.kubernetes.io/revision-history"] = ",".join(map(str, hist))
            rs_ready = sum(1 for p in rs_pods if p.state == READY)
            rs_status: dict[str, Any] = {"replicas": len(rs_pods), "observedGeneration": 1}
            if rs_pods:
                rs_status["fullyLabeledReplicas"] = len(rs_pods)
            if rs_ready:
                rs_status.update(readyReplicas=rs_ready, availableReplicas=rs_ready)
            yield {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                   "metadata": _meta(rs_name, ns, rs_labels, ann,
                                     _owner("apps/v1", "Deployment", name, dep_uid))
                   | {"uid": uid_of("rs", rs_name), "generation": 1},
                   "spec": {"replicas": len(rs_pods), "selector": {"matchLabels": rs_labels},
                            "template": template(fleet, rev, rs_labels)},
                   "status": rs_status}


def leaderworkerset(fleet: Fleet) -> dict[str, Any]:
    cfg = fleet.cfg
    live = live_pods(fleet)
    groups = sorted({p.group for p in live})
    ready_groups = sum(1 for g in groups if all(p.state == READY for p in live if p.group == g))
    rev = template_revision(fleet)
    tpl = template(fleet, rev, {"app": cfg.deployment})
    replicas = max(1, fleet.desired_replicas // cfg.group_size)
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": _meta(cfg.deployment, cfg.namespace, {"app": cfg.deployment})
            | {"uid": uid_of("lws", cfg.deployment), "generation": fleet.generation},
            "spec": {"replicas": replicas, "startupPolicy": "LeaderCreated",
                     "leaderWorkerTemplate": {"size": cfg.group_size, "restartPolicy": "RecreateGroupOnPodRestart",
                                              "workerTemplate": tpl},
                     "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                         "partition": 0, "maxUnavailable": 1, "maxSurge": 0}}},
            "status": {"replicas": len(groups), "readyReplicas": ready_groups, "updatedReplicas": len(groups),
                       "hpaPodSelector": f"{LWS}/name={cfg.deployment},{LWS}/worker-index=0",
                       "conditions": [{"type": "Available", "status": "True" if ready_groups else "False",
                                       "reason": "AllGroupsReady" if ready_groups == len(groups) else "GroupsNotReady",
                                       "message": f"{ready_groups}/{len(groups)} groups ready",
                                       "lastTransitionTime": ts(fleet, 0.0)}]}}


def router_configmap(fleet: Fleet) -> dict[str, Any]:
    cfg = fleet.cfg
    body = {"routing_logic": ROUTING_LOGIC.get(fleet.router.policy, fleet.router.policy),
            "session_key": "x-session-id"}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(ROUTER_CONFIGMAP, cfg.namespace, {"app.kubernetes.io/component": "router"},
                              {"production-stack.vllm.ai/dynamic-config": "re-read every 10s"})
            | {"uid": uid_of("cm", ROUTER_CONFIGMAP)},
            "data": {ROUTER_KEY: json.dumps(body, sort_keys=True)}}


def gateway_configmap(fleet: Fleet) -> dict[str, Any]:
    cap = fleet.gateway.max_tokens_cap
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(GATEWAY_CONFIGMAP, fleet.cfg.namespace, {"app.kubernetes.io/component": "gateway"})
            | {"uid": uid_of("cm", GATEWAY_CONFIGMAP)},
            "data": {"max_tokens_cap": str(cap or 0)}}


def httproute(fleet: Fleet) -> dict[str, Any]:
    cfg = fleet.cfg
    canary = canary_revision(fleet)
    refs: list[dict[str, Any]] = []
    if canary is not None and fleet.weights:
        stable = sum(w for r, w in fleet.weights.items() if r != canary.name)
        refs = [{"group": "", "kind": "Service", "name": cfg.deployment, "port": PORT,
                 "weight": round(stable * 100)},
                {"group": "", "kind": "Service", "name": f"{cfg.deployment}-canary", "port": PORT,
                 "weight": round(fleet.weights.get(canary.name, 0.0) * 100)}]
    else:
        refs = [{"group": "", "kind": "Service", "name": cfg.deployment, "port": PORT, "weight": 1}]
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": _meta(cfg.deployment, cfg.namespace, {"app": cfg.deployment})
            | {"uid": uid_of("httproute", cfg.deployment), "generation": 1},
            "spec": {"parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                     "name": "inference-gateway"}],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                                "backendRefs": refs}]}}


def namespaces(fleet: Fleet) -> list[dict[str, Any]]:
    out = []
    for ns in ("default", "kube-system", "kube-node-lease", fleet.cfg.namespace):
        out.append({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns, "uid": uid_of("ns", ns),
                                 "labels": {"kubernetes.io/metadata.name": ns}},
                    "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    return out


def node_lease(fleet: Fleet, name: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease", "uid": uid_of("lease", name),
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                              "uid": uid_of("node", name)}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                     "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z",
                                                time.gmtime(fleet.cfg.epoch + fleet.now - fleet.now % 10))}}


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
    out.extend(extra)
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
