"""What the cluster's controllers do to the fleet when an API write lands: the ReplicaSet replaces a deleted pod,
the LeaderWorkerSet recreates a group, the scheduler honours cordons and taints, the Deployment rolls out a new
template (or back to an old ReplicaSet), the gateway and router pick up their new configuration."""

from __future__ import annotations

import json
from typing import Any

from llm_oncall.sim import lifecycle
from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi import identity, routing, templates
from llm_oncall.sim.pods import READY, TERMINATED, Pod, Revision

ROUTER_RELOAD_S = 10.0
"""The production-stack router re-reads its dynamic config every 10 s."""


def _kill(fleet: Fleet, pod: Pod, t: float, graceful: bool) -> None:
    """Terminate a pod: graceful deletion drains in-flight requests; a hung engine never drains and is killed
    at the end of its grace period, so its requests fail."""
    if not graceful or pod.hung:
        lost = pod.engine.abort_all(t)
        fleet.connection_lost(pod, lost, t)
    lifecycle.terminate(fleet, pod, t)
    ro = fleet.rollout
    if ro is not None and pod.name in ro.surge:
        ro.surge.remove(pod.name)


def group_index(pod: Pod) -> int:
    return int(pod.group.rsplit("-g", 1)[1])


def delete_pod(fleet: Fleet, pod: Pod, t: float, graceful: bool = True) -> list[str]:
    """Delete (or evict) a pod; its controller replaces it. Returns the names of the pods created."""
    if templates.lws_mode(fleet):
        return restart_group(fleet, group_index(pod), t, graceful)
    _kill(fleet, pod, t, graceful)
    ro = fleet.rollout
    new = lifecycle.create_pod(fleet, pod.revision, t=t)
    if ro is not None and pod.name in ro.created:
        ro.add(new)
    fleet.record_event(t, "restart", f"{pod.name}: deleted; replaced by {new.name}", pod=pod.name,
                       reason="Killing")
    return [new.name]


def restart_group(fleet: Fleet, group: int, t: float, graceful: bool = False) -> list[str]:
    """The LeaderWorkerSet controller's RecreateGroup: every pod of the group goes, then the group is created
    again (same names, new uids), each pod loading the model anew."""
    name = f"{fleet.cfg.deployment}-g{group}"
    members = sorted((p for p in fleet.pods if p.group == name and p.state != TERMINATED),
                     key=lambda p: p.name)
    for p in members:
        _kill(fleet, p, t, graceful)
    created = []
    for p in members:
        parts = p.name[len(fleet.cfg.deployment) + 1:].split("-")
        worker = int(parts[1]) if len(parts) > 1 else 0
        created.append(lifecycle.create_pod(fleet, p.revision, t=t, slot=(group, worker)).name)
    fleet.record_event(t, "restart", f"{fleet.cfg.deployment}-{group}: RecreateGroup (group {group} recreated)",
                       pod=f"{fleet.cfg.deployment}-{group}", reason="RecreateGroup")
    return created


def set_cordon(fleet: Fleet, node: str, on: bool) -> None:
    if on:
        fleet.cordoned.add(node)
    else:
        fleet.cordoned.discard(node)


def set_taints(fleet: Fleet, node: str, taints: list[dict[str, str]], t: float) -> None:
    before = {(x["key"], x["effect"]) for x in fleet.taints.get(node, [])}
    if taints:
        fleet.taints[node] = taints
    else:
        fleet.taints.pop(node, None)
    if any(x["effect"] == "NoExecute" and (x["key"], x["effect"]) not in before for x in taints):
        # the taint manager evicts every pod that does not tolerate a new NoExecute taint
        for p in [p for p in fleet.pods if p.node == node and p.state != TERMINATED]:
            if p.state != TERMINATED:
                delete_pod(fleet, p, t)


def revision_for(fleet: Fleet, spec: templates.TemplateSpec) -> Revision:
    """The revision a template names: an existing one, or a new one that inherits what its image and model are
    (a vLLM build that cannot capture CUDA graphs here still cannot; a bad fine-tune is still bad)."""
    canary = templates.canary_revision(fleet)
    for r in reversed(fleet.revisions):
        if r is not canary and (r.vllm_version, r.model_revision, r.enforce_eager) == (
                spec.vllm_version, spec.model_revision, spec.enforce_eager):
            return r
    crash = any(r.capture_crash for r in fleet.revisions if r.vllm_version == spec.vllm_version)
    bad = any(r.bad_outputs for r in fleet.revisions if r.model_revision == spec.model_revision)
    return fleet.new_revision(vllm_version=spec.vllm_version, model_revision=spec.model_revision,
                              enforce_eager=spec.enforce_eager, capture_crash=crash, bad_outputs=bad)


def set_template(fleet: Fleet, spec: templates.TemplateSpec, t: float, book: identity.Bookkeeping) -> None:
    cur = templates.template_revision(fleet)
    if (cur.vllm_version, cur.model_revision, cur.enforce_eager) == (
            spec.vllm_version, spec.model_revision, spec.enforce_eager):
        return
    rev = revision_for(fleet, spec)
    if rev.name in book.rs_revision:
        book.promote(rev.name)
    fleet.revisions.remove(rev)
    fleet.revisions.append(rev)  # the template's revision is the one scaling creates
    rollout_to(fleet, rev, t)


