"""The drill scoreboards: injected vs diagnosed, time to diagnosis, key evidence; with --act, what was done and
whether the fleet recovered. Columns are picked by width (llm_oncall.termtable)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from llm_oncall.drills.runner import DrillResult
from llm_oncall.termtable import Column, FitTable


def _mark(ok: bool) -> Text:
    return Text("✓", style="green") if ok else Text("✗", style="bold red")


def scoreboard(results: Sequence[DrillResult], seed: int | None = None) -> FitTable:
    correct = sum(r.correct for r in results)
    title = f"Drill scoreboard: {correct}/{len(results)} correct" + (f" (seed {seed})" if seed is not None else "")
    t = FitTable(
        Column("injected", no_wrap=True),
        Column("diagnosed as", no_wrap=True),
        Column("", justify="center", no_wrap=True),
        Column("to diagnosis", justify="right", no_wrap=True, priority=1),
        Column("intervals", justify="right", no_wrap=True, priority=3, stack=False),
        Column("key evidence", min_width=30, priority=2),
        title=title)
    for r in results:
        ttd = f"{r.seconds_to_diagnosis:.0f}s" if r.seconds_to_diagnosis is not None else "–"
        iv = f"{r.intervals_to_diagnosis:.0f}" if r.intervals_to_diagnosis is not None else "–"
        evidence = "; ".join(r.evidence[:2]) or ("no page" if r.diagnosed == "healthy" else "")
        if r.false_pages:
            evidence = f"{r.false_pages} false page(s) before onset; " + evidence
        t.add_row(r.incident, r.diagnosed, _mark(r.correct), ttd, iv, evidence)
    return t


def act_scoreboard(results: Sequence[Any]) -> FitTable:
    """`drill --act`: each result's drill (injected, diagnosed), its recovery (the incident's signal, then every
    user-facing symptom: "SLO back") beside the manual baseline's (a
    simulated on-call human on the same seed) and their ratio, its actions (kind, target, status, verdict) and
    postmortem."""
    ok = sum(bool(r.drill.correct and r.recovered) for r in results)
    twin = any(getattr(r, "twin", None) is not None for r in results)
    t = FitTable(
        Column("injected", no_wrap=True),
        Column("diagnosed as", no_wrap=True),
        Column("", justify="center", no_wrap=True),
        Column("recovered", justify="right", no_wrap=True),
        *([Column("twin predicted", justify="right", no_wrap=True, priority=2)] if twin else []),
        Column("SLO back", justify="right", no_wrap=True, priority=2),
        Column("manual", justify="right", no_wrap=True, priority=3),
        Column("manual/auto", justify="right", no_wrap=True, priority=3),
        Column("actions", min_width=44, priority=1),
        Column("postmortem", priority=2),
        title=f"Drill --act: {ok}/{len(results)} diagnosed and recovered")
    for r in results:
        rec = f"{r.seconds_to_recovery:.0f}s" if r.recovered and r.seconds_to_recovery is not None else "no"
        acts = [f"{a['kind']} {a['target']}: {a['status']}"
                + (f" ({a['verification']['verdict']})" if a.get("verification") else "") for a in r.actions]
        pm = r.postmortem["markdown"] if r.postmortem is not None else ""
        manual = getattr(r, "manual_seconds_to_recovery", None)
        ran = getattr(r, "manual_decision_s", None) is not None
        ratio = f"{manual / r.seconds_to_recovery:.1f}×" if manual and r.seconds_to_recovery else ""
        slo = getattr(r, "seconds_to_slo", None)
        pred = []
        if twin:
            p = r.predicted_seconds_to_recovery if getattr(r, "twin", None) is not None else None
            pred = [f"{p:.0f}s" if p is not None else "no" if getattr(r, "twin", None) is not None else ""]
        t.add_row(r.drill.incident, r.drill.diagnosed, _mark(bool(r.drill.correct)), rec, *pred,
                  f"{slo:.0f}s" if slo is not None else "no" if r.recovered else "",
                  f"{manual:.0f}s" if manual is not None else "no" if ran else "", ratio,
                  "\n".join(acts) or "none", str(pm))
    return t
