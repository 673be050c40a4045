"""The diagnosis engine: runbooks evaluated over features, in triage order → a Diagnosis.

A pure function of its inputs (feature history from Snapshots + evidence); no I/O.  A
runbook pages only when its whole signature holds at each of its last `persistence`
evaluations, so one-scrape blips never page.  When nothing holds the answer is `healthy`,
and every runbook's failing check is listed as ruled out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.diagnosis.features import SOURCES as SOURCES_OF
from llm_oncall.diagnosis.features import Features
from llm_oncall.runbooks.expr import compile_expr
from llm_oncall.runbooks.loader import Registry
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


@dataclass(frozen=True, slots=True)
class EvidenceItem:
    signal: str
    value: Any
    baseline: Any
    source: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"signal": self.signal, "value": _num(self.value), "baseline": _num(self.baseline),
                "source": self.source, "text": self.text}


@dataclass(frozen=True, slots=True)
class RuledOut:
    incident: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"incident": self.incident, "why": self.why}


@dataclass(frozen=True)
class Diagnosis:
    incident: str
    confidence: float
    summary: str
    t: float
    scope_pods: tuple[str, ...] = ()
    scope_nodes: tuple[str, ...] = ()
    scope_revision: str | None = None
    evidence: tuple[EvidenceItem, ...] = ()
    ruled_out: tuple[RuledOut, ...] = ()
    emergency_actions: tuple[dict[str, Any], ...] = ()
    long_term: tuple[dict[str, str], ...] = ()
    root_cause: str | None = None
    runbook: str | None = None
    title: str = ""
    severity: str = "page"
    """page (user-visible now) | warn (a trend that will become visible) | none."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pages(self) -> bool:
        """Whether this diagnosis would page a human."""
        return self.severity == "page" and self.incident != "healthy"

    def to_json(self) -> dict[str, Any]:
        return {
            "incident": self.incident,
            "confidence": round(self.confidence, 3),
            "severity": self.severity if self.incident != "healthy" else "none",
            "summary": self.summary,
            "title": self.title,
            "t": self.t,
            "scope": {"pods": list(self.scope_pods), "nodes": list(self.scope_nodes), "revision": self.scope_revision},
            "root_cause": self.root_cause,
            "evidence": [e.to_json() for e in self.evidence],
            "ruled_out": [r.to_json() for r in self.ruled_out],
            "emergency_actions": list(self.emergency_actions),
            "long_term": list(self.long_term),
            "runbook": self.runbook,
            "symptoms": list(self.extra.get("symptoms", [])),
            "runner_up": self.extra.get("runner_up"),
            **{k: v for k, v in self.extra.items() if k not in ("symptoms", "runner_up", "severity")},
        }


def _num(v: Any) -> Any:
    if isinstance(v, float):
        return None if not math.isfinite(v) else round(v, 4)
    return v


def _evidence(clause: Clause, feats: Features, lang: str) -> EvidenceItem:
    signal = clause.signal or next(iter(sorted(clause.expr.names())), clause.when)
    return EvidenceItem(
        signal=signal,
        value=feats.get(signal),
        baseline=feats.get(clause.baseline) if clause.baseline else None,
        source=feats.sources.get(signal, clause.when),
        text=render(clause.text.get(lang), feats),
    )


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


def _why_not(rb: Runbook, feats: Features, lang: str) -> str:
    h = weigh(rb, feats)
    if not h.failing:
        return "its signature holds but a higher-priority runbook matched first"
    clause, state = h.failing[0]
    names = sorted(clause.expr.names())
    values = ", ".join(f"{n}={_fmt(feats.get(n))}" for n in names)
    verdict = "unknown (no data)" if state is None else "not met"
    return f"{render(clause.text.get(lang), feats)} — {verdict}: `{clause.when}` ({values})"


def _missing(h: Hypothesis, feats: Features, lang: str, limit: int = 2) -> str:
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


