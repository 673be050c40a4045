"""The GPU repair ladder, read from the Xid catalogue (catalog/xid.yaml: `repair_ladder` and each code's `rung`).

One source of truth: the rungs, their action kinds, the DCGM health classes and each Xid's rung are data in the
catalogue; this module validates them and answers "which rung does this GPU's evidence ask for?".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from llm_oncall.evidence.xid import CATALOG_PATH, RUNGS, CatalogError, Rung, catalog


class RungSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Rung
    actions: list[str] = Field(min_length=1)
    text: str = Field(min_length=1)
    returns_to_service: bool = False
    """The repair makes the GPU whole: once its own check passed and the incident resolved, the node the rung
    cordoned is uncordoned (a node awaiting new hardware stays cordoned)."""


class HealthClass(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rung: Rung
    also_with_xid: bool = False
    field: str = Field(min_length=1)


class Ladder(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rungs: list[RungSpec]
    health: dict[str, HealthClass]

    @model_validator(mode="after")
    def _ordered(self) -> Ladder:
        if tuple(r.id for r in self.rungs) != RUNGS:
            raise ValueError(f"repair_ladder.rungs must be {', '.join(RUNGS)} in that order")
        return self

    def rung(self, rung: str) -> RungSpec:
        return next(r for r in self.rungs if r.id == rung)

    @property
    def last(self) -> str:
        return self.rungs[-1].id


def load_ladder(path: Path = CATALOG_PATH) -> Ladder:
    try:
        with path.open(encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
        return Ladder.model_validate((doc or {}).get("repair_ladder"))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise CatalogError(f"{path}: repair_ladder: {exc}") from exc


@cache
def ladder() -> Ladder:
    return load_ladder()


@dataclass(frozen=True)
class Decision:
    rung: str
    why: str
    codes: tuple[int, ...] = ()
    health: tuple[str, ...] = ()


def rank(rung: str) -> int:
    return RUNGS.index(rung)


def choose(codes: Iterable[int], health: Iterable[str], repeat: str | None = None) -> Decision | None:
    """The highest rung the GPU's Xid codes and DCGM health classes ask for (None: nothing on the ladder).
    `repeat` (why the GPU/node is a repeat offender) sends it to the last rung whatever the evidence says."""
    lad, cat = ladder(), catalog()
    codes = tuple(sorted(set(codes)))
    health = tuple(sorted(set(health)))
    asks: list[tuple[str, str]] = []
    for c in codes:
        e = cat.get(c)
        if e is not None and e.rung is not None:
            asks.append((e.rung, f"Xid {c} ({e.name}): {e.rung} ({e.rung_from})"))
    known_xid = bool(asks)
    for h in health:
        hc = lad.health.get(h)
        if hc is not None and (hc.also_with_xid or not known_xid):
            asks.append((hc.rung, f"DCGM {h} ({hc.field}): {hc.rung}"))
    if repeat:
        return Decision(lad.last, f"repeat offender ({repeat}): straight to the last rung", codes, health)
    if not asks:
        return None
    top = max(rank(r) for r, _ in asks)
    rung = RUNGS[top]
    return Decision(rung, "; ".join(w for r, w in asks if rank(r) == top), codes, health)
