"""The `llm-oncall` command line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from llm_oncall import cli_evidence, cli_probe, cli_sim
from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.diagnosis.report import report
from llm_oncall.evidence.classify import classify_file
from llm_oncall.runbooks.loader import Registry, RunbookError, load_registry
from llm_oncall.signals.bundle import BundleError, BundleWriter, ReplaySource
from llm_oncall.signals.prometheus import PrometheusError, PrometheusSource
from llm_oncall.signals.scrape import ScrapeSource
from llm_oncall.signals.source import Batch, Target
from llm_oncall.signals.targets import parse_target, read_file_sd
from llm_oncall.signals.view import snapshot_table

app = typer.Typer(help="On-call autopilot for vLLM inference fleets.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
bench_app = typer.Typer(help="Benchmarks that print the comparison measured in the same run.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
app.add_typer(cli_evidence.app, name="evidence")
app.add_typer(cli_probe.app, name="probe")
app.add_typer(cli_sim.app, name="sim")
runbooks_app = typer.Typer(help="List, show and lint runbooks.", no_args_is_help=True)
app.add_typer(runbooks_app, name="runbooks")

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(Text.assemble(("error:", "red"), " ", message), soft_wrap=True)
    return typer.Exit(code)


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


def _targets(specs: list[str], dcgm: list[str], files: list[Path]) -> list[Target]:
    try:
        targets = [parse_target(s) for s in specs]
        targets += [parse_target(s, kind="dcgm") for s in dcgm]
        for f in files:
            targets += read_file_sd(f)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    names = [t.name for t in targets]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise fail(f"duplicate target names: {', '.join(sorted(dupes))} (name them: NAME=URL)")
    return targets


TargetOpt = Annotated[list[str], typer.Option("--target", "-t", help="[NAME=]URL of a vLLM /metrics endpoint.")]
DcgmOpt = Annotated[list[str], typer.Option("--dcgm", help="[NODE=]URL of a dcgm-exporter /metrics endpoint.")]
TargetsFileOpt = Annotated[list[Path], typer.Option("--targets-file", help="Prometheus file_sd JSON with targets.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


REPLAY_SCRAPES_KEPT = 1_000_000  # a recorded history is stepped through from its start: keep all of it
RunbooksOpt = Annotated[list[Path], typer.Option("--runbooks", help="Directory of runbooks that add or override.")]
LangOpt = Annotated[str, typer.Option("--lang", help="Report language: en or zh.")]


def _registry(dirs: list[Path]) -> Registry:
    try:
        return load_registry(dirs)
    except RunbookError as exc:
        raise fail(f"invalid runbooks:\n{exc}") from exc


def _live(pilot: Autopilot, targets: list[Target], interval: float, samples: int,
          writer: BundleWriter | None) -> Diagnosis | None:
    source = ScrapeSource(targets, timeout_s=min(10.0, max(1.0, interval * 0.8)), keep_text=writer is not None)
    diagnosis: Diagnosis | None = None
    with err_console.status("scraping") as status:
        for i in range(samples):
            started = time.monotonic()
            batch = source.collect()
            pilot.observe(batch)
            if writer is not None:
                for obs in batch.observations:
                    writer.write(obs)
            down = sum(1 for o in batch.observations if o.page is None)
            if i >= 1:
                diagnosis = pilot.step()
            status.update(f"scrape {i + 1}/{samples}: {len(batch.observations) - down} up, {down} down"
                          + (f" — {diagnosis.incident}" if diagnosis else ""))
            if i + 1 < samples:
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
    return diagnosis


def _replay(pilot: Autopilot, batch: Batch) -> Diagnosis | None:
    """Feed a whole recorded history, diagnosing at every scrape time as the live loop would."""
    pilot.observe(batch)
    diagnosis: Diagnosis | None = None
    for t in pilot.store.times()[1:]:
        diagnosis = pilot.step(at=t)
    return diagnosis


@app.command()
def diagnose(
    target: TargetOpt = [],  # noqa: B006 — Typer reads the default
    dcgm: DcgmOpt = [],  # noqa: B006
    targets_file: TargetsFileOpt = [],  # noqa: B006
    prometheus: Annotated[str | None, typer.Option(help="Prometheus base URL.")] = None,
    selector: Annotated[str, typer.Option(help='Label matchers for Prometheus, e.g. job="vllm".')] = "",
    replay: Annotated[Path | None, typer.Option(help="A capture bundle directory.")] = None,
    logs: Annotated[list[Path], typer.Option("--logs", help="Log or command-output files as evidence.")] = [],  # noqa: B006
    interval: Annotated[float, typer.Option(help="Seconds between scrapes (live).")] = 5.0,
    samples: Annotated[int, typer.Option(help="Scrapes to take (live).", min=2)] = 4,
    window: Annotated[float | None, typer.Option(help="Window in seconds for rates and quantiles.")] = None,
    runbooks: RunbooksOpt = [],  # noqa: B006
    lang: LangOpt = "en",
    as_json: JsonOpt = False,
) -> None:
    """Read the fleet (live, through Prometheus, or from a capture) and say what is wrong."""
    modes = sum(x for x in (bool(target or dcgm or targets_file), prometheus is not None, replay is not None))
    if modes != 1:
        raise fail("give exactly one of --target/--targets-file, --prometheus or --replay")
    if interval <= 0:
        raise fail("--interval must be positive")
    registry = _registry(runbooks)
    for f in logs:
        if not f.is_file():
            raise fail(f"--logs {f}: no such file")
    try:
        if replay is not None:
            rs = ReplaySource(replay)
            pilot = Autopilot(rs.interval_s, registry, lang, window, scrapes_kept=REPLAY_SCRAPES_KEPT)
            pilot.add_findings([classify_file(f) for f in logs])
            diagnosis = _replay(pilot, rs.collect())
        elif prometheus is not None:
            ps = PrometheusSource(prometheus, selector, window_s=max(window or 0, 40 * interval), step_s=interval)
            pilot = Autopilot(interval, registry, lang, window, scrapes_kept=REPLAY_SCRAPES_KEPT)
            pilot.add_findings([classify_file(f) for f in logs])
            diagnosis = _replay(pilot, ps.collect())
        else:
            pilot = Autopilot(interval, registry, lang, window)
            pilot.add_findings([classify_file(f) for f in logs])
            diagnosis = _live(pilot, _targets(target, dcgm, targets_file), interval, samples, None)
    except (BundleError, PrometheusError, ValueError) as exc:
        raise fail(str(exc)) from exc
    store = pilot.store
    for problem in store.problems[:20]:
        err_console.print(Text.assemble(("warning:", "yellow"), " ", problem), soft_wrap=True)
    if store.latest_time() is None or not any(t.kind == "vllm" for t in store.targets.values()):
        raise fail("no vLLM telemetry found")
    snap = pilot.snapshots[-1] if pilot.snapshots else store.snapshot(window_s=window)
    if snap.fleet.pods_up == 0:
        # Nothing answered: that is not "healthy", and the scrape errors are the first thing to read.
        errors = "; ".join(f"{p.name}: {p.error}" for p in snap.pods[:5])
        raise fail(f"no vLLM target is up at t={snap.t:.0f}s ({errors})", code=3)
    if as_json:
        body: dict[str, Any] = diagnosis.to_json() if diagnosis else {"incident": "unknown", "confidence": 0.0,
                                                                   "summary": "not enough scrapes to diagnose"}
        body["snapshot"] = snap.to_json()
        print_json(body)
        return
    console.print(snapshot_table(snap))
    if diagnosis is not None:
        console.print(report(diagnosis, lang))
    else:
        console.print("[yellow]not enough scrapes to diagnose (need at least two)[/yellow]")


@app.command()
def capture(
    out: Annotated[Path, typer.Option(help="New directory for the bundle.")],
    target: TargetOpt = [],  # noqa: B006
    dcgm: DcgmOpt = [],  # noqa: B006
    targets_file: TargetsFileOpt = [],  # noqa: B006
    duration: Annotated[float, typer.Option(help="Seconds to capture.")] = 60.0,
    interval: Annotated[float, typer.Option(help="Seconds between scrapes.")] = 5.0,
    as_json: JsonOpt = False,
) -> None:
    """Scrape targets for a while and write a capture bundle (attach it to the ticket)."""
    targets = _targets(target, dcgm, targets_file)
    if not targets:
        raise fail("give at least one --target or --targets-file")
    if interval <= 0 or duration < interval:
        raise fail("need --interval > 0 and --duration >= --interval")
    try:
        writer = BundleWriter(out, interval)
    except (BundleError, OSError) as exc:
        raise fail(str(exc)) from exc
    samples = int(duration // interval) + 1
    pilot = Autopilot(interval)
    try:
        _live(pilot, targets, interval, samples, writer)
    except KeyboardInterrupt:
        err_console.print(f"[yellow]interrupted; partial bundle kept in {out}[/yellow]")
        raise typer.Exit(130) from None
    pages = sum(len(s.scrapes) for s in pilot.store.series.values())
    if as_json:
        print_json({"out": str(out), "targets": len(targets), "scrapes": pages})
    else:
        console.print(f"wrote {pages} scrapes of {len(targets)} targets to {out}")


@bench_app.command("ingest")
def bench_ingest(
    files: Annotated[list[Path] | None, typer.Argument(help="/metrics pages (default: bundled vLLM pages).")] = None,
    seconds: Annotated[float, typer.Option(help="Measuring time per parser.")] = 4.0,
    as_json: JsonOpt = False,
) -> None:
    """Parse throughput: ours vs prometheus_client's text parser on the same pages."""
    from llm_oncall.drills import bench_ingest as bi

    try:
        pages = bi.read_pages(files) if files else bi.bundled_pages()
    except OSError as exc:
        raise fail(str(exc)) from exc
    result = bi.run(pages, seconds)
    if as_json:
        print_json(result.to_json())
        return
    console.print(f"pages: {result.pages} (avg {result.bytes_per_page / 1024:.1f} KiB)")
    console.print(f"llm-oncall parser:         {result.ours_pages_per_s:10.0f} pages/s")
    console.print(f"prometheus_client parser:  {result.prometheus_client_pages_per_s:10.0f} pages/s")
    console.print(f"ratio: [bold]{result.ratio:.1f}×[/bold]; 1,000 pods every 15 s needs "
                  f"{result.fleet_core_fraction * 100:.1f}% of one core")


