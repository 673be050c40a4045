"""The GatewayExecutor seam: each gateway lever through the Kubernetes-native object of what real vLLM stacks run
(actions.md §3). Custom resources take merge or JSON patches, never strategic ones.

| lever | implementation here | object |
|---|---|---|
| per-client rate limit | Envoy Gateway | BackendTrafficPolicy `spec.rateLimit.local.rules[].clientSelectors.headers` |
| canary rollback | Gateway API | HTTPRoute `spec.rules[0].backendRefs[].weight` → 0 |
| routing-logic rollback | production-stack router | its dynamic-config ConfigMap (re-read every 10 s) |
| prompt-length routing | llm-d context-length-aware scorer | pod label `llm-d.ai/context-length-range` |
| max_tokens cap | the simulator's gateway only (no standard component has one) | ConfigMap `llm-gateway-config` |
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.actions.model import Action, TargetChanged, check_label_value

CONTEXT_RANGE = "llm-d.ai/context-length-range"
CLIENT_HEADER = "x-client-id"
RETRY_HEADER = "x-stainless-retry-count"
"""The attempt number the OpenAI and Anthropic SDKs (and clients generated the same way) send on every request:
"0" on a first attempt, N on the N-th retry. A rule on it keeps a client's retries off its first attempts' bucket."""
RETRY_VALUE = "[1-9][0-9]*"
SIM_GATEWAY_CONFIGMAP = "llm-gateway-config"

SUPPORT: dict[str, dict[str, str]] = {
    "gateway_rate_limit": {
        "envoy-gateway": "supported: BackendTrafficPolicy rateLimit rule per client header / API key",
        "gateway-api-inference-extension": "nearest: InferenceObjective with negative priority (sheddable: 503 "
                                           "under saturation), not a rate",
        "production-stack": "not possible (no rate limiting in the router)",
        "llm-d": "nearest: flow control by priority band (InferenceObjective), not a rate",
        "sim": "supported (the simulator's gateway speaks BackendTrafficPolicy)"},
    "gateway_cap_max_tokens": {
        "envoy-gateway": "not possible without custom code (EnvoyExtensionPolicy ext-proc/wasm/lua)",
        "gateway-api-inference-extension": "not possible (no such field)",
        "production-stack": "not possible (request rewriter is noop only)",
        "llm-d": "not possible (decode chunking is not a cap)",
        "sim": "supported: ConfigMap llm-gateway-config max_tokens_cap"},
    "rollback": {
        "envoy-gateway": "supported through Gateway API HTTPRoute backendRef weight 0",
        "gateway-api-inference-extension": "supported: HTTPRoute weight 0 on the new InferencePool",
        "production-stack": "Deployment rollout undo (no weighted canary in the router)",
        "llm-d": "supported: HTTPRoute weight 0 on the new InferencePool",
        "sim": "supported: HTTPRoute weight and Deployment rollout undo"},
    "config_rollback": {
        "production-stack": "supported: dynamic-config ConfigMap (re-read every 10 s)",
        "gateway-api-inference-extension": "EPP config is read at startup: change it and restart the EPP",
        "llm-d": "EPP config is read at startup: change it and restart the EPP",
        "envoy-gateway": "not applicable (routing policy lives in the router/EPP)",
        "sim": "supported: router-config ConfigMap (production-stack format)"},
    "gateway_route_long_prompts": {
        "llm-d": "supported: context-length-aware scorer (enableFiltering) over pod labels",
        "gateway-api-inference-extension": "not possible (no prompt-length scorer in GIE built-ins)",
        "production-stack": "not possible (no prompt-length routing)",
        "envoy-gateway": "not possible (selectors cannot read the body)",
        "sim": "supported: the simulator's router honours the llm-d labels"},
}


class EnvoyRateLimit:
    """Envoy Gateway: a BackendTrafficPolicy on the model's HTTPRoute with one local rate-limit rule per client."""

    def _body(self, a: Action) -> dict[str, Any]:
        rules = []
        retry_limits: dict[str, int] = a.params.get("retry_limits") or {}
        for client, per_minute in sorted(a.params["limits"].items()):
            check_label_value(client, "client id")
            who = {"name": CLIENT_HEADER, "type": "Exact", "value": client}
            if client not in retry_limits:
                rules.append({"clientSelectors": [{"headers": [who]}],
                              "limit": {"requests": int(per_minute), "unit": "Minute"}})
                continue
            # two disjoint rules: first attempts (no retry count, or "0") and retries, each with its own bucket
            retry = {"name": RETRY_HEADER, "type": "RegularExpression", "value": RETRY_VALUE}
            rules.append({"clientSelectors": [{"headers": [who, {**retry, "invert": True}]}],
                          "limit": {"requests": int(per_minute), "unit": "Minute"}})
            rules.append({"clientSelectors": [{"headers": [who, retry]}],
                          "limit": {"requests": int(retry_limits[client]), "unit": "Minute"}})
        return {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute",
                                "name": a.params["route"]}],
                "rateLimit": {"local": {"rules": rules}}}

    def check(self, kube: Kube, a: Action) -> None:
        kube.get("HTTPRoute", a.params["route"], a.target.namespace)

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        spec = self._body(a)
        try:
            cur = kube.get("BackendTrafficPolicy", a.target.name, a.target.namespace)
        except KubeError as exc:
            if exc.code != 404:
                raise
            obj = {"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "BackendTrafficPolicy",
                   "metadata": {"name": a.target.name, "namespace": a.target.namespace,
                                "labels": {"app.kubernetes.io/managed-by": "llm-oncall"}}, "spec": spec}
            kube.create("BackendTrafficPolicy", obj, a.target.namespace, dry_run)
            return {"created": a.target.name, "rules": len(spec["rateLimit"]["local"]["rules"])}
        if cur.get("spec") == spec:
            return {"already": True}
        body = {"metadata": {"resourceVersion": cur["metadata"]["resourceVersion"]}, "spec": spec}
        kube.patch("BackendTrafficPolicy", a.target.name, body, "merge", a.target.namespace, dry_run)
        return {"patched": a.target.name, "rules": len(spec["rateLimit"]["local"]["rules"])}

    def landed(self, kube: Kube, a: Action) -> bool:
        try:
            cur = kube.get("BackendTrafficPolicy", a.target.name, a.target.namespace)
        except KubeError as exc:
            if exc.code == 404:
                return False
            raise
        return bool(cur.get("spec") == self._body(a))


