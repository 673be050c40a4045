"""The side effects of the responder's own actions (effects.yaml): which diagnoses each action kind can cause and for
how long. A page they explain during that time is the action's expected effect, not a new incident."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml

from llm_oncall.actions.model import ACTION_KINDS
from llm_oncall.incident_ids import FAULTS


@dataclass(frozen=True)
class Effect:
    kind: str
    effects: tuple[str, ...]
    explains: frozenset[str]
    lasts_s: float


def parse(data: Any, where: str = "effects.yaml") -> dict[str, Effect]:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping of action kind → effect")
    known = set(FAULTS) | {"unknown"}
    out: dict[str, Effect] = {}
    for kind, body in data.items():
        if kind not in ACTION_KINDS:
            raise ValueError(f"{where}: unknown action kind {kind!r}; known: {', '.join(ACTION_KINDS)}")
        if not isinstance(body, dict) or set(body) - {"effects", "explains", "lasts_s"}:
            raise ValueError(f"{where}: {kind}: expected effects, explains and lasts_s")
        explains = body.get("explains") or []
        bad = sorted(set(explains) - known)
        if bad:
            raise ValueError(f"{where}: {kind}: unknown incidents {bad}")
        lasts = body.get("lasts_s", 0)
        if not isinstance(lasts, int | float) or lasts < 0:
            raise ValueError(f"{where}: {kind}: lasts_s must be a number of seconds ≥ 0")
        out[kind] = Effect(kind, tuple(str(e) for e in body.get("effects") or ()), frozenset(explains), float(lasts))
    missing = sorted(set(ACTION_KINDS) - set(out))
    if missing:
        raise ValueError(f"{where}: no entry for {missing}")
    return out


@cache
def effects() -> dict[str, Effect]:
    text = (resources.files("llm_oncall.actions") / "effects.yaml").read_text(encoding="utf-8")
    return parse(yaml.safe_load(text))


def of(kind: str) -> Effect:
    return effects()[kind]
