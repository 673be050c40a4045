"""The NVIDIA Xid catalogue (catalog/xid.yaml) and what an Xid means for the on-call: category, hint, action.

The data file holds every documented Xid code with NVIDIA's name and cause flags and our runbook mapping
(severity, incident hint, node-benign, action); this module validates it with a schema and answers
``info(code)``. The kernel and device-plugin line formats that carry an Xid are signatures in
catalog/signatures/ (``xid_group``), so a new Xid source is a data change too; ``findings`` turns the
matched lines into one finding per code with the facts a report needs (per GPU, counts, recovery action).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from llm_oncall.evidence.model import Finding, compact, line_numbers

CATALOG_PATH = Path(__file__).parent / "catalog" / "xid.yaml"

Action = Literal["isolate_node", "reset_gpu", "reboot_node", "restart_group", "check_application", "none"]
Rung = Literal["restart_app", "reset_gpu", "reboot_node", "replace_hardware"]
RUNGS: tuple[str, ...] = Rung.__args__  # type: ignore[attr-defined]
"""The repair ladder's rungs, least to most disruptive (their actions: the catalogue's repair_ladder)."""

ACTION_TEXT: dict[str, str] = {
    "isolate_node": "isolate the node (cordon, drain) and reschedule its pods; the GPU needs service",
    "reset_gpu": "drain the GPU's pods and reset the GPU (nvidia-smi -r) or reboot; cordon until it passes",
    "reboot_node": "cordon and drain the node, then reboot it; reschedule its pods",
    "restart_group": "restart the whole tensor-parallel group and taint the node; check NVLink (nvidia-smi nvlink -e)",
    "check_application": "an application fault: the node is fine; look at the workload that crashed",
    "none": "no action for the node",
}


class XidEntry(BaseModel):
    """One Xid code. NVIDIA's facts (name, description, cause flags) plus our mapping."""

    model_config = ConfigDict(extra="allow", frozen=True)

    code: int = Field(gt=0)
    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    hardware: bool
    driver: bool
    user_app: bool
    bus: bool
    memory: bool
    nvlink: bool
    thermal: bool
    severity: Literal["critical", "warning", "info"]
    incident_hint: Literal["gpu-ecc", "engine-hang"] | None
    node_benign: bool
    action: Action
    gpud_repair: list[str] = Field(default_factory=list)
    rung: Rung | None = None
    """The repair ladder's rung for this code (gpu-ecc codes); `rung_from` says where it comes from."""
    rung_from: str | None = None
    mnemonic: str | None = None
    catalog_unused: bool = False

    @model_validator(mode="after")
    def _consistent(self) -> XidEntry:
        if self.node_benign and (self.incident_hint is not None or self.action != "check_application"):
            raise ValueError(f"Xid {self.code}: node_benign needs incident_hint null and action check_application")
        if self.incident_hint == "engine-hang" and not self.nvlink:
            raise ValueError(f"Xid {self.code}: the engine-hang path is for NVLink faults (nvlink: true)")
        if self.incident_hint is not None and self.action == "none":
            raise ValueError(f"Xid {self.code}: an incident hint needs an action")
        if self.incident_hint == "gpu-ecc" and (self.rung is None or not self.rung_from):
            raise ValueError(f"Xid {self.code}: a gpu-ecc code needs its repair rung (rung, rung_from)")
        return self

    @property
    def category(self) -> str:
        if self.node_benign:
            return "benign"
        if self.nvlink and self.incident_hint == "engine-hang":
            return "nvlink"
        if self.memory and self.incident_hint == "gpu-ecc":
            return "gpu-memory"
        if self.incident_hint == "gpu-ecc":
            return "gpu-hardware"
        if self.severity == "info":
            return "benign"
        return "other-failure"

    @property
    def action_text(self) -> str:
        return ACTION_TEXT[self.action]


