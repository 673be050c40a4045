"""The drill scoreboard: injected vs diagnosed, time to diagnosis, key evidence."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from llm_oncall.drills.runner import DrillResult


def scoreboard(results: Sequence[DrillResult], seed: int | None = None) -> Table:
    correct = sum(r.correct for r in results)
    title = f"Drill scoreboard: {correct}/{len(results)} correct" + (f" (seed {seed})" if seed is not None else "")
    t = Table(title=title, title_justify="left")
    t.add_column("injected", no_wrap=True)
    t.add_column("diagnosed as", no_wrap=True)
    t.add_column("", justify="center")
    t.add_column("onset → diagnosis", justify="right")
    t.add_column("intervals", justify="right")
    t.add_column("key evidence", overflow="fold")
    for r in results:
        mark = Text("✓", style="green") if r.correct else Text("✗", style="bold red")
        ttd = f"{r.seconds_to_diagnosis:.0f}s" if r.seconds_to_diagnosis is not None else "–"
        iv = f"{r.intervals_to_diagnosis:.0f}" if r.intervals_to_diagnosis is not None else "–"
        evidence = "; ".join(r.evidence[:2]) or ("no page" if r.diagnosed == "healthy" else "")
        if r.false_pages:
            evidence = f"{r.false_pages} false page(s) before onset; " + evidence
        t.add_row(r.incident, r.diagnosed, mark, ttd, iv, Text(evidence))
    return t
