"""Diagnosis → plan: the runbook's emergency actions as typed actions on named objects.

The diagnosis names pods (its scope); the plan resolves them through the API to the objects a fix acts on:
owner Deployment (pod → ReplicaSet → Deployment) or LeaderWorkerSet (its labels), node, namespace, and for a
canary its HTTPRoute backend. Every name is validated before it reaches a path.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.actions import execute, ladder, pools
from llm_oncall.actions.gateway import CONTEXT_RANGE, SIM_GATEWAY_CONFIGMAP
from llm_oncall.actions.guard import RepeatOffender
from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, ActionTarget, DryRun, Plan, UnsafeName, action_id, check_name
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.signals.snapshot import Snapshot

LWS = "leaderworkerset.sigs.k8s.io"
REVISION = "deployment.kubernetes.io/revision"
ROUTER_CONFIGMAP = "router-config"
MANUAL = ("call_hardware", "notify", "pause_rollout")


@dataclass
class Scope:
    namespace: str
    workload: dict[str, Any] | None = None
    pods: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    selector: dict[str, str] = field(default_factory=dict)
    """The fleet's label selector (config `label_selector`): only matching workloads and pods are the fleet."""

    @property
    def workload_target(self) -> ActionTarget | None:
        if self.workload is None:
            return None
        m = self.workload["metadata"]
        return ActionTarget(kind=self.workload["kind"], namespace=self.namespace, name=m["name"],
                      api_version=self.workload["apiVersion"])


def resolve_scope(kube: Kube, diagnosis: Diagnosis, snapshot: Snapshot | None,
                  namespace: str | None = None, selector: dict[str, str] | None = None) -> Scope:
    labels = {p.name: dict(p.labels) for p in snapshot.pods} if snapshot is not None else {}
    ns = namespace or next((lab.get("namespace") for lab in labels.values() if lab.get("namespace")),
                           None) or kube.namespace
    scope = Scope(check_name(ns, "namespace"), selector=dict(selector or {}))
    for name in diagnosis.scope_pods:
        try:
            pod = kube.get("Pod", check_name(name, "pod name"), ns)
            if not _matches(pod, scope.selector):
                scope.problems.append(f"pod {name}: not in the fleet (label selector {scope.selector})")
                continue
            scope.pods.append(pod)
        except UnsafeName as exc:
            scope.problems.append(str(exc))
        except KubeError as exc:
            scope.problems.append(f"pod {name}: {exc}")
    for node in diagnosis.scope_nodes:
        try:
            scope.nodes.append(check_name(node, "node name"))
        except UnsafeName as exc:
            scope.problems.append(str(exc))
    for p in scope.pods:
        node = p["spec"].get("nodeName")
        if node and node not in scope.nodes:
            scope.nodes.append(check_name(node, "node name"))
    scope.workload = _workload(kube, scope, labels)
    return scope


def _workload(kube: Kube, scope: Scope, labels: dict[str, dict[str, str]]) -> dict[str, Any] | None:
    ns = scope.namespace
    for p in scope.pods:
        lab = p["metadata"].get("labels") or {}
        if f"{LWS}/name" in lab:
            return kube.get("LeaderWorkerSet", check_name(lab[f"{LWS}/name"]), ns)
        for o in p["metadata"].get("ownerReferences") or []:
            if o.get("kind") == "ReplicaSet" and o.get("controller"):
                rs = kube.get("ReplicaSet", check_name(o["name"]), ns)
                for d in rs["metadata"].get("ownerReferences") or []:
                    if d.get("kind") == "Deployment" and d.get("controller"):
                        return kube.get("Deployment", check_name(d["name"]), ns)
    names = {lab.get("deployment") for lab in labels.values() if lab.get("deployment")}
    for name in sorted(n for n in names if n):
        for kind in ("Deployment", "LeaderWorkerSet"):
            try:
                return kube.get(kind, check_name(name), ns)
            except (KubeError, UnsafeName):
                continue
    deps = kube.list("Deployment", ns, scope.selector or None)
    if len(deps) == 1:
        return deps[0]
    return None


