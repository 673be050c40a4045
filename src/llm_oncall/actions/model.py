"""The plan as typed data: actions on named Kubernetes objects, each with its dry-run result and guard decision."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

ActionKind = Literal[
    "scale_out", "restart_group", "cordon_node", "taint_node", "evict_pods", "rollback", "set_engine_args",
    "config_rollback", "gateway_rate_limit", "gateway_cap_max_tokens", "gateway_route_long_prompts",
    "restart_pod", "reset_gpu", "reboot_node", "hardware_ticket",
]
ACTION_KINDS: tuple[str, ...] = ActionKind.__args__  # type: ignore[attr-defined]
Status = Literal["planned", "dry_run", "blocked", "executed", "failed", "skipped"]
Verdict = Literal["helped", "no_effect", "harmful", "unverified"]

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class UnsafeName(ValueError):
    """A name or label value that must not reach an API path or a command."""


def check_name(value: str, what: str = "name") -> str:
    """Kubernetes object names are DNS-1123 subdomains (≤ 253): `../x`, `a/b`, newlines and spaces are refused."""
    if not isinstance(value, str) or len(value) > 253 or not _DNS1123.match(value):
        raise UnsafeName(f"refusing {what} {value!r}: not a DNS-1123 name (it would reach an API path)")
    return value


def check_label_value(value: str, what: str = "label value") -> str:
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
        raise UnsafeName(f"refusing {what} {value!r}: not a valid Kubernetes label value")
    return value


class TargetChanged(Exception):
    """The target is not what the plan saw: refuse and re-plan."""


class Blocked(Exception):
    """The cluster refused for a reason to wait out (a PodDisruptionBudget's 429): reported, not forced."""


class ActionTarget(BaseModel):
    kind: str
    namespace: str
    name: str
    api_version: str = "v1"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return check_name(v)

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str) -> str:
        return check_name(v, "namespace") if v else v

    def ref(self) -> str:
        return target_ref(self.model_dump())


def target_ref(t: Any) -> str:
    """`kind/namespace/name` (`kind/name` for a cluster-scoped object) of a target or its stored JSON."""
    if isinstance(t, dict):
        return "/".join(str(t[k]) for k in ("kind", "namespace", "name") if t.get(k))
    return str(t or "")


class DryRun(BaseModel):
    ok: bool
    detail: Any = None


class Guard(BaseModel):
    allowed: bool
    why: str
    approvable: bool = False
    """Nothing but the mode stands between the action and its execution (approve mode: a human may approve it).
    False when the guard blocks it (dry-run, cooldown, caps, already done): approving it then needs an override."""
    overridden: str | None = None
    """Who overrode a blocking guard, and why (audited)."""


class Verification(BaseModel):
    verdict: Verdict
    signal: str
    before: float | None = None
    after: float | None = None
    baseline: float | None = None
    detail: str = ""


class Prediction(BaseModel):
    """What the twin (respond/twin.py) predicts for an action, run forward on a simulated copy of the fleet."""

    predicted_seconds_to_recovery: float | None
    """From the action to recovery (the loop's rule); None: no recovery within the horizon."""
    predicted_slo_minutes: float
    """SLO minutes burned from the action to the end of the horizon."""
    predicted_signal_minutes: float = 0.0
    """Minutes with the incident's own recovery signal out (harm the SLO does not see: wrong answers)."""
    rank: int
    """1 = best of the candidates (doing nothing included) by SLO minutes, then time to recovery."""
    horizon_s: float
    error: str | None = None
    """The twin could not run this candidate (it then ranks last)."""


