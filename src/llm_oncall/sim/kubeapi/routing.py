"""The objects that route traffic to the fleet: the production-stack router's dynamic-config ConfigMap, the
simulator's gateway ConfigMap (its max_tokens cap), the HTTPRoute with its canary weights, and the pod label
llm-d's context-length-aware scorer reads."""

from __future__ import annotations

import json
from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi.identity import object_meta, uid_of
from llm_oncall.sim.kubeapi.templates import PORT, canary_revision

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
RETRY_HEADER = "x-stainless-retry-count"  # the SDKs' attempt number: "0" first, N on the N-th retry


def router_configmap(fleet: Fleet) -> dict[str, Any]:
    cfg = fleet.cfg
    body = {"routing_logic": ROUTING_LOGIC.get(fleet.router.policy, fleet.router.policy),
            "session_key": "x-session-id"}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": object_meta(ROUTER_CONFIGMAP, cfg.namespace, {"app.kubernetes.io/component": "router"},
                              {"production-stack.vllm.ai/dynamic-config": "re-read every 10s"})
            | {"uid": uid_of("cm", ROUTER_CONFIGMAP)},
            "data": {ROUTER_KEY: json.dumps(body, sort_keys=True)}}


def gateway_configmap(fleet: Fleet) -> dict[str, Any]:
    cap = fleet.gateway.max_tokens_cap
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": object_meta(GATEWAY_CONFIGMAP, fleet.cfg.namespace, {"app.kubernetes.io/component": "gateway"})
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
            "metadata": object_meta(cfg.deployment, cfg.namespace, {"app": cfg.deployment})
            | {"uid": uid_of("httproute", cfg.deployment), "generation": 1},
            "spec": {"parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                     "name": "inference-gateway"}],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                                "backendRefs": refs}]}}
