"""The policy (which incident × action kinds auto mode may take; caps; cooldowns) and the guard's decision."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field

from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import ACTION_KINDS, Action, Guard, Plan

Mode = Literal["propose", "approve", "auto"]


class Caps(BaseModel):
    scale_out_max_replicas: int = 16
    scale_out_max_step: int = 4
    cordon_per_window: int = 1
    cordon_window_s: float = 600.0
    cordon_max_fraction: float = 0.10
    delete_max_fraction: float = 0.25


class Policy(BaseModel):
    auto: dict[str, list[str]] = Field(default_factory=dict)
    """incident id → action kinds auto mode may take (nothing else is ever taken automatically)."""
    caps: Caps = Field(default_factory=Caps)
    cooldown_s: dict[str, float] = Field(default_factory=lambda: {"default": 600.0})
    max_diagnosis_age_s: float = 30.0
    """Older diagnoses are re-checked before execution (two scrape intervals at 15 s)."""
    verify_window_s: float = 120.0

    def cooldown(self, kind: str) -> float:
        return self.cooldown_s.get(kind, self.cooldown_s.get("default", 600.0))

    @classmethod
    def load(cls, path: Path) -> Policy:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        policy = cls.model_validate(data)
        bad = sorted({k for kinds in policy.auto.values() for k in kinds} - set(ACTION_KINDS))
        if bad:
            raise ValueError(f"{path}: unknown action kinds {bad}; known: {', '.join(ACTION_KINDS)}")
        return policy


DRILL_POLICY = Policy(
    auto={"kv-capacity": ["scale_out", "gateway_cap_max_tokens"], "engine-hang": ["restart_group", "taint_node"],
          "prefix-cache-drop": ["config_rollback"], "retry-storm": ["gateway_rate_limit", "scale_out"],
          "bad-model-rollout": ["rollback"], "gpu-ecc": ["cordon_node", "evict_pods"],
          "cuda-graph-crash": ["set_engine_args"],
          "long-context-starvation": ["scale_out", "gateway_route_long_prompts"]},
    # The drill fleets run on one or two nodes with a cluster autoscaler: cordoning the node with the bad GPU is
    # the point, so the node-fraction cap is relaxed here (never in the default policy).
    caps=Caps(cordon_max_fraction=1.0), max_diagnosis_age_s=30.0, verify_window_s=240.0)


def decide(a: Action, plan: Plan, mode: Mode, policy: Policy, ledger: Ledger, now: float,
           approved: set[str] | frozenset[str] = frozenset(), nodes_total: int = 0, nodes_cordoned: int = 0,
           ready_pods: int = 0) -> Guard:
    if a.dry_run is not None and not a.dry_run.ok:
        return Guard(allowed=False, why=f"server-side dry-run failed: {a.dry_run.detail}")
    until = ledger.cooldown_until(a.kind, a.target.ref())
    if until is not None and until > now:
        return Guard(allowed=False, why=f"cooldown: {a.kind} on {a.target.ref()} again after t={until:.0f}")
    done = ledger.execution(a.idempotency_key)
    if done is not None and done["status"] == "executed":
        return Guard(allowed=False, why=f"already executed for this incident (idempotency key {a.idempotency_key})")
    caps = policy.caps
    if a.kind == "scale_out":
        want, cur = int(a.params["replicas"]), int(a.params.get("from", 0))
        if want > caps.scale_out_max_replicas:
            return Guard(allowed=False, why=f"cap: {want} replicas > scale_out_max_replicas "
                                            f"{caps.scale_out_max_replicas}")
        if want - cur > caps.scale_out_max_step:
            return Guard(allowed=False, why=f"cap: +{want - cur} replicas > scale_out_max_step "
                                            f"{caps.scale_out_max_step}")
    if a.kind == "cordon_node":
        recent = ledger.recent("cordon_node", now - caps.cordon_window_s)
        if len(recent) >= caps.cordon_per_window:
            return Guard(allowed=False, why=f"cap: {len(recent)} node(s) cordoned in the last "
                                            f"{caps.cordon_window_s:.0f} s (max {caps.cordon_per_window})")
        if nodes_total and (nodes_cordoned + 1) / nodes_total > caps.cordon_max_fraction:
            return Guard(allowed=False, why=f"cap: cordoning would leave {nodes_cordoned + 1}/{nodes_total} nodes "
                                            f"cordoned (> {caps.cordon_max_fraction:.0%})")
    if a.kind in ("evict_pods", "restart_group") and ready_pods:
        n = len(a.params.get("pods", [])) or int(a.params.get("group_size", 1))
        if n / ready_pods > caps.delete_max_fraction:
            return Guard(allowed=False, why=f"cap: deleting {n} of {ready_pods} ready pods "
                                            f"(> {caps.delete_max_fraction:.0%})")
    if mode == "propose":
        return Guard(allowed=False, why="propose mode: nothing changes (approve it: act apply --approve "
                                        f"{a.id})")
    if mode == "approve":
        if a.id in approved:
            return Guard(allowed=True, why="approved by a human")
        return Guard(allowed=False, why="approve mode: waiting for approval")
    kinds = policy.auto.get(plan.incident, [])
    if a.kind not in kinds:
        return Guard(allowed=False, why=f"auto mode: the policy does not allow {a.kind} for {plan.incident}")
    return Guard(allowed=True, why=f"auto mode: the policy allows {a.kind} for {plan.incident}")