class CanaryWeight:
    """Gateway API: the canary backendRef's weight to 0 (a JSON patch that tests the backend's name first)."""

    def check(self, kube: Kube, a: Action) -> None:
        route = kube.get("HTTPRoute", a.target.name, a.target.namespace)
        refs = route["spec"]["rules"][0]["backendRefs"]
        i = a.params["index"]
        if i >= len(refs) or refs[i].get("name") != a.params["backend"]:
            raise_changed(a, "its backendRefs changed")

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        i = a.params["index"]
        base = f"/spec/rules/0/backendRefs/{i}"
        patch = [{"op": "test", "path": f"{base}/name", "value": a.params["backend"]},
                 {"op": "replace", "path": f"{base}/weight", "value": int(a.params.get("weight", 0))}]
        kube.patch("HTTPRoute", a.target.name, patch, "json", a.target.namespace, dry_run)
        return {"backend": a.params["backend"], "weight": int(a.params.get("weight", 0))}

    def landed(self, kube: Kube, a: Action) -> bool:
        refs = kube.get("HTTPRoute", a.target.name, a.target.namespace)["spec"]["rules"][0]["backendRefs"]
        i = a.params["index"]
        return bool(i < len(refs) and refs[i].get("weight", 1) == int(a.params.get("weight", 0)))


