"""`llm-oncall incidents list|show ID`: the incident store (the same SQLite file `serve` writes)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from llm_oncall.actions.model import target_ref
from llm_oncall.cli.common import JsonOpt, console, fail, print_json
from llm_oncall.termtable import Column, FitTable

if TYPE_CHECKING:
    from llm_oncall.incidents import IncidentStore

app = typer.Typer(help="Incidents in the store: lifecycle, alerts, timeline.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)

DbOpt = Annotated[Path | None, typer.Option("--db", help="SQLite store (the service config's `db`; default "
                                                         "llm-oncall.db).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="serve's config: read its `db`.")]


@app.callback()
def _group() -> None:
    """Incidents in the store: lifecycle, alerts, timeline."""


def _db(db: Path | None, config: Path | None) -> Path:
    if db is not None and config is not None:
        raise fail("give --db or --config, not both")
    if config is None:
        return db or Path("llm-oncall.db")
    from llm_oncall.service.config import ConfigError, load

    try:
        return Path(load(config).db)
    except ConfigError as exc:
        raise fail(str(exc)) from exc


def _store(db: Path) -> IncidentStore:
    from llm_oncall.incidents import IncidentStore, StoreError

    if not db.is_file():
        raise fail(f"--db {db}: no such file", code=3)
    try:
        return IncidentStore(db)
    except (StoreError, RuntimeError, OSError) as exc:
        raise fail(f"--db {db}: {exc}", code=3) from exc


@app.command("list")
def list_cmd(db: DbOpt = None, config: ConfigOpt = None,
             status: Annotated[str | None, typer.Option(help="Only this status (open|mitigating|mitigated|"
                                                             "resolved).")] = None,
             as_json: JsonOpt = False) -> None:
    """Every incident, newest first."""
    from llm_oncall.incidents import STATUSES

    if status is not None and status not in STATUSES:
        raise fail(f"--status is one of {', '.join(STATUSES)}")
    rows = _store(_db(db, config)).incidents(status)
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
             db: DbOpt = None, config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """One incident: status, diagnosis, plan, alerts and its whole timeline."""
    from llm_oncall.actions.ledger import Ledger
    from llm_oncall.postmortem.build import event_text

    path = _db(db, config)
    inc = _store(path).get(incident_id)
    if inc is None:
        raise fail(f"no incident {incident_id} in {path}", code=3)
    plan = Ledger(path).plan(inc["plan_id"]) if inc.get("plan_id") else None
    if as_json:
        print_json({**inc, "plan": plan})
        return
    out = Text()
    out.append(f"{inc['id']}", "bold")
    out.append(f" {inc['incident']} — {inc['status']} (opened {inc['opened_at']}"
               + (f", resolved {inc['resolved_at']}" if inc["resolved_at"] else "") + ")\n")
    if inc["title"]:
        out.append(f"  {inc['title']}\n")
    d = inc.get("diagnosis") or {}
    if d:
        out.append(f"diagnosis: {d.get('incident')} ({float(d.get('confidence') or 0):.0%}, {d.get('severity')})"
                   f" — {d.get('summary', '')}\n")
        for e in (d.get("evidence") or [])[:5]:
            out.append(f"  evidence: {e.get('text') or e.get('signal')}\n")
        ru = d.get("runner_up") or {}
        if ru.get("incident"):
            out.append(f"  runner-up: {ru['incident']} ({float(ru.get('confidence') or 0):.0%})\n")
    if plan:
        out.append(f"plan {plan['id']}:\n")
        for a in plan["actions"]:
            g = a.get("guard") or {}
            verdict = a["status"] if a["status"] != "dry_run" else ("approvable" if g.get("approvable") else "blocked")
            out.append(f"  {a['id']}  {a['kind']} {target_ref(a['target'])}: {verdict} — {g.get('why', '')}\n")
    for a in inc["alert_list"]:
        out.append(f"alert {a['alertname']} {a['status']} fingerprint {a['fingerprint']} since {a['startsAt']}\n")
    out.append("timeline:\n")
    for e in inc["timeline"]:
        d = e["detail"] if isinstance(e["detail"], dict) else {"detail": e["detail"]}
        text = event_text(e["kind"], d) or f"{d.get('verdict', '')}: {d.get('detail', '')}"
        out.append(f"  {e['at']}  {e['kind']:<12} {text} ({e['actor']})\n")
    console.print(out, soft_wrap=True, end="")