def rollout_to(fleet: Fleet, rev: Revision, t: float) -> None:
    canary = templates.canary_revision(fleet)
    # the Deployment controller scales unhealthy old replicas down first (a crash-looping new pod included)
    for p in [p for p in fleet.pods if p.state not in (READY, TERMINATED) and p.revision is not rev
              and p.revision is not canary]:
        _kill(fleet, p, t, graceful=False)
    live = [p for p in fleet.pods if p.state != TERMINATED and p.revision is not canary]
    if live and all(p.revision is rev for p in live):
        fleet.generation += 1
        if fleet.rollout is not None and fleet.rollout.canary_weight is None:
            fleet.rollout = None
        for _ in range(max(0, fleet.desired_replicas - len(live))):
            lifecycle.create_pod(fleet, rev, t=t)
        fleet.observed_generation = fleet.generation
        fleet.record_event(t, "rollout", f"rolled back to revision {rev.name} (vLLM {rev.vllm_version}, model "
                           f"{rev.model_revision}, enforce_eager={rev.enforce_eager})", revision=rev.name,
                           vllm_version=rev.vllm_version)
        return
    lifecycle.start_rollout(fleet, rev, t, kind="rollout")


def set_canary_weights(fleet: Fleet, stable: int, canary: int) -> None:
    rev = templates.canary_revision(fleet)
    if rev is None:
        return
    total = stable + canary
    old = sorted({p.revision.name for p in fleet.pods if p.state != TERMINATED and p.revision is not rev})
    if total <= 0:
        fleet.weights = {**{r: 0.0 for r in old}, rev.name: 0.0}
        return
    share = stable / total / max(1, len(old))
    fleet.weights = {**{r: share for r in old}, rev.name: canary / total}


def set_context_range(fleet: Fleet, pod: Pod, value: str | None) -> None:
    """llm-d's context-length-aware scorer (with filtering) over the pods' `llm-d.ai/context-length-range`
    (`"min-max"`, validated by the API): filtering starts once some pod carries the label."""
    if value is None:
        pod.context_range = None
    else:
        lo, hi = value.split("-", 1)
        pod.context_range = (int(lo), int(hi))
    fleet.router.length_aware = any(p.context_range is not None for p in fleet.pods if p.state != TERMINATED)


def set_router_config(fleet: Fleet, text: str, t: float) -> None:
    """The router re-reads its dynamic config on its next 10 s tick; an unreadable config keeps the old policy."""
    try:
        body = json.loads(text)
        policy = routing.POLICY_OF.get(str(body.get("routing_logic")))
    except (ValueError, AttributeError):
        policy = None
    if policy is None:
        return
    lifecycle.config_change(fleet, t, policy, apply=False)
    when = t + ROUTER_RELOAD_S - (t % ROUTER_RELOAD_S)

    def reload(_: float) -> None:
        fleet.router.policy = policy
    fleet.schedule(when, reload)


def set_gateway_config(fleet: Fleet, data: dict[str, Any]) -> None:
    try:
        cap = int(str(data.get("max_tokens_cap", "0")))
    except ValueError:
        return
    fleet.set_max_tokens_cap(cap if cap > 0 else None)


UNIT_S = {"Second": 1.0, "Minute": 60.0, "Hour": 3600.0, "Day": 86_400.0}


def apply_rate_limits(fleet: Fleet, policies: list[dict[str, Any]]) -> None:
    """Envoy Gateway BackendTrafficPolicy rate-limit rules keyed on the client header → the gateway's buckets. A rule
    that also matches the retry-count header (routing.RETRY_HEADER) limits only retries, its inverse only first
    attempts; a rule without it limits both (one bucket: retries spend the first attempts' quota)."""
    limits: dict[str, float] = {}
    retry_limits: dict[str, float] = {}
    separate: set[str] = set()  # clients with a retries-only rule
    clients = list(fleet.gateway.clients)
    for btp in policies:
        rl = btp.get("spec", {}).get("rateLimit") or {}
        for scope in ("local", "global"):
            for rule in (rl.get(scope) or {}).get("rules") or []:
                limit = rule.get("limit") or {}
                rps = float(limit.get("requests", 0)) / UNIT_S.get(str(limit.get("unit")), 1.0)
                targets = []
                attempts = "all"
                for sel in rule.get("clientSelectors") or []:
                    for h in sel.get("headers") or []:
                        name = str(h.get("name", "")).lower()
                        if name == routing.CLIENT_HEADER and h.get("type", "Exact") == "Exact":
                            targets.append(str(h.get("value")))
                        elif name == routing.CLIENT_HEADER and h.get("type") == "Distinct":
                            targets.extend(clients)
                        elif name == routing.RETRY_HEADER:
                            attempts = "first" if h.get("invert") else "retries"
                for c in targets or clients:
                    if attempts != "retries":
                        limits[c] = min(limits.get(c, rps), rps)
                    if attempts != "first":
                        retry_limits[c] = min(retry_limits.get(c, rps), rps)
                    if attempts == "retries":
                        separate.add(c)
    for c in clients:
        fleet.set_rate_limit(c, limits.get(c))
        # no retry rule of its own: the client's retries share its bucket, as before
        fleet.set_retry_limit(c, retry_limits.get(c) if c in separate else None)