class XidCatalog(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    source: str = Field(min_length=1)
    codes: list[XidEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> XidCatalog:
        codes = [e.code for e in self.codes]
        if len(codes) != len(set(codes)):
            raise ValueError("duplicate Xid codes")
        return self


class CatalogError(ValueError):
    """A catalogue file that does not load or does not validate; the message names the file."""


def load_catalog(path: Path = CATALOG_PATH) -> dict[int, XidEntry]:
    try:
        with path.open(encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
        cat = XidCatalog.model_validate(doc)
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise CatalogError(f"{path}: {exc}") from exc
    return {e.code: e for e in cat.codes}


@cache
def catalog() -> dict[int, XidEntry]:
    """The built-in catalogue, loaded once per process."""
    return load_catalog()


@dataclass(frozen=True)
class XidInfo:
    """What an Xid means here, also for codes the catalogue does not list (category "unknown")."""

    code: int
    meaning: str
    severity: str  # info | warning | critical
    action: str
    action_text: str
    incident: str | None
    category: str
    node_benign: bool
    listed: bool

    @property
    def scope(self) -> str:
        return "process" if self.node_benign else "node" if self.action in ("reboot_node", "isolate_node") else "gpu"


def info(code: int) -> XidInfo:
    e = catalog().get(code)
    if e is None:
        return XidInfo(code, "unlisted Xid", "warning", "none",
                       "look the code up in NVIDIA's Xid catalogue: it is not in ours", None, "unknown", False,
                       False)
    return XidInfo(code, e.name, e.severity, e.action, e.action_text, e.incident_hint, e.category, e.node_benign,
                   True)


SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


def worst(codes: Sequence[int]) -> XidInfo:
    """The code that decides: hardware/incident codes before the rest, then severity, then lowest code."""
    return max((info(c) for c in codes),
               key=lambda x: (x.incident is not None, not x.node_benign, SEVERITY_RANK[x.severity], -x.code))


# ---- from matched lines to findings -------------------------------------------------------------------
@dataclass(frozen=True)
class XidEvent:
    line: int  # 0-based
    code: int
    gpu: str
    message: str
    recovery_action: str | None = None


def _confidence(x: XidInfo, count: int) -> float:
    if not x.listed:
        return 0.3
    if x.node_benign:
        return 0.6
    base = {"critical": 0.85, "warning": 0.6, "info": 0.4}[x.severity]
    if x.incident is None:
        base = min(base, 0.55)
    return base + (0.05 if count > 1 else 0.0)


def findings(events: Sequence[XidEvent], name: str) -> list[Finding]:
    """One finding per Xid code (application faults share one "xid_app_fault" finding)."""
    if not events:
        return []
    counts = Counter(e.code for e in events)
    by_gpu: dict[str, list[int]] = {}
    for e in events:
        codes = by_gpu.setdefault(e.gpu, [])
        if e.code not in codes:
            codes.append(e.code)
    recovery = next((e.recovery_action for e in reversed(events) if e.recovery_action), None)
    shared = compact({"xids": {str(c): counts[c] for c in sorted(counts)}, "gpus": by_gpu,
                      "recovery_action": recovery})
    out: list[Finding] = []
    app = sorted(c for c in counts if info(c).node_benign)
    if app:
        lines = [e.line for e in events if e.code in app]
        facts = {**shared, "codes": app, "reading": "process-scoped application faults (e.g. Xid 13/31/43/45): "
                 "software, not the GPU; the node is fine"}
        out.append(Finding(name, "xid_app_fault", True, None, 0.6, facts, line_numbers(lines), "xid",
                           severity="info", category="benign"))
    for code in sorted(counts):
        x = info(code)
        if x.node_benign:
            continue
        evs = [e for e in events if e.code == code]
        facts = {**shared, "worst": {"code": x.code, "meaning": x.meaning, "severity": x.severity,
                                     "action": x.action, "scope": x.scope},
                 "action": x.action_text, "last_message": evs[-1].message[:200]}
        benign = x.category == "benign"
        hint, category, severity, conf = x.incident, x.category, x.severity, _confidence(x, counts[code])
        action = next((e.recovery_action for e in reversed(evs) if e.recovery_action), None)
        if code == RECOVERY_ACTION_XID and action and _needs_recovery(action):
            # Xid 154 says what the GPU now needs; a reset or a reboot is the GPU-hardware path.
            benign, hint, category, severity, conf = False, "gpu-ecc", "gpu-hardware", "warning", 0.6
            facts["action"] = f"the driver asks for: {action}; " + ACTION_TEXT["reboot_node"]
        out.append(Finding(name, f"xid_{code}", benign, hint, conf, facts, line_numbers(e.line for e in evs), "xid",
                           severity="info" if benign else severity, category=category))
    return out


RECOVERY_ACTION_XID = 154


def _needs_recovery(action: str) -> bool:
    a = action.lower()
    return any(w in a for w in ("reset", "reboot", "drain"))
