"""The runbook schema: what a runbook file must say, validated before anything runs."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from llm_oncall.incident_ids import ALL
from llm_oncall.runbooks import alertql
from llm_oncall.runbooks.expr import Expr, ExprError, compile_expr

INCIDENTS = ALL
ACTIONS = (
    "scale_out", "gateway_cap", "restart_group", "restart_pod", "drain_pod", "taint_node", "cordon_node",
    "rollback", "pause_rollout", "set_flag", "route_by_length", "rate_limit", "call_hardware", "notify",
    "gpu_repair",
)
_ID = re.compile(r"^[a-z][a-z0-9-]{1,63}$")


def _condition(text: str) -> str:
    """A condition must parse; pydantic reports the ValueError with its location."""
    try:
        compile_expr(text)
    except ExprError as exc:
        raise ValueError(str(exc)) from exc
    return text


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Text(_Model):
    """Text in English, with an optional Chinese translation."""

    en: str = Field(min_length=1)
    zh: str | None = None

    def get(self, lang: str = "en") -> str:
        return (self.zh if lang == "zh" else None) or self.en


class Clause(_Model):
    """One observation of a signature or of its support.

    In a signature, a clause that holds supports the runbook with its ``weight``; one that fails refutes it
    (a ``required`` clause rules the runbook out, an optional one lowers its fit); one whose data is missing
    (unknown) refutes nothing but lowers the confidence.
    """

    when: str
    signal: str | None = None
    baseline: str | None = None
    weight: float = Field(default=1.0, gt=0.0, le=10.0)
    required: bool = True
    text: Text

    @field_validator("when")
    @classmethod
    def _compiles(cls, v: str) -> str:
        return _condition(v)

    @property
    def expr(self) -> Expr:
        return compile_expr(self.when)


class Check(_Model):
    name: str
    signal: str | None = None
    command: list[str] | None = None
    meaning: Text

    @field_validator("command")
    @classmethod
    def _argv(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or any(not a or "\n" in a for a in v)):
            raise ValueError("command is an argv list of non-empty single-line strings")
        return v


class Action(_Model):
    action: Literal[ACTIONS]  # type: ignore[valid-type]
    params: dict[str, Any] = Field(default_factory=dict)
    text: Text
    instead_of: str | None = None
    """An alternative to an earlier action of this runbook ("… or roll back"): taken only when that one was not."""
    auto: bool = False
    """The runbook's own policy: auto mode (and every drill) may take this step without a human. A policy file's
    `auto` list, where given, replaces it."""


class Recovery(_Model):
    """A signal that says the incident's fix took effect, judged against its pre-incident baseline."""

    signal: str = Field(description="a diagnosis feature (or ttft_p50)")
    better: Literal["lower", "higher"]
    back: str | None = Field(default=None, description="when it is back, an expression over `value` and "
                                                       "`baseline`; default: within 2× (lower) / 75 % (higher)")
    missing: float | None = Field(default=None, description="its value when the series is empty (a count of "
                                                            "crash-looping pods with none is 0, not unknown)")
    baseline_if_none: float | None = Field(default=None, description="the baseline when none was learned")
    doc: Text

    @field_validator("back")
    @classmethod
    def _back(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from llm_oncall.runbooks.expr import compile_expr

        names = compile_expr(v).names()
        if not names <= {"value", "baseline"}:
            raise ValueError(f"back may read only value and baseline, not {sorted(names - {'value', 'baseline'})}")
        return v


class Charts(_Model):
    """What the postmortem draws for this incident: the fleet's golden signals, and per pod the signals to try in
    order (the first that varies in the window is drawn)."""

    fleet: list[str] = Field(min_length=1)
    pods: list[str] = Field(default_factory=list)


class WhatIfFigure(_Model):
    """What the what-if drill measured for this fix, without → with (docs/drills.md): quoted by the postmortem."""
    seed: int
    measured_on: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="the day it was measured (YYYY-MM-DD)")
    slo_minutes_burned: tuple[float, float]
    requests_failed: tuple[int, int]
    pages: tuple[int, int]


class LongTerm(_Model):
    tag: Literal["monitoring", "automation", "drill", "capacity", "process", "config"]
    text: Text
    what_if: str | None = Field(default=None, description="the drill that measures this fix: `llm-oncall drill "
                                                           "<incident> --what-if <name>`")
    measured: WhatIfFigure | None = Field(default=None, description="its figure, from `drill <incident> --what-if "
                                                                    "<name> --json --seed <seed>`")

    @model_validator(mode="after")
    def _measured_needs_what_if(self) -> LongTerm:
        if self.measured is not None and self.what_if is None:
            raise ValueError("measured: a figure needs the what-if that measured it (what_if)")
        return self


