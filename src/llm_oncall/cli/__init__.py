"""The `llm-oncall` command line: one module per command group; this module assembles the Typer app."""

from __future__ import annotations

import typer

from llm_oncall.cli import act, bench, diagnose, evidence, incidents, probe, rules, runbooks, sim
from llm_oncall.cli.drill import drill
from llm_oncall.cli.postmortem import postmortem
from llm_oncall.cli.serve import serve
from llm_oncall.cli.train import train

app = typer.Typer(help="On-call autopilot for vLLM inference fleets.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
diagnose.register(app)
app.command()(drill)
app.command()(postmortem)
app.command()(serve)
app.command()(train)
app.add_typer(act.app, name="act")
app.add_typer(bench.app, name="bench")
app.add_typer(evidence.app, name="evidence")
app.add_typer(incidents.app, name="incidents")
app.add_typer(probe.app, name="probe")
app.add_typer(rules.app, name="rules")
app.add_typer(runbooks.app, name="runbooks")
app.add_typer(sim.app, name="sim")


def main() -> None:
    app()
