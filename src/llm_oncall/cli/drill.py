"""`drill`: the main job — incidents injected into a simulated fleet, the autopilot scored."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from llm_oncall.cli.common import JsonOpt, console, err_console, fail, print_json


def drill(
    incidents: Annotated[list[str] | None, typer.Argument(help="Incident ids (default: all 8).")] = None,
    seed: Annotated[int, typer.Option(help="Seed: same seed, same fleet, same telemetry.")] = 7,
    suite: Annotated[int | None, typer.Option(help="Run N randomized scenarios and score them.")] = None,
    soak: Annotated[str | None, typer.Option(help="Healthy soak of simulated duration, e.g. 24h.")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", "--jobs", "-j", help="Worker processes (default: all cores); results are the same for any "
                                          "number.")] = None,
    act: Annotated[bool, typer.Option("--act", help="Also plan, guard (auto mode, drill policy), execute the "
                                                    "emergency fix on the simulator's Kubernetes API and verify "
                                                    "recovery.")] = False,
    postmortem: Annotated[Path | None, typer.Option("--postmortem", help="With --act: write each drilled incident's "
                                                    "record and postmortem under DIR/<incident>/.")] = None,
    what_if: Annotated[str | None, typer.Option("--what-if", help="Run the incident twice, as is and with this "
                                                "long-term fix in place (hpa-waiting-3, warm-pool-20, retry-budget, "
                                                "gateway-ratelimit, length-routing): impact side by side.")] = None,
    manual: Annotated[bool | None, typer.Option(
        "--manual/--no-manual", help="With --act: also work each incident as a simulated on-call human following "
                                     "the runbook (docs/drills.md), for the MTTR side by side. Default: on for "
                                     "the named incidents, off with --suite (it takes about three times the "
                                     "autopilot's time).")] = None,
    variant: Annotated[str | None, typer.Option(
        "--variant", help="gpu-ecc only: which fault, one per rung of the GPU repair ladder: dbe (Xid 48+63, GPU "
                          "reset; the default), contained (Xid 94, app restart), off_bus (Xid 79, reboot), repeat "
                          "(a repeat offender: cordon and hardware ticket).")] = None,
    simulate: Annotated[bool, typer.Option(
        "--simulate/--no-simulate", help="With --act (not --suite): try each plan on a twin of the fleet first "
                                         "(docs/actions.md, Twin); results carry predicted_seconds_to_recovery "
                                         "beside the observed.")] = True,
    first_suite_shapes: Annotated[bool, typer.Option(
        "--first-suite-shapes", help="With --suite: only the first suite's scenario shapes (to compare).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The main job: inject incidents into a simulated fleet and score the autopilot."""
    from llm_oncall.drills import runner
    from llm_oncall.drills.scoreboard import scoreboard

    if manual is not None and not act:
        raise fail("--manual/--no-manual needs --act (the human works the incident through the on-call loop)")
    if what_if is not None:
        _what_if(incidents or [], what_if, seed, as_json)
        return
    if suite is not None and act:
        _suite_act(suite, seed, workers, bool(manual), as_json)
        return
    if suite is not None or soak is not None:
        from llm_oncall.drills import suite as suite_mod

        if soak is not None:
            suite_mod.soak_cli(soak, seed, as_json, console)
        else:
            suite_mod.suite_cli(suite or 0, seed, workers, as_json, console, shapes=not first_suite_shapes)
        return
    known = (*runner.DRILL_INCIDENTS, "pod-outlier", "healthy")
    chosen = list(incidents or runner.DRILL_INCIDENTS)
    unknown = [i for i in chosen if i not in known]
    if unknown:
        raise fail(f"unknown incident(s): {', '.join(unknown)}; choose from {', '.join(known)}")
    jobs = [(i, seed) for i in chosen]
    params: tuple[tuple[str, str], ...] = ()
    if variant is not None:
        from llm_oncall.sim.faults import GPU_ECC_VARIANTS

        if chosen != ["gpu-ecc"] or variant not in GPU_ECC_VARIANTS:
            raise fail(f"--variant is for gpu-ecc alone, one of {', '.join(GPU_ECC_VARIANTS)}")
        params = (("variant", variant),)
    if postmortem is not None and not act:
        raise fail("--postmortem needs --act (the postmortem is written from the record of the response)")
    if postmortem is not None and postmortem.exists() and not postmortem.is_dir():
        raise fail(f"--postmortem {postmortem}: exists and is not a directory")
    if act:
        _drill_act(jobs, workers, seed, as_json, postmortem, manual is not False, params, simulate)
        return
    if params:
        raise fail("--variant needs --act (the variant decides the repair)")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True, disable=as_json) as progress:
        task = progress.add_task("drilling", total=len(jobs))
        results = runner.run_many(jobs, workers, progress=lambda r: progress.advance(task))
    if as_json:
        print_json({"results": [r.to_json() for r in results], "correct": sum(r.correct for r in results),
                    "total": len(results), "seed": seed})
    else:
        console.print(scoreboard(results, seed))
    if not all(r.correct for r in results):
        raise typer.Exit(1)


