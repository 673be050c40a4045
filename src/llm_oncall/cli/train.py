"""`train`: on-call training — a simulated fleet pages a human, who works the runbook and is scored against the
autopilot on the same seed (docs/training.md)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Annotated

import typer

from llm_oncall.cli.common import JsonOpt, console, fail, print_json


def train(
    incident: Annotated[str | None, typer.Argument(help="The incident to train on (see `drill`).")] = None,
    random_: Annotated[bool, typer.Option("--random", help="A random incident (from the seed).")] = False,
    seed: Annotated[int, typer.Option(help="Seed: same seed, same fleet, same incident.")] = 7,
    speed: Annotated[float, typer.Option(help="Interactive: simulated seconds per wall second of thinking "
                                              "(0: only the commands' costs).")] = 0.0,
    script: Annotated[Path | None, typer.Option("--script", help="Replay a trainee's commands, one per line.")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write the Markdown training report here.")] = None,
    autopilot: Annotated[bool, typer.Option("--autopilot/--no-autopilot",
                                            help="Also run the autopilot on the same seed to compare.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """On-call training on the simulated fleet: the page, your triage, diagnosis and actions, scored."""
    from llm_oncall.sim import FAULTS
    from llm_oncall.training import report as report_mod
    from llm_oncall.training.session import CommandError, Session
    from llm_oncall.training.tui import run_interactive

    if random_:
        incident = random.Random(seed).choice(FAULTS)  # noqa: S311 - picking a drill, not cryptography
    if incident is None:
        raise fail("name an incident or give --random")
    try:
        session = Session(incident, seed)
    except CommandError as exc:
        raise fail(str(exc)) from exc
    try:
        if script is not None:
            try:
                lines = script.read_text().splitlines()
            except OSError as exc:
                raise fail(f"{script}: {exc}") from exc
            if not as_json:
                console.print(session.page, markup=False)
            for line in lines:
                if line.strip() and not line.strip().startswith("#"):
                    step = session.do(line)
                    if not as_json:
                        console.print(f"[bold][t+{step.t:.0f}s] {line}[/bold]", highlight=False)
                        console.print(step.output, markup=False, highlight=False)
        else:
            run_interactive(session, console, speed)
        result = session.finish(autopilot=autopilot)
    finally:
        session.close()
    text = report_mod.render(result)
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(text)
    if as_json:
        print_json(result.to_json())
    else:
        console.print(text, markup=False, highlight=False)
