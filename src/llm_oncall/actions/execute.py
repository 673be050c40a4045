"""Executing one action: the API calls, read-modify-write with resourceVersions, retries that never duplicate.

Every handler is idempotent by construction: it computes an absolute target from what the plan saw, checks the
target has not changed since (else `TargetChanged`: re-plan), and `landed()` tells whether the change is already
there — so a retry after a 500 or a timeout whose write did land does not repeat it.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any, Protocol

from llm_oncall.actions import gateway, repair
from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.actions.model import Action, Blocked, TargetChanged

REVISION = "deployment.kubernetes.io/revision"
KEPT_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", REVISION,
                    "deployment.kubernetes.io/revision-history", "deployment.kubernetes.io/desired-replicas",
                    "deployment.kubernetes.io/max-replicas", "deprecated.deployment.rollback.to")


class Handler(Protocol):
    def check(self, kube: Kube, a: Action) -> None: ...

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any: ...

    def landed(self, kube: Kube, a: Action) -> bool: ...


def _container_index(spec: dict[str, Any], name: str = "vllm") -> int:
    cs = spec["containers"]
    return next((i for i, c in enumerate(cs) if c.get("name") == name), 0)


def pod_template(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    if obj.get("kind") == "LeaderWorkerSet" or "leaderWorkerTemplate" in spec:
        return dict(spec["leaderWorkerTemplate"]["workerTemplate"])
    return dict(spec["template"])


def template_path(obj: dict[str, Any]) -> str:
    return "/spec/leaderWorkerTemplate/workerTemplate" if "leaderWorkerTemplate" in obj["spec"] else "/spec/template"


class ScaleOut:
    """Replicas up. With an HPA on the workload the target is the HPA and the change is its floor
    (`spec.minReplicas`, capped by `maxReplicas`, written with the resourceVersion it read): the HPA's next sync
    scales the workload there and keeps it there, where a replicas patch would be undone. A KEDA ScaledObject's
    HPA is never written (KEDA would put it back): that action is reported blocked, with what to change instead."""

    def check(self, kube: Kube, a: Action) -> None:
        if a.target.kind == "ScaledObject":
            raise Blocked(keda_reason(a))
        if a.target.kind == "HorizontalPodAutoscaler":
            hpa = kube.get(a.target.kind, a.target.name, a.target.namespace)
            owner = keda_owner(hpa)
            if owner is not None:
                raise Blocked(f"{a.target.ref()} is now managed by KEDA ScaledObject {owner}: not written")
            cur = int(hpa["spec"].get("minReplicas", 1))
            if cur != a.precondition.get("minReplicas") and cur < self._floor(hpa, a):
                raise TargetChanged(f"{a.target.ref()} has minReplicas {cur}; the plan saw "
                                    f"{a.precondition.get('minReplicas')}")
            return
        cur = kube.get(a.target.kind, a.target.name, a.target.namespace)["spec"]["replicas"]
        if cur != a.precondition.get("replicas") and cur != a.params["replicas"]:
            raise TargetChanged(f"{a.target.ref()} has {cur} replicas; the plan saw {a.precondition.get('replicas')}")

    @staticmethod
    def _floor(hpa: dict[str, Any], a: Action) -> int:
        return min(int(a.params["replicas"]), int(hpa["spec"]["maxReplicas"]))

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        if a.target.kind == "ScaledObject":
            raise Blocked(keda_reason(a))
        if a.target.kind == "HorizontalPodAutoscaler":
            hpa = kube.get(a.target.kind, a.target.name, a.target.namespace)
            cur, hi = int(hpa["spec"].get("minReplicas", 1)), int(hpa["spec"]["maxReplicas"])
            floor = self._floor(hpa, a)
            res: dict[str, Any] = {"minReplicas": max(cur, floor), "from": cur, "maxReplicas": hi}
            if int(a.params["replicas"]) > hi:
                res["capped_by_maxReplicas"] = True
            if floor <= cur:
                return {**res, "already": f"minReplicas is {cur} already"}
            body = {"metadata": {"resourceVersion": hpa["metadata"]["resourceVersion"]},
                    "spec": {"minReplicas": floor}}
            kube.patch(a.target.kind, a.target.name, body, "merge", a.target.namespace, dry_run)
            return res
        out = kube.scale(a.target.kind, a.target.name, int(a.params["replicas"]), a.target.namespace, dry_run)
        return {"replicas": out.get("spec", {}).get("replicas")}

    def landed(self, kube: Kube, a: Action) -> bool:
        if a.target.kind == "ScaledObject":
            return False
        obj = kube.get(a.target.kind, a.target.name, a.target.namespace)
        if a.target.kind == "HorizontalPodAutoscaler":
            return int(obj["spec"].get("minReplicas", 1)) >= self._floor(obj, a)
        return bool(obj["spec"]["replicas"] >= int(a.params["replicas"]))

    def revert(self, kube: Kube, a: Action) -> dict[str, Any]:
        """Put the HPA's floor back where the plan found it — only if it is still the one this action set (a
        change made since by someone else is theirs, and is left alone). Without an HPA: replicas back."""
        if a.revert is None or a.target.kind == "ScaledObject":
            return {"reverted": False, "why": "nothing was changed"}
        if a.target.kind != "HorizontalPodAutoscaler":
            kube.scale(a.target.kind, a.target.name, int(a.revert["replicas"]), a.target.namespace)
            return {"reverted": True, "replicas": int(a.revert["replicas"])}
        hpa = kube.get(a.target.kind, a.target.name, a.target.namespace)
        cur, old = int(hpa["spec"].get("minReplicas", 1)), int(a.revert["minReplicas"])
        done = a.result.get("minReplicas") if isinstance(a.result, dict) else None
        mine = done if isinstance(done, int) else None
        if cur == old:
            return {"reverted": True, "minReplicas": old, "already": True}
        if mine is not None and cur != mine:
            return {"reverted": False, "why": f"minReplicas is {cur}, not the {mine} this action set: left alone"}
        body = {"metadata": {"resourceVersion": hpa["metadata"]["resourceVersion"]}, "spec": {"minReplicas": old}}
        kube.patch(a.target.kind, a.target.name, body, "merge", a.target.namespace)
        return {"reverted": True, "minReplicas": old}


KEDA_LABEL = "scaledobject.keda.sh/name"


def keda_owner(hpa: dict[str, Any]) -> str | None:
    """The KEDA ScaledObject that manages this HPA (its controller owner reference, or KEDA's label), if any."""
    for o in hpa["metadata"].get("ownerReferences") or []:
        if o.get("kind") == "ScaledObject" and str(o.get("apiVersion", "")).startswith("keda.sh/"):
            return str(o["name"])
    label = (hpa["metadata"].get("labels") or {}).get(KEDA_LABEL)
    return str(label) if label else None


def keda_reason(a: Action) -> str:
    p = a.params
    return (f"HPA {p.get('hpa')} is managed by KEDA ScaledObject {a.target.name} (keda.sh): KEDA rewrites the HPA "
            f"from the ScaledObject, so the autopilot does not patch it. To scale out, raise the ScaledObject's "
            f"spec.minReplicaCount from {p.get('min_replicas')} to {p.get('replicas')} (≤ maxReplicaCount "
            f"{p.get('max_replicas')}) where it is managed (e.g. its GitOps source)")


def revert(kube: Kube, a: Action) -> dict[str, Any]:
    """Undo an executed action where its handler knows how (today: scale_out, HPA-aware)."""
    h = handler(a)
    undo = getattr(h, "revert", None)
    if undo is None:
        return {"reverted": False, "why": f"no handler revert for {a.kind}"}
    result: dict[str, Any] = undo(kube, a)
    return result


def effect(kube: Kube, a: Action) -> tuple[bool, str] | None:
    """The action's own verification, where its handler has one (the repair ladder's rungs): did it do what it is
    for? None: the incident's recovery signal is the only judge."""
    check = getattr(handler(a), "effect", None)
    if check is None:
        return None
    try:
        ok, why = check(kube, a)
    except KubeError as exc:
        return False, f"could not verify: {exc}"
    return bool(ok), str(why)


class RestartGroup:
    """As the LeaderWorkerSet controller does: delete the group's leader pod with Foreground propagation."""

    foreground = True
    replaced = "the group was recreated"

    def check(self, kube: Kube, a: Action) -> None:
        pod = kube.get("Pod", a.target.name, a.target.namespace)
        if pod["metadata"]["uid"] != a.precondition.get("uid"):
            raise TargetChanged(f"{a.target.ref()} was replaced since the plan (uid changed)")

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        if not dry_run and self.landed(kube, a):
            return {"already": self.replaced}
        kube.delete("Pod", a.target.name, a.target.namespace, foreground=self.foreground, dry_run=dry_run)
        return {"deleted": a.target.name, "propagationPolicy": "Foreground"} if self.foreground else {
            "deleted": a.target.name}

    def landed(self, kube: Kube, a: Action) -> bool:
        try:
            pod = kube.get("Pod", a.target.name, a.target.namespace)
        except KubeError as exc:
            if exc.code == 404:
                return True
            raise
        return bool(pod["metadata"]["uid"] != a.precondition.get("uid"))


class RestartPod(RestartGroup):
    """One pod (the repair ladder's first rung, a contained error): deleted, its controller recreates it."""

    foreground = False
    replaced = "the pod was replaced"

    def effect(self, kube: Kube, a: Action) -> tuple[bool, str]:
        done = self.landed(kube, a)
        return done, f"pod {a.target.name} {'restarted' if done else 'was not restarted'}"


class Cordon:
    def check(self, kube: Kube, a: Action) -> None:
        kube.get("Node", a.target.name)

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        kube.patch("Node", a.target.name, {"spec": {"unschedulable": True}}, "strategic", dry_run=dry_run)
        return {"unschedulable": True}

    def landed(self, kube: Kube, a: Action) -> bool:
        return bool(kube.get("Node", a.target.name)["spec"].get("unschedulable"))


class Taint:
    """spec.taints is an atomic list: read, add (unique by key+effect), write back guarded by resourceVersion."""

    def check(self, kube: Kube, a: Action) -> None:
        kube.get("Node", a.target.name)

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        node = kube.get("Node", a.target.name)
        taints = list(node["spec"].get("taints") or [])
        new = {k: v for k, v in a.params["taint"].items() if v is not None}
        if any(t.get("key") == new["key"] and t.get("effect") == new["effect"] for t in taints):
            return {"taints": taints, "already": True}
        body = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                "spec": {"taints": [*taints, new]}}
        out = kube.patch("Node", a.target.name, body, "merge", dry_run=dry_run)
        return {"taints": out.get("spec", {}).get("taints")}

    def landed(self, kube: Kube, a: Action) -> bool:
        t = a.params["taint"]
        taints = kube.get("Node", a.target.name)["spec"].get("taints") or []
        return any(x.get("key") == t["key"] and x.get("effect") == t["effect"] for x in taints)


