"""The diagnosis engine: symptoms first, then every runbook weighed (hypotheses.py) → a Diagnosis.

A pure function of its inputs (feature history from Snapshots + evidence); no I/O. A runbook pages only after
it has been a candidate for its `persistence`, so one-scrape blips never page. A red symptom that no runbook
explains is `unknown` (it pages); with no symptom and no candidate the answer is `healthy`, and every runbook's
failing check is listed as ruled out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.diagnosis import hypotheses as hyp
from llm_oncall.diagnosis import symptoms as symptom
from llm_oncall.diagnosis.features import SOURCES as SOURCES_OF
from llm_oncall.diagnosis.features import Features
from llm_oncall.diagnosis.hypotheses import Hypothesis, render
from llm_oncall.runbooks.expr import compile_expr
from llm_oncall.runbooks.loader import Registry
from llm_oncall.runbooks.schema import Clause, Runbook


@dataclass(frozen=True, slots=True)
class EvidenceItem:
    signal: str
    value: Any
    baseline: Any
    source: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"signal": self.signal, "value": symptom.json_number(self.value),
                "baseline": symptom.json_number(self.baseline), "source": self.source, "text": self.text}


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


def _evidence(clause: Clause, feats: Features, lang: str) -> EvidenceItem:
    signal = clause.signal or next(iter(sorted(clause.expr.names())), clause.when)
    return EvidenceItem(
        signal=signal,
        value=feats.get(signal),
        baseline=feats.get(clause.baseline) if clause.baseline else None,
        source=feats.sources.get(signal, clause.when),
        text=render(clause.text.get(lang), feats),
    )


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
    ranked = hyp.ranked(history, books)
    top = ranked[0] if ranked and ranked[0].candidate and ranked[0].streak >= ranked[0].runbook.persistence \
        else None
    if top is None and previous is not None and previous.pages and feats.get("symptom") is True:
        kept = next((h for h in ranked if h.runbook.id == previous.incident and h.fit >= STICKY_FIT), None)
        if kept is not None:
            top = Hypothesis(kept.runbook, kept.fit, kept.coverage, kept.failing, True, kept.streak,
                             kept.confidence * max(kept.fit, 0.5), kept.paging)
    if top is None:
        return _no_runbook(history, registry, books, ranked, lang, paging=previous is not None and previous.pages)
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
        ruled.append(RuledOut(la.incident, f"{why} — {hyp.why_not(other, feats, lang)}" if other else why))
    root = next((rc for rc in chosen.root_causes if rc.when is None or compile_expr(rc.when).holds(feats.values)),
                None)
    pods = tuple(feats.pod_sets.get(chosen.scope_pods, ())) if chosen.scope_pods else ()
    nodes = tuple(feats.node_sets.get(chosen.scope_nodes, ())) if chosen.scope_nodes else ()
    revision = feats.labels.get(chosen.scope_revision) if chosen.scope_revision else None
    scope = {"pods": list(pods), "nodes": list(nodes), "revision": revision}
    actions = tuple({"action": a.action, "params": dict(a.params), "target": scope,
                     "text": render(a.text.get(lang), feats), **({"instead_of": a.instead_of} if a.instead_of else {})}
                    for a in chosen.emergency)
    long_term = tuple({"tag": item.tag, "text": render(item.text.get(lang), feats),
                       **({"what_if": f"llm-oncall drill {chosen.id} --what-if {item.what_if}"} if item.what_if
                          else {})} for item in chosen.long_term)
    titled = next((t for t in chosen.titles if t.when is None or compile_expr(t.when).holds(feats.values)), None)
    title = render(titled.text.get(lang), feats) if titled else chosen.title.get(lang)
    key = "; ".join(e.text for e in evidence[:3])
    where = f" on {', '.join(pods[:4])}{'…' if len(pods) > 4 else ''}" if pods else ""
    missing = [c for c, _ in top.failing]
    if missing:
        evidence_note = hyp.missing(top, feats, lang)
        key = f"{key}; not seen: {evidence_note}" if key else f"not seen: {evidence_note}"
    extra: dict[str, Any] = {"severity": top.severity, "symptoms": symptom.as_json(feats.values),
                             "runner_up": _below(hyp.runner_up(top, ranked, feats, lang), top.confidence),
                             "fit": round(top.fit, 3)}
    consequences = [_consequence(h, feats, lang) for h in ranked
                     if h is not top and h.candidate and h.runbook.id in chosen.cascades_into]
    if consequences:
        # A cascade is named by its first cause; what it caused since is part of its story, not a new incident.
        extra["consequences"] = consequences
        key = f"{key}; consequence: " + "; ".join(f"{c['incident']} ({c['text']})" for c in consequences)
    _frozen_note(feats, extra)
    return Diagnosis(
        incident=chosen.id,
        confidence=top.confidence,
        summary=f"{title}{where}: {key}",
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
        title=title,
        severity=top.severity,
        extra=extra,
    )


def _consequence(h: Hypothesis, feats: Features, lang: str) -> dict[str, Any]:
    held = next((c for c in h.runbook.signature if c.expr.holds(feats.values)), h.runbook.signature[0])
    pods = list(feats.pod_sets.get(h.runbook.scope_pods, ())) if h.runbook.scope_pods else []
    return {"incident": h.runbook.id, "pods": pods, "text": render(held.text.get(lang), feats)}


def _below(runner: dict[str, Any] | None, confidence: float) -> dict[str, Any] | None:
    """The runner-up is the less likely answer: it never carries a higher confidence than the answer itself."""
    if runner is None or runner["confidence"] <= round(confidence, 3):
        return runner
    return {**runner, "confidence": round(confidence, 3)}


def _frozen_note(feats: Features, extra: dict[str, Any]) -> None:
    if "baseline_frozen_at" in feats.labels:
        extra["baseline"] = {"frozen_at": float(feats.labels["baseline_frozen_at"]),
                             "why": "a symptom is red: ratios compare with the minutes before the change"}


def _no_runbook(history: Sequence[Features], registry: Registry, books: Sequence[Runbook],
                ranked: Sequence[Hypothesis], lang: str, paging: bool = False) -> Diagnosis:
    feats = history[-1]
    said = feats.labels.get("symptoms", "")
    forming = [h for h in ranked if h.candidate]  # holds, but not yet for its persistence: named at a later scrape
    if feats.get("symptom") is True and symptom.persisted([f.values for f in history], paging):
        # A user-facing symptom is red and no runbook explains it: page, name the symptom and the closest runbook.
        closest = ranked[0] if ranked else None
        near = ""
        runner: dict[str, Any] | None = None
        if forming:
            near = f"; forming: {forming[0].runbook.id} (holds, not yet for {forming[0].runbook.persistence} scrapes)"
        elif closest is not None:
            near = f"; closest: {closest.runbook.id}, missing: {hyp.missing(closest, feats, lang)}"
        if closest is not None:
            runner = _below({"incident": closest.runbook.id, "confidence": round(closest.confidence * closest.fit, 3),
                             "separate_by": hyp.missing(closest, feats, lang, limit=1)}, 0.5)
        evidence = tuple(EvidenceItem(s["signal"], s["value"], s["baseline"], SOURCES_OF.get(s["signal"], ""),
                                      f"{s['signal']} is red") for s in symptom.as_json(feats.values) if s["red"])
        off, found = _visibly_off(feats)
        if off:
            said = f"{said}; {off}"
        evidence += found
        ruled = tuple(RuledOut(b.id, hyp.why_not(b, feats, lang)) for b in books)
        extra: dict[str, Any] = {"severity": "page", "symptoms": symptom.as_json(feats.values), "runner_up": runner}
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
                         extra={"severity": "none", "symptoms": symptom.as_json(feats.values)})
    return Diagnosis(d.incident, d.confidence, d.summary, d.t, d.scope_pods, d.scope_nodes, d.scope_revision,
                     d.evidence, d.ruled_out, runbook=d.runbook, title=d.title, severity="none",
                     extra={"severity": "none", "symptoms": symptom.as_json(feats.values)})


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
    ruled = tuple(RuledOut(b.id, hyp.why_not(b, feats, lang)) for b in books)
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