class SimGatewayCap:
    """The simulator's gateway (the only one here with a max_tokens cap): its ConfigMap."""

    def check(self, kube: Kube, a: Action) -> None:
        kube.get("ConfigMap", a.target.name, a.target.namespace)

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        body = {"data": {"max_tokens_cap": str(int(a.params["max_tokens"]))}}
        kube.patch("ConfigMap", a.target.name, body, "merge", a.target.namespace, dry_run)
        return body["data"]

    def landed(self, kube: Kube, a: Action) -> bool:
        cm = kube.get("ConfigMap", a.target.name, a.target.namespace)
        return bool((cm.get("data") or {}).get("max_tokens_cap") == str(int(a.params["max_tokens"])))


class LlmdLengthRouting:
    """llm-d's context-length-aware scorer: label a long-context pool `min-max` and every other pod of the workload
    `0-threshold` (with filtering an unlabelled pod accepts any length, so new replicas are labelled too)."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep, wait_s: float = 10.0) -> None:
        self.sleep = sleep
        self.wait_s = wait_s

    def _labels(self, kube: Kube, a: Action, wait: bool = False) -> dict[str, str]:
        lo, hi = int(a.params["threshold_tokens"]), int(a.params["max_tokens"])
        out = {p: f"{lo}-{hi}" for p in a.params["long_pool"]}
        out.update({p: f"0-{lo}" for p in a.params["short_pool"]})
        selector = a.params.get("selector")
        if selector:
            for pod in self._workload_pods(kube, a, selector, wait):
                out.setdefault(pod, f"0-{lo}")
        return out

    def _workload_pods(self, kube: Kube, a: Action, selector: dict[str, str], wait: bool) -> list[str]:
        """The workload's live pods; with `wait`, until there are as many as its replicas (the ReplicaSet
        controller creates a scale-out's pods a moment after the write)."""
        want = 0
        if wait and a.target.kind in ("Deployment", "LeaderWorkerSet"):
            want = int(kube.get(a.target.kind, a.target.name, a.target.namespace)["spec"].get("replicas") or 0)
        waited = 0.0
        while True:
            pods = [p["metadata"]["name"] for p in kube.list("Pod", a.target.namespace, selector)
                    if not p["metadata"].get("deletionTimestamp")]
            if len(pods) >= want or waited >= self.wait_s:
                return pods
            self.sleep(0.5)
            waited += 0.5

    def check(self, kube: Kube, a: Action) -> None:
        for p in (*a.params["long_pool"], *a.params["short_pool"]):
            kube.get("Pod", p, a.target.namespace)

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        # the long pool first: the scorer filters only once some pod claims the long range
        done = []
        for pod, value in self._labels(kube, a, wait=not dry_run).items():
            kube.patch("Pod", pod, {"metadata": {"labels": {CONTEXT_RANGE: value}}}, "merge", a.target.namespace,
                       dry_run)
            done.append(pod)
        return {"labelled": done}

    def landed(self, kube: Kube, a: Action) -> bool:
        for pod, value in self._labels(kube, a).items():
            labels = kube.get("Pod", pod, a.target.namespace)["metadata"].get("labels") or {}
            if labels.get(CONTEXT_RANGE) != value:
                return False
        return True


def raise_changed(a: Action, why: str) -> None:
    raise TargetChanged(f"{a.target.ref()}: {why} since the plan")


def detect(kube: Kube, namespace: str) -> dict[str, str]:
    """Which implementation serves each lever in this cluster, from the objects its API holds."""
    found: dict[str, str] = {}

    def has(kind: str, name: str | None = None) -> bool:
        try:
            if name is None:
                kube.list(kind, namespace)
            else:
                kube.get(kind, name, namespace)
            return True
        except KubeError:
            return False
    sim = has("ConfigMap", SIM_GATEWAY_CONFIGMAP)
    found["rate_limit"] = "envoy-gateway" if has("BackendTrafficPolicy") else "none"
    found["canary"] = "gateway-api" if has("HTTPRoute") else "none"
    found["router"] = "production-stack" if has("ConfigMap", "router-config") else "none"
    found["length_routing"] = "llm-d"
    found["max_tokens"] = "sim" if sim else "none"
    found["kind"] = "sim" if sim else "kubernetes"
    return found