class LookAlike(_Model):
    incident: Literal[INCIDENTS]  # type: ignore[valid-type]
    why: Text


class RootCause(_Model):
    when: str | None = None
    text: Text

    @field_validator("when")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        return None if v is None else _condition(v)


_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


class PromAlert(_Model):
    """How the runbook's alert behaves once exported (`llm-oncall rules export`). Its condition is the runbook's
    `alert`, stated once over features and translated to PromQL by the export (runbooks/alertql.py); the labels it
    carries (its scope) follow from the features it names."""

    hold: str = Field(default="0s", alias="for", description="how long the condition must hold (Prometheus `for`)")
    severity: Literal["page", "warning"] = "page"

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("hold")
    @classmethod
    def _duration(cls, v: str) -> str:
        if not _DURATION.match(v):
            raise ValueError(f"not a Prometheus duration: {v!r}")
        return v


class Runbook(_Model):
    id: str
    title: Text
    titles: list[RootCause] = Field(
        default_factory=list,
        description="titles true to the evidence: the first whose `when` holds names the diagnosis")
    priority: int = Field(ge=0, le=1000, description="lower is checked first in triage")
    symptom: Text
    alert: str | None = Field(default=None, description="the alert condition over features, stated once: the drills "
                                                        "time detection by it, `rules export` translates it to PromQL")
    prometheus: PromAlert | None = Field(default=None, description="how the exported alert behaves (`rules export`)")
    signature: list[Clause] = Field(min_length=1)
    support: list[Clause] = Field(default_factory=list)
    persistence: int = Field(default=2, ge=1, le=20, description="consecutive scrapes the signature must hold")
    base_confidence: float = Field(default=0.75, ge=0.0, le=1.0)
    min_fit: float = Field(default=0.6, gt=0.0, le=1.0,
                           description="weight share of signature clauses that must hold (unknown ones do not)")
    page_when: str | None = Field(default=None, description="the signature pages only when this holds, else warns")
    cascades_into: list[Literal[INCIDENTS]] = Field(  # type: ignore[valid-type]
        default_factory=list, description="incidents this one causes: when both hold, the earlier change is named")
    scope_pods: str | None = None
    scope_nodes: str | None = None
    scope_revision: str | None = None
    triage: list[Check] = Field(default_factory=list)
    root_causes: list[RootCause] = Field(default_factory=list)
    emergency: list[Action] = Field(default_factory=list)
    recovery: list[Recovery] = Field(default_factory=list, description="the signals that say the fix took effect "
                                                                        "(verification, mitigated)")
    recovery_users: list[Literal["ttft", "itl", "errors"]] = Field(
        default=["ttft", "itl", "errors"],
        description="the user-facing symptoms recovery also needs back (runbooks/thresholds.py RECOVERY_SYMPTOMS); "
                    "leave one out only with a reason in the runbook (e.g. a recovery signal that measures it better)")
    charts: Charts | None = None
    long_term: list[LongTerm] = Field(default_factory=list)
    look_alikes: list[LookAlike] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError("id must be lowercase letters, digits and '-'")
        return v

    @field_validator("alert", "page_when")
    @classmethod
    def _alert(cls, v: str | None) -> str | None:
        return None if v is None else _condition(v)

    @model_validator(mode="after")
    def _alternatives(self) -> Runbook:
        for i, a in enumerate(self.emergency):
            if a.instead_of is not None and a.instead_of not in {b.action for b in self.emergency[:i]}:
                raise ValueError(f"emergency: {a.action}.instead_of {a.instead_of!r} names no earlier action of this "
                                 "runbook")
        return self

    @model_validator(mode="after")
    def _alert_translates(self) -> Runbook:
        if self.prometheus is None:
            return self
        if self.alert is None:
            raise ValueError("prometheus: the exported alert needs the runbook's `alert` condition")
        try:
            alertql.translate(compile_expr(self.alert))
        except alertql.TranslateError as exc:
            raise ValueError(f"alert: no PromQL form: {exc}") from exc
        return self

    @model_validator(mode="after")
    def _no_self_lookalike(self) -> Runbook:
        if any(la.incident == self.id for la in self.look_alikes):
            raise ValueError("a runbook cannot list itself as a look-alike")
        return self

    def names(self) -> set[str]:
        """Every feature name the runbook's conditions read."""
        out: set[str] = set()
        for c in [*self.signature, *self.support]:
            out |= c.expr.names()
        for rc in [*self.root_causes, *self.titles]:
            if rc.when:
                out |= compile_expr(rc.when).names()
        if self.page_when:
            out |= compile_expr(self.page_when).names()
        return out
