"""plan → dry-run → guard → execute → verify, every step audited. Used by `act plan|apply` and `drill --act`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from llm_oncall.actions import execute, gateway, plan
from llm_oncall.actions.guard import DELETES, Mode, Policy, decide, step_limit
from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, Blocked, DryRun, Guard, Plan, TargetChanged, UnsafeName, action_id
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.signals.snapshot import Snapshot

ROUTER_CONFIGMAP = plan.ROUTER_CONFIGMAP


class Fence(Protocol):
    """May this process execute `a` now? `begin` answers None (yes) or why not, right before the API call;
    `end` hears the outcome."""

    def begin(self, p: Plan, a: Action) -> str | None: ...

    def end(self, p: Plan, a: Action) -> None: ...


def sized_steps(p: Plan) -> list[Action]:
    """The plan's executed scale-out steps sized from the evidence: only these can take a next step."""
    return [a for a in p.actions if a.kind == "scale_out" and a.status == "executed" and "sized" in a.params]


class Actuator:
    def __init__(self, kube: Kube, ledger: Ledger, policy: Policy, mode: Mode = "propose", actor: str = "llm-oncall",
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 fence: Fence | None = None, selector: dict[str, str] | None = None) -> None:
        self.kube = kube
        self.selector = dict(selector or {})
        """The fleet's label selector (its workloads and pods; config `label_selector`)."""
        self.fence = fence
        """Checked immediately before every execution (service/leader.py: only the Lease holder acts)."""
        self.ledger = ledger
        self.policy = policy
        self.mode: Mode = mode
        self.actor = actor
        self.clock = clock
        self.sleep = sleep

    # ---- what the store sees ------------------------------------------------------------------------
    def observe_config(self, namespace: str, at: float) -> None:
        """Remember the router ConfigMap's version (a later config rollback goes back to one seen before onset)."""
        try:
            cm = self.kube.get("ConfigMap", ROUTER_CONFIGMAP, namespace)
        except KubeError:
            return
        self.ledger.saw_configmap(namespace, ROUTER_CONFIGMAP, cm["metadata"]["resourceVersion"], cm.get("data") or {},
                                  at)

    # ---- plan ---------------------------------------------------------------------------------------
    def plan(self, diagnosis: Diagnosis, snapshots: Sequence[Snapshot], namespace: str | None = None,
             first_page_t: float | None = None, not_serving: Sequence[str] = ()) -> Plan:
        """`not_serving`: pods the telemetry shows serving nothing (hung, crash-looping): they are no capacity, so
        deleting them is not capped as taking capacity away."""
        now = self.clock()
        ns = namespace or self.kube.namespace
        gw = gateway.detect(self.kube, ns)
        p = plan.build(self.kube, diagnosis, snapshots, self.ledger, gw, namespace, now, first_page_t,
                       repeat=self.policy.repeat_offender, selector=self.selector)
        self.ledger.audit(self.actor, p.id, "", "plan", {"incident": p.incident, "actions": [a.kind for a in p.actions],
                                                          "manual": [m["action"] for m in p.manual]})
        for a in p.actions:
            if a.kind in DELETES and not_serving:
                a.params["not_serving"] = sorted(not_serving)
            self._prepare(p, a)
        self.ledger.save_plan(p.id, p.incident, p.to_json())
        return p

    def _prepare(self, p: Plan, a: Action) -> None:
        """A planned action bounded by the caps, dry-run and guarded, each step audited."""
        caps = self.policy.caps
        if a.kind == "scale_out":
            cur, want = int(a.params["from"]), int(a.params["replicas"])
            bounded = min(want, caps.scale_out_max_replicas, cur + step_limit(caps, cur))
            if bounded != want:
                a.params["replicas"] = bounded
                a.why += f"; bounded to {bounded} by the policy's caps"
        if a.dry_run is None:
            a.dry_run = self._dry_run(a)
        a.status = "dry_run"
        a.guard = self.guard(p, a)
        self.ledger.audit(self.actor, p.id, a.id, "dry_run", {"target": a.target.ref(), "ok": a.dry_run.ok,
                                                               "detail": a.dry_run.detail})
        self.ledger.audit(self.actor, p.id, a.id, "guard", a.guard.model_dump())

    def next_scale_step(self, p: Plan, diagnosis: Diagnosis, snapshots: Sequence[Snapshot],
                        arrivals_ratio: float | None, serving: float | None,
                        namespace: str | None = None, saturated: tuple[float, float] | None = None) -> Action | None:
        """The caps bound one scale-out step (as a HorizontalPodAutoscaler's scale-up policy bounds each period), not
        the response to a surge: once every replica of the plan's last executed step serves (`serving`: the pods
        up) and the arrivals still ask for more replicas than the workload has (sized from the replicas before the
        first step, plan.sized_replicas; or, `saturated`, from what a pod serves while the queue stays), the next
        step, bounded, dry-run and guarded like the first, is added to the plan. None: no step (the last one still
        loading, one pending, or enough replicas)."""
        done = sized_steps(p)
        if not done or arrivals_ratio is None or serving is None:
            return None
        if any(a.kind == "scale_out" and a.status in ("planned", "dry_run") for a in p.actions):
            return None
        if serving < int(done[-1].params["replicas"]):
            return None  # the last step has not taken effect yet: its replicas are still loading
        try:
            a = plan.next_scale_step(self.kube, diagnosis, snapshots[-1] if snapshots else None, done,
                                     arrivals_ratio, namespace, self.selector, saturated)
        except (KubeError, UnsafeName):
            return None
        room = min(int(a.params["replicas"]), self.policy.caps.scale_out_max_replicas) if a is not None else 0
        if a is None or room <= int(a.params["from"]):
            return None  # enough replicas, or the caps leave no room (scale_out_max_replicas reached)
        first = done[0]
        a.id = action_id(f"{p.id}/step{a.params['step']}", a.kind, a.target)
        a.runbook_action = first.runbook_action
        a.params["_incident_key"] = first.params.get("_incident_key", p.incident_key)
        self.ledger.audit(self.actor, p.id, a.id, "plan", {"incident": p.incident, "actions": [a.kind],
                                                            "step": a.params["step"]})
        self._prepare(p, a)
        p.actions.append(a)
        self.ledger.save_plan(p.id, p.incident, p.to_json())
        return a

    def _dry_run(self, a: Action) -> DryRun:
        try:
            return DryRun(ok=True, detail=execute.run(self.kube, a, dry_run=True, sleep=self.sleep, attempts=2))
        except KubeError as exc:
            return DryRun(ok=False, detail=exc.rbac or str(exc))
        except (Blocked, TargetChanged, UnsafeName, ValueError, KeyError) as exc:
            return DryRun(ok=False, detail=str(exc))

    def effect(self, a: Action) -> tuple[bool, str] | None:
        """The executed action's own verification (execute.effect), audited with the verdict."""
        return execute.effect(self.kube, a)

    def guard(self, p: Plan, a: Action, approved: set[str] | frozenset[str] = frozenset(),
              overrides: Mapping[str, str] | None = None) -> Guard:
        nodes = self.kube.list("Node") if a.kind == "cordon_node" else []
        capacity = taken = 0
        if a.kind in DELETES:
            idle = set(a.params.get("not_serving") or ())
            serving = [pod for pod in self.kube.list("Pod", p.namespace, self.selector or None)
                       if _ready(pod) and pod["metadata"]["name"] not in idle]
            capacity = len(serving)
            taken = sum(1 for pod in serving if _targets(a, pod))
        return decide(a, p, self.mode, self.policy, self.ledger, self.clock(), approved, nodes_total=len(nodes),
                      nodes_cordoned=sum(1 for n in nodes if n["spec"].get("unschedulable")), capacity=capacity,
                      taken=taken, overrides=overrides)

    # ---- execute ------------------------------------------------------------------------------------
    def execute(self, p: Plan, approved: set[str] | frozenset[str] = frozenset(),
                recheck: Callable[[], Diagnosis | None] | None = None, diagnosis_age_s: float = 0.0,
                only: set[str] | None = None, overrides: Mapping[str, str] | None = None) -> list[Action]:
        """Run the plan's allowed actions in order. A diagnosis older than the policy's limit is re-checked first
        (`recheck`): a resolved or different one refuses everything."""
        if diagnosis_age_s > self.policy.max_diagnosis_age_s:
            fresh = recheck() if recheck is not None else None
            if fresh is None or fresh.incident != p.incident:
                why = ("the diagnosis is stale and could not be re-checked" if recheck is None or fresh is None
                       else f"re-check says {fresh.incident}, not {p.incident} (resolved or changed): re-plan")
                for a in p.actions:
                    a.status, a.result = "blocked", why
                    self.ledger.audit(self.actor, p.id, a.id, "refused", why)
                return p.actions
        for a in p.actions:
            if only is not None and a.id not in only:
                continue
            self._execute_one(p, a, approved, overrides)
        self.ledger.save_plan(p.id, p.incident, p.to_json())
        return p.actions

    def _execute_one(self, p: Plan, a: Action, approved: set[str] | frozenset[str],
                     overrides: Mapping[str, str] | None = None) -> None:
        a.guard = self.guard(p, a, approved, overrides)
        self.ledger.audit(self.actor, p.id, a.id, "guard", a.guard.model_dump())
        if a.guard.overridden:
            self.ledger.audit(self.actor, p.id, a.id, "override", {"by": a.guard.overridden, "why": a.guard.why})
        if not a.guard.allowed:
            a.status, a.result = "blocked", a.guard.why
            return
        if self.fence is not None:
            why = self.fence.begin(p, a)
            if why is not None:
                a.status, a.result = "blocked", why
                self.ledger.audit(self.actor, p.id, a.id, "fenced", why)
                return
        try:
            self._claim_and_run(p, a)
        finally:
            if self.fence is not None:
                self.fence.end(p, a)

    def _claim_and_run(self, p: Plan, a: Action) -> None:
        key = a.idempotency_key
        if not self.ledger.claim(key, a.id, a.kind, a.target.ref()):
            a.status, a.result = "skipped", f"idempotency key {key} already taken: not repeated"
            self.ledger.audit(self.actor, p.id, a.id, "skipped", a.result)
            return
        self.ledger.audit(self.actor, p.id, a.id, "execute",
                          {"target": a.target.ref(), "params": a.to_json()["params"]})
        try:
            result: Any = execute.run(self.kube, a, dry_run=False, sleep=self.sleep)
        except TargetChanged as exc:
            a.status, a.result = "blocked", f"target changed since the plan: {exc}; re-plan"
        except Blocked as exc:
            a.status, a.result = "blocked", str(exc)
        except KubeError as exc:
            a.status, a.result = "failed", exc.rbac or str(exc)
        except (UnsafeName, ValueError, KeyError) as exc:
            a.status, a.result = "failed", str(exc)
        else:
            a.status, a.result = "executed", result
            self.ledger.finish(key, "executed", result)
            self.ledger.start_cooldown(a.kind, a.target.ref(), self.policy.cooldown(a.kind), self.clock())
        if a.status != "executed":
            self.ledger.release(key)
        self.ledger.audit(self.actor, p.id, a.id, a.status, a.result)

    # ---- revert -------------------------------------------------------------------------------------
    def revert(self, p: Plan, a: Action) -> str:
        """Undo a harmful action where an inverse exists (scale back, uncordon, weight back, old args/config)."""
        k, t = self.kube, a.target
        try:
            if a.kind == "scale_out" and a.revert:
                k.scale(t.kind, t.name, int(a.revert["replicas"]), t.namespace)
            elif a.kind == "cordon_node":
                k.patch("Node", t.name, {"spec": {"unschedulable": False}}, "strategic")
            elif a.kind == "rollback" and t.kind == "HTTPRoute" and a.revert:
                k.patch("HTTPRoute", t.name, [{"op": "replace", "path": f"/spec/rules/0/backendRefs/"
                                               f"{a.params['index']}/weight", "value": a.revert["weight"]}],
                        "json", t.namespace)
            elif a.kind in ("config_rollback",) and a.revert:
                k.patch("ConfigMap", t.name, {"data": a.revert["data"]}, "merge", t.namespace)
            elif a.kind == "gateway_cap_max_tokens":
                k.patch("ConfigMap", t.name, {"data": {"max_tokens_cap": "0"}}, "merge", t.namespace)
            elif a.kind == "gateway_rate_limit":
                k.delete("BackendTrafficPolicy", t.name, t.namespace)
            elif a.kind == "gateway_route_long_prompts" and isinstance(a.result, dict):
                for pod in a.result.get("labelled") or []:
                    k.patch("Pod", pod, {"metadata": {"labels": {gateway.CONTEXT_RANGE: None}}}, "merge",
                            t.namespace)
            else:
                return "no revert exists for this action"
        except KubeError as exc:
            return f"revert failed: {exc}"
        self.ledger.audit(self.actor, p.id, a.id, "revert", a.revert)
        return "reverted"


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _targets(a: Action, pod: dict[str, Any]) -> bool:
    """Does the action delete this pod (a restarted group's members, or an evicted pod)?"""
    if a.kind == "restart_group":
        labels = pod["metadata"].get("labels") or {}
        return (labels.get(f"{plan.LWS}/name") == a.params.get("leaderworkerset")
                and labels.get(f"{plan.LWS}/group-index") == str(a.params.get("group")))
    return pod["metadata"]["name"] in (a.params.get("pods") or ())
