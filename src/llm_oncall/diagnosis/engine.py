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
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pages(self) -> bool:
        """Whether this diagnosis would page a human."""
        return self.incident != "healthy"

    def to_json(self) -> dict[str, Any]:
        return {
            "incident": self.incident,
            "confidence": round(self.confidence, 3),
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


def _first_failing(rb: Runbook, feats: Features, lang: str) -> tuple[Clause, bool | None] | None:
    for clause in rb.signature:
        result = clause.expr.evaluate(feats.values)
        if result is not True:
            return clause, (None if result is None else False)
    return None


def _why_not(rb: Runbook, feats: Features, lang: str) -> str:
    failing = _first_failing(rb, feats, lang)
    if failing is None:
        return "its signature holds but a higher-priority runbook matched first"
    clause, state = failing
    names = sorted(clause.expr.names())
    values = ", ".join(f"{n}={_fmt(feats.get(n))}" for n in names)
    verdict = "unknown (no data)" if state is None else "not met"
    return f"{render(clause.text.get(lang), feats)} — {verdict}: `{clause.when}` ({values})"


def _fmt(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def holds(rb: Runbook, history: Sequence[Features]) -> bool:
    if len(history) < rb.persistence:
        return False
    return all(all(c.expr.holds(f.values) for c in rb.signature) for f in history[-rb.persistence:])


def diagnose(history: Sequence[Features], registry: Registry, lang: str = "en") -> Diagnosis:
    """Diagnose at the last feature set of `history` (oldest first)."""
    if not history:
        raise ValueError("no features to diagnose")
    feats = history[-1]
    books = [rb for rb in registry.in_triage_order() if rb.id != "healthy"]
    chosen = next((rb for rb in books if holds(rb, history)), None)
    if chosen is None:
        return _healthy(feats, registry, books, lang)
    support = [c for c in chosen.support if c.expr.holds(feats.values)]
    confidence = min(0.98, chosen.base_confidence + 0.05 * len(support))
    evidence = [_evidence(c, feats, lang) for c in chosen.signature] + [_evidence(c, feats, lang) for c in support]
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
    if not nodes and pods:
        nodes = ()
    revision = feats.labels.get(chosen.scope_revision) if chosen.scope_revision else None
    scope = {"pods": list(pods), "nodes": list(nodes), "revision": revision}
    actions = tuple({"action": a.action, "params": dict(a.params), "target": scope,
                     "text": render(a.text.get(lang), feats)} for a in chosen.emergency)
    long_term = tuple({"tag": item.tag, "text": render(item.text.get(lang), feats)} for item in chosen.long_term)
    key = "; ".join(e.text for e in evidence[:3])
    where = f" on {', '.join(pods[:4])}{'…' if len(pods) > 4 else ''}" if pods else ""
    return Diagnosis(
        incident=chosen.id,
        confidence=confidence,
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
    )


def _healthy(feats: Features, registry: Registry, books: Sequence[Runbook], lang: str) -> Diagnosis:
    rb = registry.get("healthy")
    ruled = tuple(RuledOut(b.id, _why_not(b, feats, lang)) for b in books)
    enough = (feats.get("history_len") or 0) >= 5
    title = rb.title.get(lang) if rb else "Healthy"
    down = int(feats.get("pods_down") or 0)
    findings = [f for f in feats.findings if not f.benign]
    evidence = tuple(EvidenceItem(f"evidence:{f.kind}", f.confidence, None, f.file,
                                  f"{f.kind}: " + ", ".join(f"{k}={v}" for k, v in list(f.facts.items())[:3]))
                     for f in findings)
    if down or evidence:
        # Nothing matched, but something is visibly off: say so, and do not sound sure.
        crashloop = tuple(feats.pod_sets.get("crashloop", ()))
        silent = down - len(crashloop)  # down without a restart seen
        what = [f"{len(crashloop)} pod(s) crash-looping ({', '.join(crashloop[:3])})"] if crashloop else []
        what += [f"{silent} {'more' if crashloop else 'pod(s)'} not answering /metrics"] if silent > 0 else []
        what += [f"{len(evidence)} non-benign log finding(s)"] if evidence else []
        errors = [str(f.facts["error"]) for f in findings if f.facts.get("error")]
        said = f"; the log says: {errors[-1][:160]}" if errors else ""
        return Diagnosis(
            incident="healthy", confidence=0.3,
            summary=f"No runbook matches, but {' and '.join(what)}{said}: check the evidence before closing",
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
