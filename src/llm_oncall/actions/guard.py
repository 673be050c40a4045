"""The policy (which incident × action kinds auto mode may take; caps; cooldowns) and the guard's decision."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import ACTION_KINDS, Action, Guard, Plan
from llm_oncall.incident_ids import FAULTS
from llm_oncall.runbooks.loader import Registry, load_registry
from llm_oncall.runbooks.schema import ACTIONS as RUNBOOK_ACTIONS

Mode = Literal["propose", "approve", "auto"]
DELETES = ("evict_pods", "restart_group", "restart_pod")
"""Action kinds that take pods away (capped by delete_max_fraction of the serving pods)."""


class Caps(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scale_out_max_replicas: int = 16
    scale_out_max_step: int = 4
    scale_out_max_factor: float = 2.0
    """A scale-out may also add up to (factor − 1) × the current replicas (double the fleet by default): a fixed
    step is one fleet's scale — +4 is nothing for 40 replicas and too little for a ×2 surge on 8."""
    cordon_per_window: int = 1
    cordon_window_s: float = 600.0
    cordon_max_fraction: float = 0.10
    delete_max_fraction: float = 0.25


class RepeatOffender(BaseModel):
    """A GPU, or a node, in `incidents` incidents (this one included) within `days` days goes straight to the
    repair ladder's last rung (cordon and a hardware ticket)."""

    model_config = ConfigDict(extra="forbid")

    incidents: int = Field(default=3, ge=2)
    days: float = Field(default=30.0, gt=0)


def step_limit(caps: Caps, cur: int) -> int:
    """The most replicas one scale-out may add to `cur`."""
    return max(caps.scale_out_max_step, math.floor(cur * (caps.scale_out_max_factor - 1.0)))


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    auto: dict[str, list[str]] = Field(default_factory=dict)
    """incident id → action kinds auto mode may take (nothing else is ever taken automatically)."""
    caps: Caps = Field(default_factory=Caps)
    repeat_offender: RepeatOffender = Field(default_factory=RepeatOffender)
    cooldown_s: dict[str, float] = Field(default_factory=lambda: {"default": 600.0})
    max_diagnosis_age_s: float = 30.0
    """Older diagnoses are re-checked before execution (two scrape intervals at 15 s)."""
    verify_window_s: float = 240.0
    """After acting, how long before each executed action is judged helped / no effect / harmful (harmful is
    reverted): long enough for a restarted vLLM pod to load its weights and serve."""

    def cooldown(self, kind: str) -> float:
        return self.cooldown_s.get(kind, self.cooldown_s.get("default", 600.0))

    @classmethod
    def load(cls, path: Path) -> Policy:
        """A policy file, strictly: an unknown key, incident or action kind is refused with its name (a typo in
        safety config must not silently mean "no cap")."""
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not YAML: {exc}") from None
        try:
            return cls.parse(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def parse(cls, data: Any) -> Policy:
        if not isinstance(data, dict):
            raise ValueError("expected a mapping (auto, caps, cooldown_s, max_diagnosis_age_s, verify_window_s)")
        try:
            policy = cls.model_validate(data)
        except ValidationError as exc:
            errs = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors())
            raise ValueError(errs) from None
        bad_incidents = sorted(set(policy.auto) - set(FAULTS))
        if bad_incidents:
            raise ValueError(f"auto: unknown incidents {bad_incidents}; known: {', '.join(FAULTS)}")
        steps = set(ACTION_KINDS) | set(RUNBOOK_ACTIONS)
        bad = sorted({k for kinds in policy.auto.values() for k in kinds} - steps)
        bad += sorted(set(policy.cooldown_s) - set(ACTION_KINDS) - {"default"})
        if bad:
            raise ValueError(f"unknown action kinds {bad}; known: {', '.join(ACTION_KINDS)} (or a runbook step: "
                             f"{', '.join(sorted(set(RUNBOOK_ACTIONS) - set(ACTION_KINDS)))})")
        return policy


def runbook_policy(registry: Registry | None = None) -> Policy:
    """The runbooks' own policy: auto mode may take the emergency steps a runbook marks `auto: true` (their
    runbook action names: a step may plan several action kinds)."""
    reg = registry or load_registry()
    auto = {rid: [a.action for a in rb.emergency if a.auto] for rid in reg.ids() if (rb := reg.get(rid))}
    return Policy(auto={k: v for k, v in auto.items() if v}, max_diagnosis_age_s=30.0)


DRILL_POLICY = runbook_policy()
"""What `drill --act` runs with: the runbooks' own policy and the default caps."""


