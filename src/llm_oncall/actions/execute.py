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

from llm_oncall.actions import gateway
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
    def check(self, kube: Kube, a: Action) -> None:
        cur = kube.get(a.target.kind, a.target.name, a.target.namespace)["spec"]["replicas"]
        if cur != a.precondition.get("replicas") and cur != a.params["replicas"]:
            raise TargetChanged(f"{a.target.ref()} has {cur} replicas; the plan saw {a.precondition.get('replicas')}")

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        out = kube.scale(a.target.kind, a.target.name, int(a.params["replicas"]), a.target.namespace, dry_run)
        return {"replicas": out.get("spec", {}).get("replicas")}

    def landed(self, kube: Kube, a: Action) -> bool:
        cur = kube.get(a.target.kind, a.target.name, a.target.namespace)["spec"]["replicas"]
        return bool(cur >= int(a.params["replicas"]))


class RestartGroup:
    """As the LeaderWorkerSet controller does: delete the group's leader pod with Foreground propagation."""

    def check(self, kube: Kube, a: Action) -> None:
        pod = kube.get("Pod", a.target.name, a.target.namespace)
        if pod["metadata"]["uid"] != a.precondition.get("uid"):
            raise TargetChanged(f"{a.target.ref()} was recreated since the plan (uid changed)")

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        if not dry_run and self.landed(kube, a):
            return {"already": "the group was recreated"}
        kube.delete("Pod", a.target.name, a.target.namespace, foreground=True, dry_run=dry_run)
        return {"deleted": a.target.name, "propagationPolicy": "Foreground"}

    def landed(self, kube: Kube, a: Action) -> bool:
        try:
            pod = kube.get("Pod", a.target.name, a.target.namespace)
        except KubeError as exc:
            if exc.code == 404:
                return True
            raise
        return bool(pod["metadata"]["uid"] != a.precondition.get("uid"))


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