@bench_app.command("sim")
def bench_sim(
    pods: Annotated[int, typer.Option(help="Pods in the simulated fleet.")] = 16,
    rate: Annotated[float, typer.Option(help="Requests per second per pod.")] = 20.0,
    sim_seconds: Annotated[float, typer.Option(help="Simulated seconds to run.")] = 600.0,
    as_json: JsonOpt = False,
) -> None:
    """Simulator speed: simulated seconds per wall second (goal ≥ 100× real time)."""
    from llm_oncall.sim import bench

    result = bench.run(pods=pods, rate_per_pod=rate, sim_seconds=sim_seconds)
    if as_json:
        print_json(result)
        return
    console.print(f"{pods} pods at {rate:g} req/s each: {sim_seconds:.0f} simulated s "
                  f"in {result['wall_seconds']:.1f} s")
    console.print(f"simulated seconds per wall second: [bold]{result['sim_seconds_per_wall_second']:.0f}×[/bold] "
                  f"real time (goal 100×); simulated requests/s: {result['requests_per_s']:.0f}")


@bench_app.command("drill")
def bench_drill(
    scenarios: Annotated[int, typer.Option(help="Scenarios to run.")] = 16,
    seed: Annotated[int, typer.Option(help="Seed.")] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Drill throughput: scenarios per minute on all cores, against a single core, same scenarios."""
    from llm_oncall.drills import bench_drill as bd

    result = bd.run(scenarios, seed)
    if as_json:
        print_json(result)
        return
    console.print(f"{scenarios} scenarios: {result['scenarios_per_minute']:.1f}/min on {result['workers']} workers, "
                  f"{result['single_worker_scenarios_per_minute']:.1f}/min on one (speed-up "
                  f"{result['speedup']:.2f}×)")


@app.command()
def drill(
    incidents: Annotated[list[str] | None, typer.Argument(help="Incident ids (default: all 8).")] = None,
    seed: Annotated[int, typer.Option(help="Seed: same seed, same fleet, same telemetry.")] = 7,
    suite: Annotated[int | None, typer.Option(help="Run N randomized scenarios and score them.")] = None,
    soak: Annotated[str | None, typer.Option(help="Healthy soak of simulated duration, e.g. 24h.")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (default: all cores).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The main job: inject incidents into a simulated fleet and score the autopilot."""
    from llm_oncall.drills import runner
    from llm_oncall.drills.scoreboard import scoreboard

    if suite is not None or soak is not None:
        from llm_oncall.drills import suite as suite_mod

        if soak is not None:
            suite_mod.soak_cli(soak, seed, as_json, console)
        else:
            suite_mod.suite_cli(suite or 0, seed, workers, as_json, console)
        return
    known = (*runner.DRILL_INCIDENTS, "pod-outlier", "healthy")
    chosen = list(incidents or runner.DRILL_INCIDENTS)
    unknown = [i for i in chosen if i not in known]
    if unknown:
        raise fail(f"unknown incident(s): {', '.join(unknown)}; choose from {', '.join(known)}")
    jobs = [(i, seed) for i in chosen]
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


@runbooks_app.command("list")
def runbooks_list(runbooks: RunbooksOpt = [], lang: LangOpt = "en", as_json: JsonOpt = False) -> None:  # noqa: B006
    """Runbooks in triage order."""
    reg = _registry(runbooks)
    books = reg.in_triage_order()
    if as_json:
        print_json([{"id": b.id, "priority": b.priority, "title": b.title.get(lang)} for b in books])
        return
    table = Table(title="Runbooks (triage order)", title_justify="left")
    for col in ("order", "id", "title", "symptom"):
        table.add_column(col, overflow="fold")
    for b in books:
        table.add_row(str(b.priority), b.id, b.title.get(lang), b.symptom.get(lang))
    console.print(table)


@runbooks_app.command("show")
def runbooks_show(incident: str, runbooks: RunbooksOpt = [], lang: LangOpt = "en",  # noqa: B006
                  as_json: JsonOpt = False) -> None:
    """One runbook: symptom, checks, signature, actions, long-term fixes."""
    from llm_oncall.runbooks.view import runbook_view

    reg = _registry(runbooks)
    rb = reg.get(incident)
    if rb is None:
        raise fail(f"no runbook {incident!r}; known: {', '.join(reg.ids())}")
    if as_json:
        print_json(rb.model_dump(mode="json"))
        return
    console.print(runbook_view(rb, lang))


@runbooks_app.command("lint")
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
