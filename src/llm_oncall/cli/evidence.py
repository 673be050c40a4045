"""`llm-oncall evidence ...`: what a log or node-command output file shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from llm_oncall.evidence.classify import classify_file
from llm_oncall.evidence.model import Finding

app = typer.Typer(
    help="Classify logs and node command output (NCCL, Xid, ECC, NVLink, py-spy, vLLM, kubectl).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_console = Console()
_err = Console(stderr=True)

# Facts worth a table cell, in display order; everything else stays in --json.
_KEY_FACTS = (
    "collectives",
    "ranks",
    "mismatch",
    "xids",
    "worst",
    "gpus",
    "summary_hides_fault",
    "errors_by_gpu",
    "errors",
    "fix",
    "after_capture",
    "during_capture",
    "preemptions_logged",
    "max_waiting",
    "max_kv_usage",
    "reasons",
    "exit_codes",
    "restart_count",
    "stuck_threads",
    "area",
    "overall",
    "last_stats",
)


def _short(value: object, limit: int = 80) -> str:
    if isinstance(value, dict) and {"code", "meaning"} <= value.keys():
        text = f"{value['code']} {value['meaning']}"
    else:
        text = json.dumps(value, default=str, separators=(",", ":")) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def key_facts(f: Finding, n: int = 4) -> str:
    picked = [k for k in _KEY_FACTS if k in f.facts][:n]
    return "\n".join(f"{k}={_short(f.facts[k])}" for k in picked)


def render_table(findings: list[Finding]) -> Table:
    table = Table(title="evidence", show_lines=True)
    # Ids (kind, hint) never wrap, so they stay greppable in a narrow terminal; the rest folds.
    for col in ("file", "kind", "benign", "hint", "confidence", "key facts"):
        table.add_column(col, overflow="fold", no_wrap=col in ("kind", "hint"))
    for f in findings:
        table.add_row(
            f.file,
            f.kind,
            "yes" if f.benign else "[bold red]no[/bold red]",
            f.incident_hint or "-",
            f"{f.confidence:.2f}",
            key_facts(f),
        )
    return table


@app.callback()
def _group() -> None:
    """Evidence from logs and node command output."""


@app.command()
def classify(
    files: Annotated[list[Path], typer.Argument(help="Log or command-output files.", show_default=False)],
    as_json: Annotated[
        bool, typer.Option("--json", help="Machine-readable output: a list, one object per file.")
    ] = False,
) -> None:
    """Say what each file shows: kind, benign or not, incident hint, confidence and the facts behind it."""
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        _err.print(f"[red]error:[/red] no such file: {', '.join(missing)}")
        raise typer.Exit(2)
    findings: list[Finding] = []
    for p in files:
        try:
            findings.append(classify_file(p))
        except OSError as exc:
            _err.print(f"[red]error:[/red] cannot read {p}: {exc.strerror or exc}")
            raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps([f.to_json() for f in findings], indent=2, default=str))
    else:
        _console.print(render_table(findings))