def _ranked(history: Sequence[Features], books: Sequence[Runbook]) -> list[Hypothesis]:
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


def _runner_up(top: Hypothesis, ranked: Sequence[Hypothesis], feats: Features, lang: str) -> dict[str, Any] | None:
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


STICKY_FIT = 0.5
"""While its symptom stays red, a paged incident is kept if its signature still fits this well: an incident does
not end because one clause wavers (a prompt-length p99 that dips under its line while the queue still grows)."""


def diagnose(history: Sequence[Features], registry: Registry, lang: str = "en",
             previous: Diagnosis | None = None) -> Diagnosis:
    """Diagnose at the last feature set of `history` (oldest first); ``previous`` is the last diagnosis given."""
    if not history:
        raise ValueError("no features to diagnose")
    feats = history[-1]
    books = [rb for rb in registry.in_triage_order() if rb.id != "healthy"]
    ranked = _ranked(history, books)
    top = ranked[0] if ranked and ranked[0].candidate and ranked[0].streak >= ranked[0].runbook.persistence \
        else None
    if top is None and previous is not None and previous.pages and feats.get("symptom") is True:
        kept = next((h for h in ranked if h.runbook.id == previous.incident and h.fit >= STICKY_FIT), None)
        if kept is not None:
            top = Hypothesis(kept.runbook, kept.fit, kept.coverage, kept.failing, True, kept.streak,
                             kept.confidence * max(kept.fit, 0.5), kept.paging)
    if top is None:
        return _no_runbook(history, registry, books, ranked, lang)
    chosen = top.runbook
    support = [c for c in chosen.support if c.expr.holds(feats.values)]
    evidence = [_evidence(c, feats, lang) for c in chosen.signature if c.expr.holds(feats.values)] or \
        [_evidence(c, feats, lang) for c in chosen.signature[:1]]
    evidence += [_evidence(c, feats, lang) for c in support]
    for finding in feats.findings:
        if finding.incident_hint == chosen.id and not finding.benign:
            facts = ", ".join(f"{k}={v}" for k, v in list(finding.facts.items())[:4])
            evidence.append(EvidenceItem(f"evidence:{finding.kind}", finding.confidence, None, finding.file,
                                         f"{finding.kind} ({facts})"))
    ruled = []
    for la in chosen.look_alikes:
        other = registry.get(la.incident)
        why = la.why.get(lang)
        ruled.append(RuledOut(la.incident, f"{why} — {_why_not(other, feats, lang)}" if other else why))
    root = next((rc for rc in chosen.root_causes if rc.when is None or compile_expr(rc.when).holds(feats.values)),
                None)
    pods = tuple(feats.pod_sets.get(chosen.scope_pods, ())) if chosen.scope_pods else ()
    nodes = tuple(feats.node_sets.get(chosen.scope_nodes, ())) if chosen.scope_nodes else ()
    revision = feats.labels.get(chosen.scope_revision) if chosen.scope_revision else None
    scope = {"pods": list(pods), "nodes": list(nodes), "revision": revision}
    actions = tuple({"action": a.action, "params": dict(a.params), "target": scope,
                     "text": render(a.text.get(lang), feats)} for a in chosen.emergency)
    long_term = tuple({"tag": item.tag, "text": render(item.text.get(lang), feats)} for item in chosen.long_term)
    key = "; ".join(e.text for e in evidence[:3])
    where = f" on {', '.join(pods[:4])}{'…' if len(pods) > 4 else ''}" if pods else ""
    missing = [c for c, _ in top.failing]
    if missing:
        evidence_note = _missing(top, feats, lang)
        key = f"{key}; not seen: {evidence_note}" if key else f"not seen: {evidence_note}"
    extra: dict[str, Any] = {"severity": top.severity, "symptoms": symptoms(feats),
                             "runner_up": _runner_up(top, ranked, feats, lang), "fit": round(top.fit, 3)}
    _frozen_note(feats, extra)
    return Diagnosis(
        incident=chosen.id,
        confidence=top.confidence,
        summary=f"{chosen.title.get(lang)}{where}: {key}",
        t=feats.t,
        scope_pods=pods,
        scope_nodes=nodes,
        scope_revision=revision,
        evidence=tuple(evidence),
        ruled_out=tuple(ruled),
        emergency_actions=actions,
        long_term=long_term,
        root_cause=render(root.text.get(lang), feats) if root else None,
        runbook=chosen.id,
        title=chosen.title.get(lang),
        severity=top.severity,
        extra=extra,
    )


