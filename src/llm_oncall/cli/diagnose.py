"""`diagnose` and `capture`: read a fleet live, through Prometheus or from a bundle."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from llm_oncall.cli import common
from llm_oncall.cli.common import (
    DcgmOpt,
    JsonOpt,
    LangOpt,
    RunbooksOpt,
    TargetOpt,
    TargetsFileOpt,
    console,
    err_console,
    fail,
    print_json,
    seconds,
)
from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.diagnosis.report import report
from llm_oncall.diagnosis.symptoms import Slo
from llm_oncall.evidence.classify import classify_file
from llm_oncall.evidence.model import Finding
from llm_oncall.signals.bundle import BundleError, BundleWriter, ReplaySource
from llm_oncall.signals.prometheus import PrometheusError, PrometheusSource
from llm_oncall.signals.scrape import ScrapeSource
from llm_oncall.signals.source import Batch, Target
from llm_oncall.signals.targets import parse_target, read_file_sd
from llm_oncall.signals.view import snapshot_table

REPLAY_SCRAPES_KEPT = 1_000_000  # a recorded history is stepped through from its start: keep all of it


def log_findings(logs: Sequence[Path]) -> list[Finding]:
    """The `--logs` files' findings, read as what they are — a process's log or a command's output — so the
    word-level prior, which reads a person's prose, never answers for them: a guess from words would become an
    incident's evidence (`log_<incident>` features)."""
    return [classify_file(f, word_prior=False) for f in logs]


def register(app: typer.Typer) -> None:
    app.command()(diagnose)
    app.command()(capture)


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



def _check_pages(batch: Batch) -> None:
    """A page that answers but carries no vLLM (or SGLang) series is the wrong URL, not a healthy engine."""
    up = [o for o in batch.observations if o.target.kind == "vllm" and o.page is not None]
    if not up or any(o.page is not None and o.page.samples for o in up):
        return
    found = []
    for o in up:
        names = sorted({line.split("{", 1)[0].split(" ", 1)[0] for line in (o.text or "").splitlines()
                        if line and not line.startswith("#")})
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        found.append(f"{o.target.name} ({o.target.url}): {len(names)} series, none of vLLM's or SGLang's"
                     + (f" — {shown}" if names else " — an empty page"))
    raise fail("no vLLM series on the scraped page(s): " + "; ".join(found) + ". Point --target at the engine's "
               "/metrics (vLLM's API server port, e.g. http://HOST:8000/metrics)", code=3)


def _live(pilot: Autopilot, targets: list[Target], interval: float, samples: int,
          writer: BundleWriter | None) -> Diagnosis | None:
    source = ScrapeSource(targets, timeout_s=min(10.0, max(1.0, interval * 0.8)), keep_text=True)
    diagnosis: Diagnosis | None = None
    with err_console.status("scraping") as status:
        for i in range(samples):
            started = time.monotonic()
            batch = source.collect()
            if i == 0:
                _check_pages(batch)
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


def _replay(pilot: Autopilot, batch: Batch, story: list[Diagnosis] | None = None) -> Diagnosis | None:
    """Feed a whole recorded history, diagnosing at every scrape time as the live loop would; every diagnosis
    goes to ``story`` when given."""
    pilot.observe(batch)
    diagnosis: Diagnosis | None = None
    for t in pilot.store.times()[1:]:
        diagnosis = pilot.step(at=t)
        if story is not None:
            story.append(diagnosis)
    return diagnosis


def story_json(story: list[Diagnosis]) -> dict[str, Any]:
    """The bundle's story: every change of diagnosis (incident or severity) with its time, and the first page."""
    timeline: list[dict[str, Any]] = []
    for d in story:
        severity = d.severity if d.incident != "healthy" else "none"
        # What a cascade caused (a survivor that stopped stepping in a retry storm) enters the timeline as a
        # consequence of the incident, which keeps the name of its first cause.
        caused = sorted(c["incident"] for c in d.extra.get("consequences", ()))
        if not timeline or (timeline[-1]["incident"], timeline[-1]["severity"],
                            timeline[-1].get("consequences", [])) != (d.incident, severity, caused):
            timeline.append({"t": d.t, "incident": d.incident, "severity": severity,
                             "confidence": round(d.confidence, 3), **({"consequences": caused} if caused else {})})
    page = next((d for d in story if d.pages), None)
    first_page = {"incident": page.incident, "t": page.t, "confidence": round(page.confidence, 3)} if page else None
    return {"first_page": first_page, "timeline": timeline}


