"""Hypotheses: every runbook weighed against the features — how well its signature fits, since when, how sure.

A clause that holds supports its runbook with its weight; a required clause that fails rules it out, an optional
one lowers its fit; a clause whose data is missing refutes nothing but lowers the confidence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_oncall.diagnosis.features import Features
from llm_oncall.runbooks.expr import compile_expr
from llm_oncall.runbooks.schema import Clause, Runbook

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)(?::([<>^=+\- #0-9.,%a-zA-Z]{0,12}))?\}")


def render(template: str, feats: Features) -> str:
    """Fill `{feature}` / `{feature:.1f}` placeholders; only plain names, no attribute access."""

    def sub(m: re.Match[str]) -> str:
        name, spec = m.group(1), m.group(2) or ""
        if name in feats.labels:
            return str(feats.labels[name])
        value = feats.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "unknown"
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            return str(value)

    return _PLACEHOLDER.sub(sub, template)


@dataclass(frozen=True)
class Hypothesis:
    """One runbook weighed against the features: how well its signature fits, and since when."""

    runbook: Runbook
    fit: float
    """Weight share of the signature's clauses that hold (unknown ones count as not holding)."""
    coverage: float
    """Weight share of the signature's clauses that have data."""
    failing: tuple[tuple[Clause, bool | None], ...]
    """Clauses that do not hold: (clause, False) refuted, (clause, None) unknown; required ones first."""
    candidate: bool
    """Every required clause holds and the fit reaches the runbook's min_fit."""
    streak: int = 0
    """Consecutive evaluations, ending now, at which it was a candidate."""
    confidence: float = 0.0

    @property
    def severity(self) -> str:
        return "page" if self.paging else "warn"

    paging: bool = True


def weigh(rb: Runbook, feats: Features) -> Hypothesis:
    total = held = known = 0.0
    failing_required: list[tuple[Clause, bool | None]] = []
    failing_optional: list[tuple[Clause, bool | None]] = []
    for clause in rb.signature:
        result = clause.expr.evaluate(feats.values)
        total += clause.weight
        if result is not None:
            known += clause.weight
        if result is True:
            held += clause.weight
            continue
        state = None if result is None else False
        (failing_required if clause.required else failing_optional).append((clause, state))
    fit = held / total if total else 0.0
    candidate = not failing_required and fit >= rb.min_fit - 1e-9
    return Hypothesis(rb, fit, known / total if total else 0.0, (*failing_required, *failing_optional), candidate)


MAX_STREAK = 40


def _streak(rb: Runbook, history: Sequence[Features]) -> int:
    n = 0
    for feats in reversed(history[-MAX_STREAK:]):
        if not weigh(rb, feats).candidate:
            break
        n += 1
    return n


def _confidence(h: Hypothesis, feats: Features) -> float:
    """Base confidence scaled by how much of the signature had data and held, plus support that holds."""
    rb = h.runbook
    support = sum(1 for c in rb.support if c.expr.holds(feats.values))
    shortfall = (1.0 - h.coverage) * 0.3 + (1.0 - h.fit) * 0.3
    return max(0.05, min(0.98, rb.base_confidence * (1.0 - shortfall) + 0.05 * support))


def why_not(rb: Runbook, feats: Features, lang: str) -> str:
    h = weigh(rb, feats)
    if not h.failing:
        return "its signature holds but a higher-priority runbook matched first"
    clause, state = h.failing[0]
    names = sorted(clause.expr.names())
    values = ", ".join(f"{n}={_fmt(feats.get(n))}" for n in names)
    verdict = "unknown (no data)" if state is None else "not met"
    return f"{render(clause.text.get(lang), feats)} — {verdict}: `{clause.when}` ({values})"


def missing(h: Hypothesis, feats: Features, lang: str, limit: int = 2) -> str:
    out = []
    for clause, state in h.failing[:limit]:
        verdict = "no data" if state is None else "not met"
        out.append(f"{render(clause.text.get(lang), feats)} ({verdict}: `{clause.when}`)")
    return "; ".join(out)


def _fmt(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def holds(rb: Runbook, history: Sequence[Features]) -> bool:
    """Whether ``rb`` has been a candidate for its whole persistence (no page on a one-scrape blip)."""
    return len(history) >= rb.persistence and _streak(rb, history) >= rb.persistence


def ranked(history: Sequence[Features], books: Sequence[Runbook]) -> list[Hypothesis]:
    """Every runbook weighed at the last features; persisted candidates first, in triage order, except that a
    cause ranks before the incident it cascades into when its change came first (or at the same time)."""
    feats = history[-1]
    out: list[Hypothesis] = []
    for rb in books:
        h = weigh(rb, feats)
        streak = _streak(rb, history) if h.candidate else 0
        paging = rb.page_when is None or compile_expr(rb.page_when).holds(feats.values)
        h = Hypothesis(rb, h.fit, h.coverage, h.failing, h.candidate, streak, 0.0, paging)
        out.append(Hypothesis(rb, h.fit, h.coverage, h.failing, h.candidate, streak, _confidence(h, feats), paging))
    persisted = [h for h in out if h.candidate and h.streak >= h.runbook.persistence]
    rest = sorted((h for h in out if h not in persisted), key=lambda h: (-h.fit, -h.confidence, h.runbook.priority))
    order = sorted(persisted, key=lambda h: (not h.paging, h.runbook.priority))
    for cause in list(order):
        for effect in [h for h in order if h.runbook.id in cause.runbook.cascades_into]:
            if cause.streak >= effect.streak and order.index(cause) > order.index(effect):
                order.remove(cause)
                order.insert(order.index(effect), cause)
    return order + rest


def runner_up(top: Hypothesis, ranked: Sequence[Hypothesis], feats: Features, lang: str) -> dict[str, Any] | None:
    others = [h for h in ranked if h is not top]
    if not others:
        return None
    other = max(others, key=lambda h: (h.candidate, h.fit, h.confidence))
    separate = ""
    if other.failing:
        clause, state = other.failing[0]
        verdict = "no data" if state is None else "not met"
        separate = f"{render(clause.text.get(lang), feats)} ({verdict}: `{clause.when}`)"
    else:
        theirs = {o.when for o in other.runbook.signature}
        separate = next((f"{render(c.text.get(lang), feats)} (holds only for {top.runbook.id}: `{c.when}`)"
                         for c in top.runbook.signature if c.when not in theirs and c.expr.holds(feats.values)), "")
    return {"incident": other.runbook.id, "confidence": round(other.confidence if other.candidate else
                                                               other.confidence * other.fit, 3),
            "separate_by": separate}