class Action(BaseModel):
    id: str
    kind: ActionKind
    target: ActionTarget
    params: dict[str, Any] = Field(default_factory=dict)
    precondition: dict[str, Any] = Field(default_factory=dict)
    """What the plan saw (resourceVersion, replicas, uid, …): execution refuses if the target has changed."""
    why: str = ""
    runbook_action: str = ""
    revert: dict[str, Any] | None = None
    dry_run: DryRun | None = None
    guard: Guard | None = None
    status: Status = "planned"
    result: Any = None
    verification: Verification | None = None
    prediction: Prediction | None = None
    """The twin's prediction (`act plan --simulate`, a service with `twin: true`, drills)."""

    @property
    def would_execute(self) -> bool:
        """What executes in auto mode, or once approved in the others: the guard allows it or a human may."""
        g = self.guard
        return g is None or g.allowed or g.approvable

    def brief(self) -> dict[str, Any]:
        """What every view of a planned action shows (the timeline's plan event, a drill's result): what, on what,
        its state, the dry run, the guard's verdict and the twin's prediction."""
        return {"id": self.id, "kind": self.kind, "target": self.target.ref(), "status": self.status,
                "dry_run": self.dry_run.model_dump() if self.dry_run else None,
                "guard": self.guard.model_dump() if self.guard else None,
                **({"prediction": self.prediction.model_dump()} if self.prediction is not None else {})}

    @property
    def idempotency_key(self) -> str:
        step = self.params.get("step")  # a later step of a staged scale-out is another action on the same target
        return f"{self.params.get('_incident_key', '')}:{self.kind}:{self.target.ref()}" + (f"#{step}" if step else "")

    def to_json(self) -> dict[str, Any]:
        out = self.model_dump(mode="json", exclude={"params"})
        out["params"] = {k: v for k, v in self.params.items() if not k.startswith("_")}
        out["idempotency_key"] = self.idempotency_key
        if out.get("prediction") is None:
            out.pop("prediction", None)
        return out


class Plan(BaseModel):
    id: str
    incident: str
    incident_key: str
    """The incident's identity (incident id + first page time): the idempotency keys build on it."""
    diagnosis: dict[str, Any]
    diagnosed_at: float
    created_at: float
    namespace: str
    gateway: dict[str, str] = Field(default_factory=dict)
    """Which implementation each gateway lever goes through (detected from the cluster's API)."""
    actions: list[Action] = Field(default_factory=list)
    manual: list[dict[str, Any]] = Field(default_factory=list)
    """Runbook steps that are not API actions (call hardware, notify client owners)."""
    twin: dict[str, Any] | None = None
    """The twin's forecast (respond/twin.py): doing nothing, the plan as it executes, the calibration."""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "incident": self.incident, "incident_key": self.incident_key,
                "diagnosis": self.diagnosis, "diagnosed_at": self.diagnosed_at, "created_at": self.created_at,
                "namespace": self.namespace, "gateway": self.gateway,
                "actions": [a.to_json() for a in self.actions], "manual": self.manual,
                **({"twin": self.twin} if self.twin is not None else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        body = dict(data)
        acts = []
        for a in body.pop("actions", []):
            a = dict(a)
            a.pop("idempotency_key", None)
            a.setdefault("params", {})["_incident_key"] = body.get("incident_key", "")
            acts.append(Action.model_validate(a))
        return cls.model_validate({**body, "actions": acts})


def action_id(plan_id: str, kind: str, target: ActionTarget) -> str:
    return "a-" + hashlib.sha256(f"{plan_id}/{kind}/{target.ref()}".encode()).hexdigest()[:10]


_LABEL_KEY_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def check_label_key(key: str) -> str:
    """A label key: an optional DNS-1123 prefix (≤ 253) and `/`, then a name of ≤ 63 [A-Za-z0-9-_.]."""
    prefix, slash, name = key.rpartition("/")
    if (slash and (not prefix or len(prefix) > 253 or not _DNS1123.match(prefix))) or len(name) > 63 \
            or not _LABEL_KEY_NAME.match(name):
        raise UnsafeName(f"refusing label key {key!r}: not a valid Kubernetes label key")
    return key


def parse_selector(text: str) -> dict[str, str]:
    """An equality-based label selector (`k=v,k2=v2`; `==` accepted), every key and value validated: it reaches the
    API's labelSelector. Set-based forms (`in`, `notin`, `!=`, `!k`) are refused with the reason."""
    out: dict[str, str] = {}
    if not isinstance(text, str) or not text.strip():
        raise UnsafeName("empty label selector")
    for part in text.split(","):
        item = part.strip()
        if not item:
            raise UnsafeName(f"label selector {text!r}: an empty requirement (a stray comma)")
        if "!=" in item or item.startswith("!") or " in " in f" {item} " or " notin " in f" {item} " or "(" in item:
            raise UnsafeName(f"label selector {text!r}: only equality requirements (key=value) are supported, "
                             f"not {item!r}")
        key, eq, value = item.replace("==", "=").partition("=")
        if not eq:
            raise UnsafeName(f"label selector {text!r}: {item!r} is not key=value")
        key, value = key.strip(), value.strip()
        check_label_key(key)
        check_label_value(value, f"value of label {key}")
        if key in out and out[key] != value:
            raise UnsafeName(f"label selector {text!r}: {key} given twice with different values")
        out[key] = value
    return out
