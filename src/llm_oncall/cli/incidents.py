"""`llm-oncall incidents list|show ID`: the incident store (the same SQLite file `serve` writes)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from llm_oncall.cli.common import JsonOpt, console, fail, print_json
from llm_oncall.termtable import Column, FitTable

if TYPE_CHECKING:
    from llm_oncall.incidents import IncidentStore

app = typer.Typer(help="Incidents in the store: lifecycle, alerts, timeline.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)

DbOpt = Annotated[Path, typer.Option("--db", help="SQLite store (the service config's `db`).")]


@app.callback()
def _group() -> None:
    """Incidents in the store: lifecycle, alerts, timeline."""


def _store(db: Path) -> IncidentStore:
    from llm_oncall.incidents import IncidentStore, StoreError

    if not db.is_file():
        raise fail(f"--db {db}: no such file", code=3)
    try:
        return IncidentStore(db)
    except (StoreError, RuntimeError, OSError) as exc:
        raise fail(f"--db {db}: {exc}", code=3) from exc


@app.command("list")
def list_cmd(db: DbOpt = Path("llm-oncall.db"),
             status: Annotated[str | None, typer.Option(help="Only this status (open|mitigating|mitigated|"
                                                             "resolved).")] = None,
             as_json: JsonOpt = False) -> None:
    """Every incident, newest first."""
    from llm_oncall.incidents import STATUSES

    if status is not None and status not in STATUSES:
        raise fail(f"--status is one of {', '.join(STATUSES)}")
    rows = _store(db).incidents(status)
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("no incidents")
        return
    console.print(incidents_table(rows))


def incidents_table(rows: list[dict[str, Any]]) -> FitTable:
    t = FitTable(Column("id", no_wrap=True), Column("status", no_wrap=True), Column("incident", no_wrap=True),
                 Column("opened", no_wrap=True, priority=2), Column("alerts", justify="right", no_wrap=True,
                                                                    priority=3, stack=False),
                 Column("title", min_width=24, priority=1), title=f"Incidents ({len(rows)}, newest first)")
    for r in rows:
        t.add_row(str(r["id"]), str(r["status"]), str(r["incident"]), str(r["opened_at"]), str(r["alerts"]),
                  str(r.get("title") or ""))
    return t


@app.command("show")
def show_cmd(incident_id: Annotated[str, typer.Argument(metavar="ID", help="Incident id (incidents list).")],
             db: DbOpt = Path("llm-oncall.db"), as_json: JsonOpt = False) -> None:
    """One incident: status, diagnosis, alerts and its whole timeline."""
    inc = _store(db).get(incident_id)
    if inc is None:
        raise fail(f"no incident {incident_id} in {db}", code=3)
    if as_json:
        print_json(inc)
        return
    console.print(f"[bold]{inc['id']}[/bold] {inc['incident']} — {inc['status']} (opened {inc['opened_at']}"
                  + (f", resolved {inc['resolved_at']}" if inc["resolved_at"] else "") + ")", soft_wrap=True)
    if inc["title"]:
        console.print(f"  {inc['title']}", soft_wrap=True)
    for a in inc["alert_list"]:
        console.print(f"  alert {a['alertname']} {a['status']} fingerprint {a['fingerprint']} since {a['startsAt']}")
    for e in inc["timeline"]:
        console.print(f"  {e['at']}  {e['kind']:<12} {e['actor']:<14} {e['detail']}", soft_wrap=True, markup=False)