def diagnose(
    target: TargetOpt = [],  # noqa: B006 — Typer reads the default
    dcgm: DcgmOpt = [],  # noqa: B006
    targets_file: TargetsFileOpt = [],  # noqa: B006
    prometheus: Annotated[str | None, typer.Option(help="Prometheus base URL.")] = None,
    selector: Annotated[str, typer.Option(help='Label matchers for Prometheus, e.g. job="vllm".')] = "",
    replay: Annotated[Path | None, typer.Option(help="A capture bundle directory.")] = None,
    logs: Annotated[list[Path], typer.Option("--logs", help="Log or command-output files as evidence.")] = [],  # noqa: B006
    interval: Annotated[float, typer.Option(help="Between scrapes (live): 5s, or seconds.", parser=seconds)] = 5.0,
    samples: Annotated[int, typer.Option(help="Scrapes to take (live).", min=2)] = 4,
    window: Annotated[float | None, typer.Option(help="Window in seconds for rates and quantiles.")] = None,
    runbooks: RunbooksOpt = [],  # noqa: B006
    lang: LangOpt = "en",
    slo_ttft: Annotated[float | None, typer.Option("--slo-ttft-p99", help="TTFT p99 SLO in seconds.")] = None,
    slo_itl: Annotated[float | None, typer.Option("--slo-itl-p99", help="ITL p99 SLO in seconds.")] = None,
    slo_errors: Annotated[float | None, typer.Option("--slo-error-share", help="Error share SLO (0.05 = 5 %).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Read the fleet (live, through Prometheus, or from a capture) and say what is wrong."""
    modes = sum(x for x in (bool(target or dcgm or targets_file), prometheus is not None, replay is not None))
    if modes != 1:
        raise fail("give exactly one of --target/--targets-file, --prometheus or --replay")
    if interval <= 0:
        raise fail("--interval must be positive")
    for name, value in (("--slo-ttft-p99", slo_ttft), ("--slo-itl-p99", slo_itl), ("--slo-error-share", slo_errors)):
        if value is not None and not value > 0:
            raise fail(f"{name} must be positive")
    slo = Slo(slo_ttft, slo_itl, slo_errors)
    registry = common.registry(runbooks)
    for f in logs:
        if not f.is_file():
            raise fail(f"--logs {f}: no such file")
    story: list[Diagnosis] = []
    try:
        if replay is not None:
            rs = ReplaySource(replay)
            pilot = Autopilot(rs.interval_s, registry, lang, window, scrapes_kept=REPLAY_SCRAPES_KEPT, slo=slo)
            pilot.add_findings(log_findings(logs))
            diagnosis = _replay(pilot, rs.collect(), story)
        elif prometheus is not None:
            ps = PrometheusSource(prometheus, selector, window_s=max(window or 0, 40 * interval), step_s=interval)
            pilot = Autopilot(interval, registry, lang, window, scrapes_kept=REPLAY_SCRAPES_KEPT, slo=slo)
            pilot.add_findings(log_findings(logs))
            diagnosis = _replay(pilot, ps.collect(), story)
        else:
            pilot = Autopilot(interval, registry, lang, window, slo=slo)
            pilot.add_findings(log_findings(logs))
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
        if replay is not None or prometheus is not None:
            body.update(story_json(story))
        body["snapshot"] = snap.to_json()
        print_json(body)
        return
    console.print(snapshot_table(snap))
    if story:
        told = story_json(story)
        if len(told["timeline"]) > 1 or told["first_page"]:
            console.print("timeline: " + " → ".join(f"t={e['t']:g}s {e['incident']} ({e['severity']})"
                                                     for e in told["timeline"]), soft_wrap=True)
    if diagnosis is not None:
        console.print(report(diagnosis, lang))
    else:
        console.print("[yellow]not enough scrapes to diagnose (need at least two)[/yellow]")


def capture(
    out: Annotated[Path, typer.Option(help="New directory for the bundle.")],
    target: TargetOpt = [],  # noqa: B006
    dcgm: DcgmOpt = [],  # noqa: B006
    targets_file: TargetsFileOpt = [],  # noqa: B006
    duration: Annotated[float, typer.Option(help="How long to capture: 60s, 2m, or seconds.", parser=seconds)] = 60.0,
    interval: Annotated[float, typer.Option(help="Between scrapes: 5s, or seconds.", parser=seconds)] = 5.0,
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