def _matches(obj: dict[str, Any], selector: dict[str, str]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def incident_key(diagnosis: Diagnosis, first_page_t: float | None = None) -> str:
    return f"{diagnosis.incident}@{round(first_page_t if first_page_t is not None else diagnosis.t)}"


def build(kube: Kube, diagnosis: Diagnosis, snapshots: Sequence[Snapshot], ledger: Ledger | None,
          gateway: dict[str, str], namespace: str | None = None, now: float = 0.0,
          first_page_t: float | None = None, repeat: RepeatOffender | None = None,
          selector: dict[str, str] | None = None) -> Plan:
    snap = snapshots[-1] if snapshots else None
    scope = resolve_scope(kube, diagnosis, snap, namespace, selector)
    key = incident_key(diagnosis, first_page_t)
    plan_id = "p-" + hashlib.sha256(f"{key}/{now}".encode()).hexdigest()[:10]
    plan = Plan(id=plan_id, incident=diagnosis.incident, incident_key=key, diagnosis=diagnosis.to_json(),
                diagnosed_at=diagnosis.t, created_at=now, namespace=scope.namespace, gateway=gateway)
    if scope.problems:
        plan.manual.append({"action": "scope", "text": "; ".join(scope.problems)})
    for step in diagnosis.emergency_actions:
        kind = str(step.get("action"))
        params = dict(step.get("params") or {})
        made: list[Action] | None
        try:
            if kind == "gpu_repair":
                made = ladder.plan(kube, scope, diagnosis, snapshots, ledger, repeat or RepeatOffender(), key, now)
            else:
                made = _actions(kube, kind, params, scope, diagnosis, snapshots, ledger, gateway)
        except (KubeError, UnsafeName) as exc:
            plan.manual.append({"action": kind, "text": f"could not plan: {exc}"})
            continue
        if made is None:
            plan.manual.append({"action": kind, "text": str(step.get("text", ""))})
            continue
        for a in made:
            a.id = action_id(plan_id, a.kind, a.target)
            a.runbook_action = kind
            a.params["_incident_key"] = key
            if step.get("instead_of"):
                a.params["instead_of"] = str(step["instead_of"])
            plan.actions.append(a)
    return plan


def _actions(kube: Kube, kind: str, params: dict[str, Any], scope: Scope, d: Diagnosis,
             snapshots: Sequence[Snapshot], ledger: Ledger | None, gateway: dict[str, str]) -> list[Action] | None:
    ns = scope.namespace
    wl = scope.workload_target
    if kind in MANUAL:
        return None
    if kind == "scale_out":
        if wl is None or scope.workload is None:
            raise KubeError(404, "NotFound", "no Deployment or LeaderWorkerSet found for the scope", "list",
                            "apps/deployments", ns)
        cur = int(scope.workload["spec"]["replicas"])
        step = str(params.get("replicas", "+1"))
        if step.startswith("x"):  # a multiple of today's replicas: headroom relative to the fleet's own size
            want = max(cur + 1, math.ceil(cur * float(step[1:]) - 1e-9))
        else:
            want = cur + int(step) if step.startswith(("+", "-")) else int(step)
        why = f"{wl.kind} {wl.name}: {cur} → {want} replicas (runbook {step})"
        ratio = _feature(snapshots, d, "arrival_rate_ratio")
        sized = None
        if d.incident == "kv-capacity" and ratio is not None and ratio > 1.0:
            # the runbook's step is the minimum: size it to the load the evidence shows (+15 % headroom)
            sized = sized_replicas(cur, ratio)
            if sized > want:
                want = sized
                why = f"{wl.kind} {wl.name}: {cur} → {want} replicas (arrivals ×{ratio:.2f}; runbook {step} minimum)"
        a = scale_out(kube, scope, cur, want, why)
        if sized is not None:
            a.params["sized"] = want  # sized by the evidence: a later step may follow it (next_scale_step)
        return [a]
    if kind == "gateway_cap":
        target = ActionTarget(kind="ConfigMap", namespace=ns, name=SIM_GATEWAY_CONFIGMAP)
        a = Action(id="", kind="gateway_cap_max_tokens", target=target,
                   params={"max_tokens": int(params.get("max_tokens", 2048))}, revert={"max_tokens": 0},
                   why=f"cap max_tokens at {params.get('max_tokens', 2048)} at the gateway")
        if gateway.get("max_tokens") != "sim":
            a.dry_run = DryRun(ok=False, detail="no standard gateway caps max_tokens (Envoy Gateway, Gateway API, "
                               "GIE/llm-d, production-stack have no such field); nearest levers: rate-limit the "
                               "heavy clients, or mark them sheddable with an InferenceObjective of negative priority")
        return [a]
    if kind == "restart_group":
        out = []
        groups = {str((p["metadata"].get("labels") or {}).get(f"{LWS}/group-index")) for p in scope.pods}
        size = int(((scope.workload or {}).get("spec") or {}).get("leaderWorkerTemplate", {}).get("size", 1))
        for g in sorted(groups - {"None"}):
            lws = (scope.pods[0]["metadata"]["labels"] or {})[f"{LWS}/name"]
            leader = check_name(f"{lws}-{g}", "leader pod")
            pod = kube.get("Pod", leader, ns)
            out.append(Action(id="", kind="restart_group", target=ActionTarget(kind="Pod", namespace=ns, name=leader),
                              params={"leaderworkerset": lws, "group": int(g), "group_size": size},
                              precondition={"uid": pod["metadata"]["uid"]},
                              why=f"recreate group {g} of LeaderWorkerSet {lws} (delete leader {leader}, Foreground)"))
        if out:
            return out
        kind = "drain_pod"  # not a LeaderWorkerSet: the pods one by one
    if kind == "drain_pod":
        pods = [p for p in scope.pods]
        if not pods:
            return []
        node = pods[0]["spec"].get("nodeName", "")
        return [Action(id="", kind="evict_pods",
                       target=ActionTarget(kind="Node", namespace="", name=node) if node else wl or ActionTarget(
                           kind="Namespace", namespace="", name=ns),
                       params={"pods": [p["metadata"]["name"] for p in pods]},
                       precondition={"uids": [p["metadata"]["uid"] for p in pods]},
                       why=f"evict {len(pods)} pod(s) so they reschedule elsewhere")]
    if kind in ("cordon_node", "taint_node"):
        out = []
        for node in scope.nodes:
            n = kube.get("Node", node)
            t = ActionTarget(kind="Node", namespace="", name=node)
            if kind == "cordon_node":
                out.append(Action(id="", kind="cordon_node", target=t, params={},
                                  precondition={"resourceVersion": n["metadata"]["resourceVersion"]},
                                  revert={"unschedulable": False}, why=f"cordon {node}: nothing new lands there"))
            else:
                taint = {"key": "llm-oncall.io/" + d.incident, "value": "true",
                         "effect": str(params.get("effect", "NoSchedule"))}
                out.append(Action(id="", kind="taint_node", target=t, params={"taint": taint},
                                  precondition={"resourceVersion": n["metadata"]["resourceVersion"]},
                                  revert={"remove_taint": taint}, why=f"taint {node} {taint['key']}:{taint['effect']}"))
        return out
    if kind == "rollback" and params.get("object") == "router-config":
        return [_config_rollback(kube, ns, ledger)]
    if kind == "rollback":
        canary = _canary(kube, ns, d, scope)
        if canary is not None:
            return [canary]
        if wl is None or scope.workload is None or wl.kind != "Deployment":
            raise KubeError(404, "NotFound", "no Deployment to roll back", "get", "apps/deployments", ns)
        rev = (scope.workload["metadata"].get("annotations") or {}).get(REVISION)
        return [Action(id="", kind="rollback", target=wl, params={"to_revision": 0},
                       precondition={"revision": rev}, why=f"kubectl rollout undo deployment/{wl.name} (from "
                       f"revision {rev} to the previous one)")]
    if kind == "set_flag":
        if wl is None or scope.workload is None:
            raise KubeError(404, "NotFound", "no workload for the engine flags", "get", "apps/deployments", ns)
        flags = [f"--{k.replace('_', '-')}" for k, v in params.items() if v is True]
        m = scope.workload["metadata"]
        return [Action(id="", kind="set_engine_args", target=wl, params={"add": flags},
                       precondition={"resourceVersion": m["resourceVersion"], "generation": m.get("generation")},
                       revert={"remove": flags}, why=f"add {' '.join(flags)} to the vLLM container's args")]
    if kind == "rate_limit":
        return [_rate_limit(kube, ns, snapshots, params)]
    if kind == "route_by_length":
        return _route_by_length(kube, scope, params, snapshots)
    return None


def autoscalers(kube: Kube, wl: ActionTarget) -> list[dict[str, Any]]:
    """The HorizontalPodAutoscalers (autoscaling/v2) whose scaleTargetRef is this workload."""
    group = wl.api_version.rpartition("/")[0]
    out = []
    for h in kube.list("HorizontalPodAutoscaler", wl.namespace):
        ref = (h.get("spec") or {}).get("scaleTargetRef") or {}
        if (ref.get("kind"), ref.get("name")) == (wl.kind, wl.name) and \
                str(ref.get("apiVersion", "")).rpartition("/")[0] == group:
            out.append(h)
    return out


SCALE_HEADROOM = 1.15
"""A scale-out sized by the evidence leaves 15 % headroom over the load it shows."""


def sized_replicas(replicas_before: int, arrivals_ratio: float) -> int:
    """The replicas the load the evidence shows needs: the replicas that served the baseline × the arrivals' ratio to
    it, with SCALE_HEADROOM."""
    return math.ceil(replicas_before * arrivals_ratio * SCALE_HEADROOM)


def next_scale_step(kube: Kube, d: Diagnosis, snapshot: Snapshot | None, done: Sequence[Action], arrivals_ratio: float,
                    namespace: str | None = None, selector: dict[str, str] | None = None,
                    saturated: tuple[float, float] | None = None) -> Action | None:
    """The next step of a scale-out sized by the evidence (`done`: its executed steps, first first): the replicas the
    arrivals ask for now, from the replicas before the first step (the baseline's), when that is more than the
    workload has. `saturated` (arrivals/s, successes/s per serving pod) while the queue has not drained with every
    replica serving: what a pod delivers under this load is its capacity now (a pool that preempts and recomputes
    serves fewer than the baseline's per-pod rate), and the arrivals need that many pods, +15 %. None: no more are
    needed. The caps bound it as they bound every scale-out (actions/run.py)."""
    first = done[0]
    before = int(first.params["from"])
    want = sized_replicas(before, arrivals_ratio)
    why = f"arrivals ×{arrivals_ratio:.2f} of the {before} replicas' baseline"
    if saturated is not None and saturated[1] > 0:
        measured = math.ceil(saturated[0] / saturated[1] * SCALE_HEADROOM)
        if measured > want:
            want = measured
            why = (f"{saturated[0]:.1f} arrivals/s at the {saturated[1]:.1f}/s a pod serves while the queue stays "
                   f"(+{SCALE_HEADROOM - 1:.0%})")
    scope = resolve_scope(kube, d, snapshot, namespace, selector)
    wl = scope.workload_target
    if wl is None or scope.workload is None:
        return None
    cur = int(scope.workload["spec"]["replicas"])
    if want <= cur:
        return None
    n = len(done) + 1
    a = scale_out(kube, scope, cur, want, f"{wl.kind} {wl.name}: {cur} → {want} replicas, step {n} ({why}; the last "
                                          "step's replicas all serve and the incident has not recovered)")
    a.params["sized"] = want
    a.params["step"] = n
    return a


def scale_out(kube: Kube, scope: Scope, cur: int, want: int, why: str) -> Action:
    """Scale the workload out to `want` replicas — through its autoscaler when one owns the replicas: an HPA's
    `minReplicas` goes up (capped by its `maxReplicas`; the revert puts it back), a KEDA ScaledObject's HPA is
    left to KEDA (the action is reported blocked with the change to make). Without one: the /scale subresource."""
    wl = scope.workload_target
    assert wl is not None
    try:
        hpas = autoscalers(kube, wl)
    except KubeError as exc:
        if exc.code != 403:
            if exc.code == 404:  # the cluster serves no autoscaling/v2: nothing can own the replicas
                hpas = []
            else:
                raise
        else:
            a = Action(id="", kind="scale_out", target=wl, params={"replicas": want, "from": cur},
                       precondition={"replicas": cur}, revert={"replicas": cur}, why=why)
            a.dry_run = DryRun(ok=False, detail="cannot tell whether an autoscaler owns the replicas (a replicas "
                               f"patch would be undone by it): {exc.rbac or exc}")
            return a
    if not hpas:
        return Action(id="", kind="scale_out", target=wl, params={"replicas": want, "from": cur},
                      precondition={"replicas": cur}, revert={"replicas": cur}, why=why)
    if len(hpas) > 1:
        names = sorted(h["metadata"]["name"] for h in hpas)
        a = Action(id="", kind="scale_out", target=wl, params={"replicas": want, "from": cur},
                   precondition={"replicas": cur}, why=why)
        a.dry_run = DryRun(ok=False, detail=f"{len(hpas)} HPAs target {wl.ref()} ({', '.join(names)}): the HPA "
                           "controller does not scale it (AmbiguousSelector); resolve that first")
        return a
    hpa = hpas[0]
    name = check_name(hpa["metadata"]["name"])
    lo, hi = int(hpa["spec"].get("minReplicas", 1)), int(hpa["spec"]["maxReplicas"])
    params = {"replicas": want, "from": cur, "hpa": name, "min_replicas": lo, "max_replicas": hi,
              "workload": wl.ref()}
    owner = execute.keda_owner(hpa)
    if owner is not None:
        api = next((o.get("apiVersion") for o in hpa["metadata"].get("ownerReferences") or []
                    if o.get("kind") == "ScaledObject"), "keda.sh/v1alpha1")
        a = Action(id="", kind="scale_out", params=params, why=why + f"; via KEDA ScaledObject {owner}",
                   target=ActionTarget(kind="ScaledObject", namespace=scope.namespace, name=check_name(owner),
                                 api_version=str(api)))
        a.dry_run = DryRun(ok=False, detail=execute.keda_reason(a))
        return a
    target = ActionTarget(kind="HorizontalPodAutoscaler", namespace=scope.namespace, name=name,
                    api_version=str(hpa.get("apiVersion") or "autoscaling/v2"))
    floor = min(want, hi)
    why = (f"{why}; through HPA {name}, which owns the replicas: its minReplicas goes from {lo} up to the replica "
           f"count" + (f", capped by its maxReplicas {hi}" if want > hi else f" (maxReplicas {hi})"))
    a = Action(id="", kind="scale_out", target=target, params={**params, "replicas": floor},
               precondition={"minReplicas": lo, "replicas": cur}, revert={"replicas": lo, "minReplicas": lo}, why=why)
    if hi <= cur:
        a.dry_run = DryRun(ok=False, detail=f"HPA {name} is at its maxReplicas {hi} ({cur} replicas): raising its "
                           "floor adds nothing; raising maxReplicas is a capacity decision for a human")
    return a


def _route_by_length(kube: Kube, scope: Scope, params: dict[str, Any],
                     snapshots: Sequence[Snapshot]) -> list[Action]:
    """A dedicated long-context pool (llm-d labels): sized by the long prompts' share of the prompt tokens, carved
    from Ready pods at once and replaced in the short pool by as many new replicas."""
    ns, wl = scope.namespace, scope.workload_target
    pods = sorted(p["metadata"]["name"] for p in kube.list("Pod", ns, _selector(scope))
                  if _ready(p) and not p["metadata"].get("deletionTimestamp"))
    if not pods:
        raise KubeError(404, "NotFound", "no Ready pod of the workload to form a long-context pool", "list",
                        "pods", ns)
    threshold = int(params.get("threshold_tokens", 16384))
    share = pools.long_share(snapshots, threshold)
    n_long = min(pools.long_pool_size(len(pods), share), max(1, len(pods) - 1))
    sized = (f"{share.tokens:.0%} of the prompt tokens are in prompts > {threshold} ({share.requests:.1%} of "
             f"{share.window_requests:.0f} requests) ×{pools.HEADROOM} headroom" if share is not None
             else "no prompt-length histogram: a quarter of the pods")
    out: list[Action] = []
    if wl is not None and scope.workload is not None:
        cur = int(scope.workload["spec"]["replicas"])
        out.append(scale_out(kube, scope, cur, cur + n_long,
                             f"{wl.kind} {wl.name}: {cur} → {cur + n_long} replicas: the long-context pool is "
                             f"dedicated, so the short pool gets its {n_long} pod(s) back"))
    out.append(Action(id="", kind="gateway_route_long_prompts",
                      target=wl or ActionTarget(kind="Namespace", namespace="", name=ns),
                      params={"threshold_tokens": threshold, "max_tokens": 131072, "long_pool": pods[-n_long:],
                              "short_pool": pods[:-n_long], "selector": _selector(scope), "label": CONTEXT_RANGE},
                      revert={"remove_label": CONTEXT_RANGE},
                      why=f"prompts > {threshold} tokens to a long-context pool of {n_long} pod(s) ({sized}); every "
                          "other pod of the workload, new replicas included, labelled short (llm-d "
                          "context-length-aware scorer with filtering; an unlabelled pod accepts any length)"))
    return out


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _feature(snapshots: Sequence[Snapshot], d: Diagnosis, name: str) -> float | None:
    for e in d.evidence:
        if e.signal == name and isinstance(e.value, int | float):
            return float(e.value)
    return None


def _selector(scope: Scope) -> dict[str, str]:
    if scope.workload is None:
        return {}
    if scope.workload["kind"] == "LeaderWorkerSet":
        return {f"{LWS}/name": scope.workload["metadata"]["name"]}
    return dict(scope.workload["spec"]["selector"].get("matchLabels") or {})


def _canary(kube: Kube, ns: str, d: Diagnosis, scope: Scope) -> Action | None:
    """A revision serving through a weighted HTTPRoute backend: its weight goes to 0 (the stable one keeps all)."""
    rev = d.scope_revision
    if not rev:
        return None
    rss = kube.list("ReplicaSet", ns, {"pod-template-hash": check_name(rev, "revision")})
    owners = {o["name"] for rs in rss for o in rs["metadata"].get("ownerReferences") or []
              if o.get("kind") == "Deployment"}
    try:
        routes = kube.list("HTTPRoute", ns)
    except KubeError:
        return None
    for route in routes:
        refs = route["spec"]["rules"][0].get("backendRefs") or []
        for i, ref in enumerate(refs):
            if ref.get("name") in owners and len(refs) > 1 and ref.get("weight", 1) > 0:
                return Action(id="", kind="rollback",
                              target=ActionTarget(kind="HTTPRoute", namespace=ns, name=route["metadata"]["name"],
                                            api_version="gateway.networking.k8s.io/v1"),
                              params={"backend": ref["name"], "index": i, "weight": 0},
                              precondition={"weight": ref.get("weight", 1)},
                              revert={"weight": ref.get("weight", 1)},
                              why=f"canary rollback: HTTPRoute {route['metadata']['name']} backend {ref['name']} "
                                  f"(revision {rev}) weight {ref.get('weight', 1)} → 0")
    return None


def _config_rollback(kube: Kube, ns: str, ledger: Ledger | None) -> Action:
    cm = kube.get("ConfigMap", ROUTER_CONFIGMAP, ns)
    cur = cm.get("data") or {}
    target = ActionTarget(kind="ConfigMap", namespace=ns, name=ROUTER_CONFIGMAP)
    seen = ledger.configmap_versions(ns, ROUTER_CONFIGMAP) if ledger is not None else []
    earlier = [v for v in seen if v["data"] != cur]
    a = Action(id="", kind="config_rollback", target=target, params={"data": {}},
               precondition={"resourceVersion": cm["metadata"]["resourceVersion"]}, revert={"data": cur})
    if not earlier:
        a.dry_run = DryRun(ok=False, detail="the store has seen no earlier version of this ConfigMap; nothing to "
                           "roll back to")
        a.why = "roll back the router config (no earlier version known)"
        return a
    prev = earlier[-1]
    a.params = {"data": prev["data"], "to_resource_version": prev["resource_version"]}
    a.why = (f"router ConfigMap back to resourceVersion {prev['resource_version']} (seen at "
             f"{prev['seen_at']:.0f}), the last version before the change")
    return a


def _rate_limit(kube: Kube, ns: str, snapshots: Sequence[Snapshot], params: dict[str, Any]) -> Action:
    """Each storming client (all clients when none storms) limited to 1.2× its first-attempt baseline. With the
    runbook's `retry_budget` (a share of that baseline), the client's retries get a bucket of their own: retries
    can no longer crowd out first attempts, and the fleet's load is held at (1.2 + budget)× the normal demand at
    most while it drains (docs/actions.md, rate limit)."""
    route = next((r["metadata"]["name"] for r in kube.list("HTTPRoute", ns)), None)
    if route is None:
        raise KubeError(404, "NotFound", "no HTTPRoute for the model: nothing to attach a rate limit to", "list",
                        "gateway.networking.k8s.io/httproutes", ns)
    half = snapshots[: max(1, len(snapshots) // 2)]

    def rate(s: Snapshot, name: str) -> dict[str, float]:
        return {lab.get("client", ""): v for lab, v in s.extra_rates(name)}
    base: dict[str, list[float]] = {}
    for s in half:
        got, retried = rate(s, "gateway_requests_received_total"), rate(s, "gateway_retries_total")
        for c, v in got.items():
            base.setdefault(c, []).append(max(0.0, v - retried.get(c, 0.0)))
    last = snapshots[-1] if snapshots else None
    now_got = rate(last, "gateway_requests_received_total") if last else {}
    now_retry = rate(last, "gateway_retries_total") if last else {}
    storming = [c for c, v in now_got.items() if v > 0 and now_retry.get(c, 0.0) / v > 0.3]
    budget = float(params["retry_budget"]) if params.get("retry_budget") is not None else None
    limits, retry_limits = {}, {}
    for c in storming or sorted(base):
        b = statistics.median(base.get(c) or [1.0])
        limits[c] = max(60, math.ceil(b * 60 * 1.2))
        if budget is not None and c in storming:
            retry_limits[c] = max(6, math.ceil(b * 60 * budget))
    name = check_name(f"{route}-oncall-ratelimit")
    out = {"route": route, "limits": limits, "header": "x-client-id"}
    firsts = ", ".join(f"{c} to {v}/min" for c, v in sorted(limits.items()))
    if retry_limits and budget is not None:
        out["retry_limits"] = retry_limits
        retries = ", ".join(f"{v}/min" for _, v in sorted(retry_limits.items()))
        why = (f"rate-limit first attempts of {firsts} (1.2× each client's first-attempt baseline), their retries to "
               f"{retries} (a {budget:.0%} retry budget)")
    else:
        why = f"rate-limit {firsts} (1.2× each client's first-attempt baseline)"
    return Action(id="", kind="gateway_rate_limit",
                  target=ActionTarget(kind="BackendTrafficPolicy", namespace=ns, name=name,
                                api_version="gateway.envoyproxy.io/v1alpha1"),
                  params=out, revert={"delete": True}, why=why)
