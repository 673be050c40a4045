"""The `llm-oncall` command line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from llm_oncall.signals.bundle import BundleError, BundleWriter, ReplaySource
from llm_oncall.signals.prometheus import PrometheusError, PrometheusSource
from llm_oncall.signals.scrape import ScrapeSource
from llm_oncall.signals.source import Target
from llm_oncall.signals.store import Store
from llm_oncall.signals.targets import parse_target, read_file_sd
from llm_oncall.signals.view import snapshot_table

app = typer.Typer(help="On-call autopilot for vLLM inference fleets.", no_args_is_help=True,
                  pretty_exceptions_enable=False, add_completion=False)
bench_app = typer.Typer(help="Benchmarks that print the comparison measured in the same run.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

console = Console()
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {message}")
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


def _live_store(targets: list[Target], interval: float, samples: int, writer: BundleWriter | None) -> Store:
    source = ScrapeSource(targets, timeout_s=min(10.0, max(1.0, interval * 0.8)), keep_text=writer is not None)
    store = Store(interval_s=interval)
    with err_console.status("scraping") as status:
        for i in range(samples):
            started = time.monotonic()
            batch = source.collect()
            store.add(batch)
            if writer is not None:
                for obs in batch.observations:
                    writer.write(obs)
            down = sum(1 for o in batch.observations if o.page is None)
            status.update(f"scrape {i + 1}/{samples}: {len(batch.observations) - down} up, {down} down")
            if i + 1 < samples:
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
    return store


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
    samples: Annotated[int, typer.Option(help="Scrapes to take (live).", min=2)] = 3,
    window: Annotated[float | None, typer.Option(help="Window in seconds for rates and quantiles.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Read the fleet (live, through Prometheus, or from a capture) and say what is wrong."""
    modes = sum(x for x in (bool(target or dcgm or targets_file), prometheus is not None, replay is not None))
    if modes != 1:
        raise fail("give exactly one of --target/--targets-file, --prometheus or --replay")
    if interval <= 0:
        raise fail("--interval must be positive")
    try:
        if replay is not None:
            rs = ReplaySource(replay)
            store = Store(interval_s=rs.interval_s)
            store.add(rs.collect())
        elif prometheus is not None:
            ps = PrometheusSource(prometheus, selector, window_s=max(window or 0, 5 * interval), step_s=interval)
            store = Store(interval_s=interval)
            store.add(ps.collect())
        else:
            store = _live_store(_targets(target, dcgm, targets_file), interval, samples, None)
    except (BundleError, PrometheusError, ValueError) as exc:
        raise fail(str(exc)) from exc
    for problem in store.problems[:20]:
        err_console.print(f"[yellow]warning:[/yellow] {problem}")
    if store.latest_time() is None or not any(t.kind == "vllm" for t in store.targets.values()):
        raise fail("no vLLM telemetry found")
    snap = store.snapshot(window_s=window)
    if as_json:
        print_json({"snapshot": snap.to_json()})
    else:
        console.print(snapshot_table(snap))


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
    try:
        store = _live_store(targets, interval, samples, writer)
    except KeyboardInterrupt:
        err_console.print(f"[yellow]interrupted; partial bundle kept in {out}[/yellow]")
        raise typer.Exit(130) from None
    pages = sum(len(s.scrapes) for s in store.series.values())
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
