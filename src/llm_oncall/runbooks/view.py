"""`runbooks show`: a runbook rendered for reading."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from llm_oncall.runbooks import promrules
from llm_oncall.runbooks.schema import Runbook


def runbook_view(rb: Runbook, lang: str = "en") -> RenderableType:
    parts: list[RenderableType] = [
        Panel(Text.assemble((rb.title.get(lang), "bold"), "\n", rb.symptom.get(lang)),
              title=f"{rb.id} (triage order {rb.priority})", title_align="left"),
    ]
    sig = Table(title=f"Signature (all must hold for {rb.persistence} scrape(s))", title_justify="left")
    sig.add_column("condition")
    sig.add_column("meaning", overflow="fold")
    for c in rb.signature:
        sig.add_row(c.when, c.text.get(lang))
    for c in rb.support:
        sig.add_row(f"(support) {c.when}", c.text.get(lang))
    parts.append(sig)
    if rb.triage:
        checks = Table(title="Triage checks", title_justify="left")
        checks.add_column("check")
        checks.add_column("how")
        checks.add_column("what it means", overflow="fold")
        for ch in rb.triage:
            how = " ".join(ch.command) if ch.command else (ch.signal or "")
            checks.add_row(ch.name, how, ch.meaning.get(lang))
        parts.append(checks)
    if rb.emergency:
        parts.append(Panel(Text("\n".join(f"- [{a.action}] {a.text.get(lang)} {a.params or ''}" for a in rb.emergency)),
                           title="Emergency fix", title_align="left", border_style="yellow"))
    if rb.long_term:
        parts.append(Panel(Text("\n".join(f"- ({x.tag}) {x.text.get(lang)}" for x in rb.long_term)),
                           title="Long term", title_align="left"))
    if rb.prometheus is not None:
        pa, rule = rb.prometheus, promrules.alert_rule(rb)
        parts.append(Panel(Text(rule.canonical), title_align="left",
                           title=f"Prometheus alert ({pa.severity}, for {pa.hold}, by {', '.join(rule.scope)})"))
    if rb.look_alikes:
        parts.append(Text("Look-alikes: " + "; ".join(f"{la.incident} ({la.why.get(lang)})" for la in rb.look_alikes)))
    if rb.references:
        parts.append(Text("References: " + "; ".join(rb.references)))
    return Group(*parts)
