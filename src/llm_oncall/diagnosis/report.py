"""The report a tired on-call engineer reads: what, where, why, not-what, do now, fix later."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.termtable import Column, FitTable

_LABELS = {
    "en": ("WHAT", "WHERE", "WHY WE THINK SO", "RULED OUT", "DO NOW", "FIX LATER", "ROOT CAUSE", "confidence"),
    "zh": ("问题", "范围", "依据", "已排除", "立即处理", "长期改进", "根因", "置信度"),
}


def _fmt(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def report(d: Diagnosis, lang: str = "en") -> RenderableType:
    what, where, why, ruled, now, later, cause, conf = _LABELS.get(lang, _LABELS["en"])
    style = "green" if d.incident == "healthy" else "bold red"
    severity = d.severity if d.incident != "healthy" else "none"
    head = Text.assemble((f"{d.incident}", style), f"  {conf} {d.confidence:.0%}  {severity}\n", (d.summary, "bold"))
    parts: list[RenderableType] = [Panel(head, title=what, title_align="left")]
    red = [s for s in d.extra.get("symptoms", []) if s.get("red")]
    if red:
        parts.append(Text("symptoms: " + "; ".join(
            f"{s['signal']} {_fmt(s['value'])} (baseline {_fmt(s['baseline'])}"
            + (f", SLO {_fmt(s['slo'])}" if s.get("slo") is not None else "") + ")" for s in red)))
    runner = d.extra.get("runner_up")
    if runner:
        parts.append(Text(f"runner-up: {runner['incident']} ({runner['confidence']:.0%})"
                          + (f" — would separate: {runner['separate_by']}" if runner.get("separate_by") else "")))
    scope = []
    if d.scope_pods:
        scope.append(f"pods: {', '.join(d.scope_pods)}")
    if d.scope_nodes:
        scope.append(f"nodes: {', '.join(d.scope_nodes)}")
    if d.scope_revision:
        scope.append(f"revision: {d.scope_revision}")
    if scope:
        parts.append(Text(f"{where}: " + "; ".join(scope)))
    if d.root_cause:
        parts.append(Text(f"{cause}: {d.root_cause}"))
    if d.evidence:
        t = FitTable(Column("evidence", min_width=28), Column("value", justify="right", no_wrap=True),
                     Column("baseline", justify="right", no_wrap=True, priority=1),
                     Column("source", min_width=24, priority=2), title=why)
        for e in d.evidence:
            t.add_row(Text(e.text), _fmt(e.value), _fmt(e.baseline), Text(e.source))
        parts.append(t)
    if d.ruled_out:
        r_t = FitTable(Column("incident", no_wrap=True), Column("why not", min_width=30), title=ruled)
        for r in d.ruled_out:
            r_t.add_row(r.incident, Text(r.why))
        parts.append(r_t)
    if d.emergency_actions:
        # Text, not markup: "[scale_out]" would otherwise be read as a Rich style tag and vanish.
        lines = [f"{i}. [{a['action']}] {a['text']}" for i, a in enumerate(d.emergency_actions, 1)]
        parts.append(Panel(Text("\n".join(lines)), title=now, title_align="left", border_style="yellow"))
    if d.long_term:
        parts.append(Panel(Text("\n".join(f"- ({x['tag']}) {x['text']}" for x in d.long_term)), title=later,
                           title_align="left"))
    return Group(*parts)