def decide(a: Action, plan: Plan, mode: Mode, policy: Policy, ledger: Ledger, now: float,
           approved: set[str] | frozenset[str] = frozenset(), nodes_total: int = 0, nodes_cordoned: int = 0,
           capacity: int = 0, taken: int = 0, overrides: Mapping[str, str] | None = None) -> Guard:
    """`capacity`: the pods that serve (Ready, and not named by the telemetry as hung or crash-looping); `taken`: the
    action's pods among them. `overrides`: action id → "who: why" of an override-role approval (caps and
    cooldowns are waived, with the reason audited; a failed dry-run or a done action never are)."""
    if a.dry_run is not None and not a.dry_run.ok:
        return Guard(allowed=False, why=f"server-side dry-run failed: {a.dry_run.detail}")
    done = ledger.execution(a.idempotency_key)
    if done is not None and done["status"] == "executed":
        return Guard(allowed=False, why=f"already executed for this incident (idempotency key {a.idempotency_key})")
    alt = a.params.get("instead_of")
    instead = [x for x in plan.actions if alt and x.runbook_action == alt and x.status == "executed"]
    if instead:
        return Guard(allowed=False, why=f"the runbook's alternative to {alt}, which was executed "
                                        f"({instead[0].kind} {instead[0].target.ref()}): not needed")
    blocked = _blocker(a, policy, ledger, now, nodes_total, nodes_cordoned, capacity, taken)
    override = (overrides or {}).get(a.id)
    if blocked is not None:
        if override is None:
            return Guard(allowed=False, why=blocked)
        return Guard(allowed=True, approvable=True, overridden=override,
                     why=f"override by {override} (the guard said: {blocked})")
    if mode == "propose":
        return Guard(allowed=False, approvable=True, why="propose mode: nothing changes (approve it: act apply "
                                                         f"--approve {a.id})")
    if mode == "approve":
        if a.id in approved:
            return Guard(allowed=True, approvable=True, why="approved by a human")
        return Guard(allowed=False, approvable=True, why="approve mode: waiting for approval")
    kinds = policy.auto.get(plan.incident, [])
    if a.kind not in kinds and a.runbook_action not in kinds:
        return Guard(allowed=False, approvable=True,
                     why=f"auto mode: the policy does not allow {a.kind} for {plan.incident}")
    return Guard(allowed=True, approvable=True, why=f"auto mode: the policy allows {a.kind} for {plan.incident}")


def _blocker(a: Action, policy: Policy, ledger: Ledger, now: float, nodes_total: int, nodes_cordoned: int,
             capacity: int, taken: int) -> str | None:
    """Why the policy's cooldowns and caps refuse the action (None: they allow it)."""
    until = ledger.cooldown_until(a.kind, a.target.ref())
    # A later step of a staged scale-out (plan.next_scale_step) continues the decision the cooldown followed; the caps
    # below bound it as they bound the first.
    if until is not None and until > now and not (a.kind == "scale_out" and a.params.get("step")):
        return f"cooldown: {a.kind} on {a.target.ref()} again after t={until:.0f}"
    caps = policy.caps
    if a.kind == "scale_out":
        want, cur = int(a.params["replicas"]), int(a.params.get("from", 0))
        if want > caps.scale_out_max_replicas:
            return f"cap: {want} replicas > scale_out_max_replicas {caps.scale_out_max_replicas}"
        if want - cur > step_limit(caps, cur):
            return (f"cap: +{want - cur} replicas > scale_out_max_step {caps.scale_out_max_step} and "
                    f"×{caps.scale_out_max_factor:g} of {cur}")
    if a.kind == "cordon_node":
        recent = ledger.recent("cordon_node", now - caps.cordon_window_s)
        if len(recent) >= caps.cordon_per_window:
            return (f"cap: {len(recent)} node(s) cordoned in the last {caps.cordon_window_s:.0f} s "
                    f"(max {caps.cordon_per_window})")
        # The fraction bounds how many nodes may be cordoned at once; one node at a time (the window cap) is always
        # within it, or a small fleet could never take its bad GPU out of service.
        allowed_nodes = max(1, math.floor(caps.cordon_max_fraction * nodes_total))
        if nodes_total and nodes_cordoned + 1 > allowed_nodes:
            return (f"cap: cordoning would leave {nodes_cordoned + 1}/{nodes_total} nodes cordoned "
                    f"(> {caps.cordon_max_fraction:.0%}, at least one node)")
    if a.kind == "reboot_node":
        recent = ledger.recent("reboot_node", now - caps.cordon_window_s)
        if len(recent) >= caps.cordon_per_window:
            return (f"cap: {len(recent)} node(s) rebooted in the last {caps.cordon_window_s:.0f} s "
                    f"(max {caps.cordon_per_window}, the cordon cap)")
    if a.kind in DELETES and capacity and taken / capacity > caps.delete_max_fraction:
        return (f"cap: deleting {taken} of {capacity} serving pods (> {caps.delete_max_fraction:.0%}); pods that "
                "serve nothing (hung, crash-looping, not Ready) are not counted")
    return None

