"""What every command module shares: consoles, error exit, JSON output, option types, the runbook registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from llm_oncall.runbooks.loader import Registry, RunbookError, load_registry

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(Text.assemble(("error:", "red"), " ", message), soft_wrap=True)
    return typer.Exit(code)


def seconds(value: str | float) -> float:
    """A duration flag (`--interval 15s`, `--duration 2m`, or a plain number of seconds): one syntax everywhere."""
    if isinstance(value, int | float):
        return float(value)
    from llm_oncall.signals.duration import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


TargetOpt = Annotated[list[str], typer.Option("--target", "-t", help="[NAME=]URL of a vLLM /metrics endpoint.")]
DcgmOpt = Annotated[list[str], typer.Option("--dcgm", help="[NODE=]URL of a dcgm-exporter /metrics endpoint.")]
TargetsFileOpt = Annotated[list[Path], typer.Option("--targets-file", help="Prometheus file_sd JSON with targets.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]

RunbooksOpt = Annotated[list[Path], typer.Option("--runbooks", help="Directory of runbooks that add or override.")]
LangOpt = Annotated[str, typer.Option("--lang", help="Report language: en or zh.")]



def registry(dirs: list[Path]) -> Registry:
    try:
        return load_registry(dirs)
    except RunbookError as exc:
        raise fail(f"invalid runbooks:\n{exc}") from exc