def _what_if(incidents: list[str], fix: str, seed: int, as_json: bool) -> None:
    from llm_oncall.drills import whatif
    from llm_oncall.termtable import Column, FitTable

    if len(incidents) != 1:
        raise fail("--what-if takes one incident: drill INCIDENT --what-if FIX")
    with err_console.status(f"{incidents[0]}: as is, then with {fix}"):
        try:
            body = whatif.run(incidents[0], fix, seed)
        except ValueError as exc:
            raise fail(str(exc)) from exc
    if as_json:
        print_json(body)
        return
    t = FitTable(Column("impact", no_wrap=True), Column("without", justify="right"),
                 Column(f"with {fix}", justify="right"),
                 title=f"{body['incident']} (seed {seed}), {body['window_s']:.0f} s from onset: {body['doc']}")
    for key in ("slo_minutes_burned", "requests_failed", "requests_over_slo", "mttr_s", "pages"):
        a, b = body["without"][key], body["with"][key]
        t.add_row(key, "—" if a is None else str(a), "—" if b is None else str(b))
    console.print(t)


def _suite_act(n: int, seed: int, workers: int | None, manual: bool, as_json: bool) -> None:
    from llm_oncall.drills import suite_act
    from llm_oncall.termtable import Column, FitTable

    if n <= 0:
        raise fail("--suite needs a positive number of scenarios")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True, disable=as_json) as progress:
        scenarios = suite_act.incident_scenarios(n, seed)
        task = progress.add_task("drill suite (--act)", total=len(scenarios))
        results = suite_act.run(n, seed, workers, manual, progress=lambda r: progress.advance(task),
                                scenarios=scenarios)
    body = suite_act.report(results, n, seed, manual=manual)
    if as_json:
        print_json(body)
        return

    def s(v: float | None) -> str:
        return "—" if v is None else f"{v:.0f}s"

    columns = [Column("incident", no_wrap=True), Column("n", justify="right"), Column("recovered", justify="right"),
               Column("MTTR median", justify="right"), Column("p95", justify="right", priority=2)]
    if manual:
        columns += [Column("manual median", justify="right", priority=1),
                    Column("manual/auto", justify="right", priority=3)]
    t = FitTable(*columns, title=f"Drill suite --act: {body['recovered']}/{body['incidents']} recovered (seed {seed})")
    for inc, row in body["mttr_by_incident"].items():
        med, man = row["median_s"], row["manual_median_s"]
        cells = [inc, str(row["n"]), str(row["recovered"]), s(med), s(row["p95_s"])]
        if manual:
            cells += [s(man), f"{man / med:.1f}×" if med and man else ""]
        t.add_row(*cells)
    console.print(t)


def _drill_act(jobs: list[tuple[str, int]], workers: int | None, seed: int, as_json: bool,
               postmortem: Path | None = None, manual: bool = True,
               params: tuple[tuple[str, str], ...] = (), simulate: bool = False) -> None:
    from llm_oncall.drills import act

    todo = [act.Job(i, s, postmortem / i if postmortem is not None else None, manual=manual, params=params,
                    simulate=simulate) for i, s in jobs]
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True, disable=as_json) as progress:
        task = progress.add_task("drilling (--act)", total=len(jobs))
        results = act.run_many(todo, workers, progress=lambda r: progress.advance(task))
    if as_json:
        body = {"results": [r.to_json() for r in results], "correct": sum(r.correct for r in results),
                "total": len(results), "recovered": sum(r.recovered for r in results), "seed": seed}
        if simulate:
            body["twin"] = act.prediction_summary(results)
        print_json(body)
    else:
        from llm_oncall.drills.scoreboard import act_scoreboard

        console.print(act_scoreboard(results))
        if postmortem is not None and any(r.postmortem is None for r in results):
            console.print("no postmortem where nothing paged (no incident in the record)")
    if not all(r.correct and r.recovered for r in results):
        raise typer.Exit(1)