SYMPTOMS: tuple[tuple[str, str, str, str], ...] = (
    # (symptom flag, value feature, baseline feature, SLO feature)
    ("symptom_ttft", "ttft_p99", "ttft_p99_baseline", "ttft_slo"),
    ("symptom_itl", "itl_p99", "itl_p99_baseline", "itl_slo"),
    ("symptom_errors", "error_share", "", ""),
    ("symptom_throughput", "success_rate", "success_rate_baseline", ""),
    ("symptom_availability", "pods_up", "pods_total", ""),
)


def symptoms(feats: Features) -> list[dict[str, Any]]:
    """The user-facing symptoms (DESIGN §3 `symptoms`): every one, red or not, with its value and baseline."""
    out = []
    for flag, value, baseline, slo in SYMPTOMS:
        out.append({"signal": value, "value": _num(feats.get(value)),
                    "baseline": _num(feats.get(baseline)) if baseline else None,
                    "slo": _num(feats.get(slo)) if slo else None, "red": feats.get(flag)})
    return out


def _frozen_note(feats: Features, extra: dict[str, Any]) -> None:
    if "baseline_frozen_at" in feats.labels:
        extra["baseline"] = {"frozen_at": float(feats.labels["baseline_frozen_at"]),
                             "why": "a symptom is red: ratios compare with the minutes before the change"}


def _symptom_persisted(history: Sequence[Features], n: int = 2) -> bool:
    """Red for ``n`` scrapes; 3 when only availability is red: a pod that stops answering for a scrape or two is
    often leaving (a scale-down or rollout whose target has not left discovery yet)."""
    only_availability = all(history[-1].get(k) is not True for k in (
        "symptom_ttft", "symptom_itl", "symptom_errors", "symptom_throughput"))
    n = max(n, 3) if only_availability else n
    return len(history) >= n and all(f.get("symptom") is True for f in history[-n:])


