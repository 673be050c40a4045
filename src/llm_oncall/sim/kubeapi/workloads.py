"""The fleet's workloads as objects: pods (labels, status, containers), the Deployment and its ReplicaSets (a
canary Deployment while a canary runs), or the LeaderWorkerSet of tensor-parallel groups.

Identity (uid, creationTimestamp, resourceVersion) of the top-level objects is added by the cluster.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi.identity import Bookkeeping, object_meta, owner_ref, ts, uid_of
from llm_oncall.sim.kubeapi.nodes import node_address
from llm_oncall.sim.kubeapi.routing import CONTEXT_RANGE
from llm_oncall.sim.kubeapi.templates import (
    IMAGE,
    LWS,
    canary_revision,
    deployment_of,
    live_pods,
    lws_mode,
    pod_spec,
    template,
    template_revision,
)
from llm_oncall.sim.pods import CRASHLOOP, DOWN, READY, STARTING, Pod, Revision


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
        owner = (owner_ref("apps/v1", "StatefulSet", cfg.deployment, uid_of("sts", cfg.deployment)) if leader else
                 owner_ref("apps/v1", "StatefulSet", f"{cfg.deployment}-{group}", uid_of("sts", cfg.deployment, group)))
        annotations = {f"{LWS}/size": str(cfg.group_size)}
        if not leader:
            annotations[f"{LWS}/leader-name"] = f"{cfg.deployment}-{group}"
    else:
        labels = pod_labels(fleet, p)
        owner = owner_ref("apps/v1", "ReplicaSet", f"{cfg.deployment}-{p.revision.name}", owner_uid)
        annotations = {}
    meta = object_meta(p.name, ns, labels, annotations or None, owner)
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
               "metadata": object_meta(name, ns, labels, {"deployment.kubernetes.io/revision": str(number)})
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
                   "metadata": object_meta(rs_name, ns, rs_labels, ann,
                                     owner_ref("apps/v1", "Deployment", name, dep_uid))
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
            "metadata": object_meta(cfg.deployment, cfg.namespace, {"app": cfg.deployment})
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
