"""PodDisruptionBudgets as the eviction subresource applies them (policy/v1): the one budget that selects a
pod (more than one is a 500), and a 429 when evicting a healthy pod would leave fewer healthy pods than the
budget needs (minAvailable, or expected − maxUnavailable; percentages round up)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from llm_oncall.sim.kubeapi.model import ApiStatus, Key
from llm_oncall.sim.kubeapi.selectors import selects

PDBS = "poddisruptionbudgets.policy"


def budget_for(store: Mapping[Key, dict[str, Any]], ns: str, labels: dict[str, str]) -> dict[str, Any] | None:
    pdbs = [o for (k, ons, _), o in store.items() if k == PDBS and ons == ns
            and selects((o.get("spec") or {}).get("selector") or {}, labels)]
    if len(pdbs) > 1:
        raise ApiStatus(500, "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                        "does not support.")
    return pdbs[0] if pdbs else None


def check(store: Mapping[Key, dict[str, Any]], ns: str, pdb: dict[str, Any]) -> None:
    """429 when one more healthy pod down would break `pdb`."""
    spec = pdb.get("spec") or {}
    sel = spec.get("selector") or {}
    members = [o for (k, ons, _), o in store.items() if k == "pods" and ons == ns
               and selects(sel, o["metadata"].get("labels") or {})]
    healthy = sum(1 for o in members if any(c["type"] == "Ready" and c["status"] == "True"
                                            for c in o["status"]["conditions"]))
    expected = len(members)
    if "minAvailable" in spec:
        desired = _count(spec["minAvailable"], expected, up=True)
    else:
        desired = expected - _count(spec["maxUnavailable"], expected, up=True)
    if healthy - 1 < desired:
        raise ApiStatus(429, "Cannot evict pod as it would violate the pod's disruption budget.",
                        reason="TooManyRequests", details={"causes": [{
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {pdb['metadata']['name']} needs "
                                       f"{desired} healthy pods and has {healthy} currently"}]})


def _count(v: Any, total: int, up: bool) -> int:
    if isinstance(v, str) and v.endswith("%"):
        x = total * float(v[:-1]) / 100
        return math.ceil(x) if up else math.floor(x)
    return int(v)