class Evict:
    """policy/v1 Evictions (PDBs respected); 429 is retried with back-off, then reported as blocked."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep, attempts: int = 4) -> None:
        self.sleep = sleep
        self.attempts = attempts

    def check(self, kube: Kube, a: Action) -> None:
        for name, uid in zip(a.params["pods"], a.precondition.get("uids", []), strict=False):
            pod = kube.get("Pod", name, a.target.namespace)
            if pod["metadata"]["uid"] != uid:
                raise TargetChanged(f"pod {name} was replaced since the plan")

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        done = []
        for name in a.params["pods"]:
            if not dry_run and self._gone(kube, a, name):
                done.append(name)
                continue
            delay = 0.5
            for attempt in range(self.attempts):
                try:
                    kube.evict(name, a.target.namespace, dry_run=dry_run)
                    break
                except KubeError as exc:
                    if exc.code == 404:
                        break
                    if exc.code != 429:
                        raise
                    if attempt == self.attempts - 1:
                        raise Blocked(f"eviction of {name} refused {self.attempts}× (429: {exc.message}); "
                                      f"evicted so far: {done}") from None
                    self.sleep(delay)
                    delay *= 2
            done.append(name)
        return {"evicted": done}

    def _gone(self, kube: Kube, a: Action, name: str) -> bool:
        uids = dict(zip(a.params["pods"], a.precondition.get("uids", []), strict=False))
        try:
            return bool(kube.get("Pod", name, a.target.namespace)["metadata"]["uid"] != uids.get(name))
        except KubeError as exc:
            if exc.code == 404:
                return True
            raise

    def landed(self, kube: Kube, a: Action) -> bool:
        return all(self._gone(kube, a, n) for n in a.params["pods"])


class RolloutUndo:
    """`kubectl rollout undo` exactly (actions.md §1.5): the ReplicaSet with the 2nd-highest revision, its
    template without pod-template-hash, annotations merged, one JSON patch, no resourceVersion guard."""

    def _history(self, kube: Kube, a: Action) -> tuple[dict[str, Any], dict[str, Any] | None]:
        dep = kube.get("Deployment", a.target.name, a.target.namespace)
        sel = dep["spec"]["selector"].get("matchLabels") or {}
        uid = dep["metadata"]["uid"]
        rss = [rs for rs in kube.list("ReplicaSet", a.target.namespace, sel)
               if any(o.get("uid") == uid and o.get("controller") for o in rs["metadata"].get("ownerReferences", []))]

        def number(rs: dict[str, Any]) -> int:
            return int((rs["metadata"].get("annotations") or {}).get(REVISION, "0"))
        rss.sort(key=number, reverse=True)
        want = a.params.get("to_revision")
        if want:
            return dep, next((rs for rs in rss if number(rs) == int(want)), None)
        return dep, rss[1] if len(rss) > 1 else None

    def check(self, kube: Kube, a: Action) -> None:
        dep = kube.get("Deployment", a.target.name, a.target.namespace)
        rev = (dep["metadata"].get("annotations") or {}).get(REVISION)
        if rev != a.precondition.get("revision"):
            raise TargetChanged(f"{a.target.ref()} is at revision {rev}; the plan saw {a.precondition.get('revision')}")

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        dep, rs = self._history(kube, a)
        if rs is None:
            raise KubeError(404, "NotFound", f'no rollout history found for deployment "{a.target.name}"', "list",
                            "apps/replicasets", a.target.namespace)
        if dep["spec"].get("paused"):
            raise Blocked(f"deployment {a.target.name} is paused; resume it before rolling back")
        tpl = copy.deepcopy(rs["spec"]["template"])
        (tpl.get("metadata") or {}).get("labels", {}).pop("pod-template-hash", None)
        cur = copy.deepcopy(dep["spec"]["template"])
        (cur.get("metadata") or {}).get("labels", {}).pop("pod-template-hash", None)
        if tpl == cur:
            return {"skipped": "the template already matches", "revision": rs["metadata"]["annotations"][REVISION]}
        dep_ann = dep["metadata"].get("annotations") or {}
        ann = {k: v for k, v in dep_ann.items() if k in KEPT_ANNOTATIONS}
        ann.update({k: v for k, v in (rs["metadata"].get("annotations") or {}).items() if k not in KEPT_ANNOTATIONS})
        patch = [{"op": "replace", "path": "/spec/template", "value": tpl},
                 {"op": "replace", "path": "/metadata/annotations", "value": ann}]
        kube.patch("Deployment", a.target.name, patch, "json", a.target.namespace, dry_run)
        return {"to_revision": rs["metadata"]["annotations"][REVISION], "replicaset": rs["metadata"]["name"]}

    def landed(self, kube: Kube, a: Action) -> bool:
        dep = kube.get("Deployment", a.target.name, a.target.namespace)
        return (dep["metadata"].get("annotations") or {}).get(REVISION) != a.precondition.get("revision")


class SetEngineArgs:
    """Add engine flags (e.g. --enforce-eager) to the vLLM container's args: a JSON patch that tests the args it
    read, so a concurrent change fails it (re-read, retry) instead of being overwritten."""

    def check(self, kube: Kube, a: Action) -> None:
        obj = kube.get(a.target.kind, a.target.name, a.target.namespace)
        if obj["metadata"]["resourceVersion"] != a.precondition.get("resourceVersion") and not self.landed(kube, a):
            gen = obj["metadata"].get("generation")
            if gen != a.precondition.get("generation"):
                raise TargetChanged(f"{a.target.ref()} changed since the plan (generation {gen})")

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        obj = kube.get(a.target.kind, a.target.name, a.target.namespace)
        spec = pod_template(obj)["spec"]
        i = _container_index(spec)
        args = list(spec["containers"][i].get("args") or [])
        add = [x for x in a.params["add"] if x not in args]
        if not add:
            return {"args": args, "already": True}
        path = f"{template_path(obj)}/spec/containers/{i}/args"
        patch = [{"op": "test", "path": path, "value": args}, {"op": "replace", "path": path, "value": args + add}]
        kube.patch(a.target.kind, a.target.name, patch, "json", a.target.namespace, dry_run)
        return {"args": args + add}

    def landed(self, kube: Kube, a: Action) -> bool:
        obj = kube.get(a.target.kind, a.target.name, a.target.namespace)
        spec = pod_template(obj)["spec"]
        args = spec["containers"][_container_index(spec)].get("args") or []
        return all(x in args for x in a.params["add"])


class ConfigRollback:
    """The router ConfigMap back to the version seen before onset, guarded by the resourceVersion the plan saw."""

    def check(self, kube: Kube, a: Action) -> None:
        cm = kube.get("ConfigMap", a.target.name, a.target.namespace)
        if cm["metadata"]["resourceVersion"] != a.precondition.get("resourceVersion") and not self.landed(kube, a):
            raise TargetChanged(f"{a.target.ref()} changed since the plan")

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        if not dry_run and self.landed(kube, a):
            return {"already": True}
        cm = kube.get("ConfigMap", a.target.name, a.target.namespace)
        body = {"metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]}, "data": a.params["data"]}
        out = kube.patch("ConfigMap", a.target.name, body, "merge", a.target.namespace, dry_run)
        return {"data": out.get("data")}

    def landed(self, kube: Kube, a: Action) -> bool:
        cm = kube.get("ConfigMap", a.target.name, a.target.namespace)
        return all((cm.get("data") or {}).get(k) == v for k, v in a.params["data"].items())


HANDLERS: dict[str, Callable[[], Handler]] = {
    "scale_out": ScaleOut, "restart_group": RestartGroup, "cordon_node": Cordon, "taint_node": Taint,
    "evict_pods": Evict, "set_engine_args": SetEngineArgs, "config_rollback": ConfigRollback,
    "gateway_rate_limit": gateway.EnvoyRateLimit, "gateway_cap_max_tokens": gateway.SimGatewayCap,
    "gateway_route_long_prompts": gateway.LlmdLengthRouting,
    "restart_pod": RestartPod, "reset_gpu": repair.ResetGpu, "reboot_node": repair.RebootNode,
    "hardware_ticket": repair.HardwareTicket,
}


def handler(a: Action, sleep: Callable[[float], None] = time.sleep) -> Handler:
    if a.kind == "rollback":
        return gateway.CanaryWeight() if a.target.kind == "HTTPRoute" else RolloutUndo()
    if a.kind == "evict_pods":
        return Evict(sleep)
    if a.kind == "gateway_route_long_prompts":
        return gateway.LlmdLengthRouting(sleep)
    return HANDLERS[a.kind]()


def run(kube: Kube, a: Action, dry_run: bool, sleep: Callable[[float], None] = time.sleep,
        attempts: int = 4) -> Any:
    """One action, with retries: 409 → fresh read and retry; 429 → back off; 5xx/timeout → check whether it
    landed (idempotency), else retry; 403 and other 4xx → raise (the caller reports the missing RBAC)."""
    h = handler(a, sleep)
    if not dry_run:
        h.check(kube, a)
    delay = 0.25
    for attempt in range(attempts):
        try:
            return h.apply(kube, a, dry_run)
        except KubeError as exc:
            last = attempt == attempts - 1
            if exc.code == 409 or (exc.code == 422 and "test" in exc.message.lower()):
                if last:
                    raise
                continue  # the handler re-reads the object on the next attempt
            if exc.code == 429:
                if last:
                    raise Blocked(f"{exc.resource}: 429 {exc.message} ({attempts} attempts)") from None
                sleep(delay)
                delay *= 2
                continue
            if exc.transient:
                if not dry_run and _landed(h, kube, a):
                    return {"landed": True, "note": f"the write landed before the error ({exc}); not repeated"}
                if last:
                    raise
                sleep(delay)
                delay *= 2
                continue
            raise
    raise AssertionError("unreachable")


def _landed(h: Handler, kube: Kube, a: Action) -> bool:
    try:
        return h.landed(kube, a)
    except KubeError:
        return False
