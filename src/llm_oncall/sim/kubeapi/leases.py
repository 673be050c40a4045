"""coordination.k8s.io/v1 Leases as the kube-apiserver validates them (pkg/apis/coordination/validation): the
spec's types as its JSON decoder checks them (a wrong type is a 400 "cannot be handled as a Lease"), MicroTime
timestamps in RFC 3339 with microseconds, leaseDurationSeconds > 0, leaseTransitions ≥ 0, preferredHolder only
with strategy.  Leases are updated only conditionally: a PUT without metadata.resourceVersion is a 422 (the
Lease strategy does not allow unconditional updates), a stale one a 409 — what leader election builds on."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from llm_oncall.sim.kubeapi.model import ApiStatus, ResourceType, invalid

_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")
_INT32 = (-(2**31), 2**31 - 1)
_FIELDS = {"holderIdentity": str, "leaseDurationSeconds": int, "acquireTime": "time", "renewTime": "time",
           "leaseTransitions": int, "strategy": str, "preferredHolder": str}
STRATEGIES = ("OldestEmulationVersion",)


def _undecodable(field: str, why: str) -> ApiStatus:
    return ApiStatus(400, f'Lease in version "v1" cannot be handled as a Lease: {why} (field spec.{field})')


def _canonical(v: str) -> str:
    """The apiserver answers MicroTime as it stores it: UTC, exactly six fractional digits."""
    head, _, frac_tz = v.partition(".")
    if frac_tz:
        digits = re.match(r"\d+", frac_tz)
        frac = digits.group(0) if digits else ""
        tz = frac_tz[len(frac):]
        v = f"{head}.{(frac + '000000')[:6]}{tz}"
    t = datetime.fromisoformat(v.replace("Z", "+00:00")).astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def validate(rt: ResourceType, obj: dict[str, Any]) -> None:
    name = obj["metadata"]["name"]
    spec = obj.get("spec")
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise _undecodable("", "json: cannot unmarshal into Go struct field Lease.spec of type v1.LeaseSpec")
    for field, want in _FIELDS.items():
        v = spec.get(field)
        if v is None:
            continue
        if want == "time":
            if not isinstance(v, str) or not _MICRO_TIME.match(v):
                raise _undecodable(field, f'parsing time "{v}" as "2006-01-02T15:04:05.000000Z07:00": cannot '
                                          "parse")
            spec[field] = _canonical(v)
        elif want is int:
            if isinstance(v, bool) or not isinstance(v, int) or not _INT32[0] <= v <= _INT32[1]:
                raise _undecodable(field, f"json: cannot unmarshal {type(v).__name__} into Go struct field "
                                          f"LeaseSpec.spec.{field} of type int32")
        elif not isinstance(v, str):
            raise _undecodable(field, f"json: cannot unmarshal {type(v).__name__} into Go struct field "
                                      f"LeaseSpec.spec.{field} of type string")
    causes = []
    if spec.get("leaseDurationSeconds") is not None and spec["leaseDurationSeconds"] <= 0:
        causes.append(f"spec.leaseDurationSeconds: Invalid value: {spec['leaseDurationSeconds']}: must be greater "
                      "than 0")
    if spec.get("leaseTransitions") is not None and spec["leaseTransitions"] < 0:
        causes.append(f"spec.leaseTransitions: Invalid value: {spec['leaseTransitions']}: must be greater than or "
                      "equal to 0")
    if spec.get("strategy") is not None and spec["strategy"] not in STRATEGIES:
        causes.append(f'spec.strategy: Unsupported value: "{spec["strategy"]}": supported values: '
                      + ", ".join(f'"{s}"' for s in STRATEGIES))
    if spec.get("preferredHolder") and not spec.get("strategy"):
        causes.append("spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined")
    if causes:
        raise invalid(rt, name, causes)


def require_resource_version(rt: ResourceType, name: str, body: dict[str, Any]) -> None:
    """A Lease is never updated unconditionally (its strategy's AllowUnconditionalUpdate is false)."""
    if not (body.get("metadata") or {}).get("resourceVersion"):
        raise invalid(rt, name, ["metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"])
