"""`runbooks list|show|lint`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from llm_oncall.cli.common import JsonOpt, LangOpt, RunbooksOpt, console, fail, print_json, registry
from llm_oncall.termtable import Column, FitTable

app = typer.Typer(help="List, show and lint runbooks.", no_args_is_help=True)


@app.command("list")
def runbooks_list(runbooks: RunbooksOpt = [], lang: LangOpt = "en", as_json: JsonOpt = False) -> None:  # noqa: B006
    """Runbooks in triage order."""
    reg = registry(runbooks)
    books = reg.in_triage_order()
    if as_json:
        print_json([{"id": b.id, "priority": b.priority, "title": b.title.get(lang)} for b in books])
        return
    console.print(runbooks_table([(b.priority, b.id, b.title.get(lang), b.symptom.get(lang)) for b in books]))


def runbooks_table(rows: list[tuple[int, str, str, str]]) -> FitTable:
    table = FitTable(Column("id", no_wrap=True), Column("title", min_width=24),
                     Column("symptom", min_width=30, priority=1),
                     Column("order", justify="right", no_wrap=True, priority=2, stack=False),
                     title="Runbooks (triage order)")
    for order, rid, title, symptom in rows:
        table.add_row(rid, title, symptom, str(order))
    return table


@app.command("show")
def runbooks_show(incident: str, runbooks: RunbooksOpt = [], lang: LangOpt = "en",  # noqa: B006
                  as_json: JsonOpt = False) -> None:
    """One runbook: symptom, checks, signature, actions, long-term fixes."""
    from llm_oncall.runbooks.view import runbook_view

    reg = registry(runbooks)
    rb = reg.get(incident)
    if rb is None:
        raise fail(f"no runbook {incident!r}; known: {', '.join(reg.ids())}")
    if as_json:
        print_json(rb.model_dump(mode="json"))
        return
    console.print(runbook_view(rb, lang))


@app.command("lint")
def runbooks_lint(paths: Annotated[list[Path], typer.Argument(help="Runbook files or directories.")],
                  as_json: JsonOpt = False) -> None:
    """Validate runbook files: schema errors with file and line, unknown features."""
    from llm_oncall.diagnosis.features import known_feature_names
    from llm_oncall.runbooks.loader import lint

    problems = lint(paths, known_feature_names())
    if as_json:
        print_json([{"file": p.file, "line": p.line, "message": p.message} for p in problems])
    else:
        for p in problems:
            console.print(f"[red]{p}[/red]")
        if not problems:
            console.print("ok")
    if problems:
        raise typer.Exit(1)