def _no_runbook(history: Sequence[Features], registry: Registry, books: Sequence[Runbook],
                ranked: Sequence[Hypothesis], lang: str) -> Diagnosis:
    feats = history[-1]
    said = feats.labels.get("symptoms", "")
    forming = [h for h in ranked if h.candidate]  # holds, but not yet for its persistence: named at a later scrape
    if feats.get("symptom") is True and _symptom_persisted(history):
        # A user-facing symptom is red and no runbook explains it: page, name the symptom and the closest runbook.
        closest = ranked[0] if ranked else None
        near = ""
        runner: dict[str, Any] | None = None
        if forming:
            near = f"; forming: {forming[0].runbook.id} (holds, not yet for {forming[0].runbook.persistence} scrapes)"
        elif closest is not None:
            near = f"; closest: {closest.runbook.id}, missing: {_missing(closest, feats, lang)}"
        if closest is not None:
            runner = {"incident": closest.runbook.id, "confidence": round(closest.confidence * closest.fit, 3),
                      "separate_by": _missing(closest, feats, lang, limit=1)}
        evidence = tuple(EvidenceItem(s["signal"], s["value"], s["baseline"], SOURCES_OF.get(s["signal"], ""),
                                      f"{s['signal']} is red") for s in symptoms(feats) if s["red"])
        off, found = _visibly_off(feats)
        if off:
            said = f"{said}; {off}"
        evidence += found
        ruled = tuple(RuledOut(b.id, _why_not(b, feats, lang)) for b in books)
        extra: dict[str, Any] = {"severity": "page", "symptoms": symptoms(feats), "runner_up": runner}
        _frozen_note(feats, extra)
        return Diagnosis(
            incident="unknown", confidence=0.5,
            summary=f"Unexplained: {said}{near}",
            t=feats.t, scope_pods=tuple(feats.pod_sets.get("down", ())), evidence=evidence, ruled_out=ruled,
            title="Unexplained symptom", severity="page",
            extra=extra)
    d = _healthy(feats, registry, books, lang)
    if feats.get("symptom") is True:
        # Red once: not yet a page (a one-scrape blip), and not a confident "healthy" either.
        return Diagnosis(d.incident, min(d.confidence, 0.3), f"{said} at this scrape only; watching: {d.summary}",
                         d.t, d.scope_pods, d.scope_nodes, d.scope_revision, d.evidence, d.ruled_out,
                         runbook=d.runbook, title=d.title, severity="none",
                         extra={"severity": "none", "symptoms": symptoms(feats)})
    return Diagnosis(d.incident, d.confidence, d.summary, d.t, d.scope_pods, d.scope_nodes, d.scope_revision,
                     d.evidence, d.ruled_out, runbook=d.runbook, title=d.title, severity="none",
                     extra={"severity": "none", "symptoms": symptoms(feats)})


def _visibly_off(feats: Features) -> tuple[str, tuple[EvidenceItem, ...]]:
    """What is off although no runbook matched: crash-looping or silent pods, non-benign log findings."""
    down = int(feats.get("pods_down") or 0)
    findings = [f for f in feats.findings if not f.benign]
    evidence = tuple(EvidenceItem(f"evidence:{f.kind}", f.confidence, None, f.file,
                                  f"{f.kind}: " + ", ".join(f"{k}={v}" for k, v in list(f.facts.items())[:3]))
                     for f in findings)
    if not down and not evidence:
        return "", ()
    crashloop = tuple(feats.pod_sets.get("crashloop", ()))
    silent = down - len(crashloop)  # down without a restart seen
    what = [f"{len(crashloop)} pod(s) crash-looping ({', '.join(crashloop[:3])})"] if crashloop else []
    what += [f"{silent} {'more' if crashloop else 'pod(s)'} not answering /metrics"] if silent > 0 else []
    what += [f"{len(evidence)} non-benign log finding(s)"] if evidence else []
    errors = [str(f.facts["error"]) for f in findings if f.facts.get("error")]
    said = f"; the log says: {errors[-1][:160]}" if errors else ""
    return " and ".join(what) + said, evidence


def _healthy(feats: Features, registry: Registry, books: Sequence[Runbook], lang: str) -> Diagnosis:
    rb = registry.get("healthy")
    ruled = tuple(RuledOut(b.id, _why_not(b, feats, lang)) for b in books)
    enough = (feats.get("history_len") or 0) >= 5
    title = rb.title.get(lang) if rb else "Healthy"
    off, evidence = _visibly_off(feats)
    if off:
        # Nothing matched, but something is visibly off: say so, and do not sound sure.
        return Diagnosis(
            incident="healthy", confidence=0.3,
            summary=f"No runbook matches, but {off}: check the evidence before closing",
            t=feats.t, scope_pods=tuple(feats.pod_sets.get("down", ())), evidence=evidence, ruled_out=ruled,
            runbook=rb.id if rb else None, title=title)
    return Diagnosis(
        incident="healthy",
        confidence=0.9 if enough else 0.5,
        summary=f"{title}: no runbook's signature holds"
                + ("" if enough else " (little history yet: baselines are short)"),
        t=feats.t,
        ruled_out=ruled,
        runbook=rb.id if rb else None,
        title=title,
    )
