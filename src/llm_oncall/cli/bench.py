"""`bench`: benchmarks that print the comparison measured in the same run."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from llm_oncall.cli.common import JsonOpt, console, fail, print_json
from llm_oncall.termtable import Column, FitTable

if TYPE_CHECKING:
    from llm_oncall.diagnosis.autopilot import Autopilot
    from llm_oncall.diagnosis.engine import Diagnosis

app = typer.Typer(help="Benchmarks that print the comparison measured in the same run.", no_args_is_help=True)


@app.command("ingest")
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


@app.command("sim")
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


@app.command("drill")
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


@app.command("evidence")
def bench_evidence(
    corpus_dir: Annotated[Path | None, typer.Option("--corpus", help="Corpus directory (manifest.yaml per folder); "
                                                    "default: the repository's tests/evidence/real.")] = None,
    repeat: Annotated[int, typer.Option(help="Passes over the corpus for the files/s figure.", min=1)] = 1,
    misses: Annotated[bool, typer.Option("--misses", help="List the samples classified wrongly.")] = False,
    by_source: Annotated[bool, typer.Option("--by-source", help="Accuracy apart for samples whose source thread "
                                            "has other samples in the corpus and for the only sample of a "
                                            "thread.")] = False,
    use_prior: Annotated[bool | None, typer.Option("--prior/--no-prior", help="With the word-level prior as the "
                                                   "fallback where nothing is recognised (default: on, adopted in "
                                                   "round 3o).", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Evidence classifier on real samples: per-class precision and recall, files per second."""
    from llm_oncall.drills import bench_evidence as be
    from llm_oncall.evidence.corpus import CorpusError

    root = corpus_dir or be.default_corpus()
    if root is None:
        raise fail("no corpus: run from the repository (tests/evidence/real) or pass --corpus DIR")
    if not root.is_dir():
        raise fail(f"no such corpus directory: {root}")
    from llm_oncall.evidence import prior

    if use_prior and prior.packaged() is None:
        raise fail("no word-level prior model in the package")
    try:
        result = be.run(root, repeat, by_source=by_source, word_prior=use_prior)
    except CorpusError as exc:
        raise fail(str(exc)) from exc
    result.pop("table", None)
    if as_json:
        print_json(result)
        return
    console.print(f"corpus: {result['corpus']}: {result['samples']} samples ({result['benign_samples']} benign)",
                  markup=False, highlight=False)
    console.print(evidence_table(result["per_class"]))
    console.print(f"accuracy {result['accuracy']:.3f}; unknown answers: {result['unknown_predictions']}; "
                  f"{result['files_per_s']:.0f} files/s")
    if by_source:
        for group, label in (("shared", "source thread shared with other samples"),
                             ("only", "only sample of its thread")):
            v = result["by_source"][group]
            acc = "-" if v["accuracy"] is None else f"{v['accuracy']:.3f}"
            console.print(f"{label}: {v['correct']}/{v['samples']} = {acc} ({v['threads']} threads)",
                          markup=False, highlight=False)
    if misses:
        for m in result["misses"]:
            console.print(f"  {m['expected']} → {m['predicted']} ({m['kind']}, {m['confidence']:.2f}): {m['file']}",
                          markup=False, highlight=False, soft_wrap=True)


class _ServeRound:
    """`serve`'s own watch loop (service/watch.py) on the bench's source, with a real SQLite incident store; a
    round that fails (the loop logs and carries on) fails the bench."""

    def __init__(self, source: Any, interval_s: float, db: Path) -> None:
        from llm_oncall.actions.ledger import Ledger
        from llm_oncall.incidents import IncidentStore
        from llm_oncall.service.observability import Log, Metrics
        from llm_oncall.service.sources import Feed
        from llm_oncall.service.watch import Watcher

        self.errors = io.StringIO()
        self.watcher = Watcher(Feed(source, interval_s), IncidentStore(db), Ledger(db), None, "propose", interval_s,
                               Metrics(), Log("error", self.errors))

    @property
    def pilot(self) -> Autopilot:
        return self.watcher.responder.pilot

    @property
    def last(self) -> Diagnosis | None:
        return self.watcher.last

    def round(self) -> None:
        self.watcher.round()
        if self.errors.tell():
            raise RuntimeError(f"the watch round failed: {self.errors.getvalue().strip()}")


@app.command("watch")
def bench_watch(
    pods: Annotated[int, typer.Option(help="Pods in the largest fleet (10 and 100 are measured beside it).",
                                      min=1, max=20_000)] = 1000,
    rounds: Annotated[int, typer.Option(help="Measured rounds per fleet size.", min=1, max=200)] = 10,
    warmup: Annotated[int, typer.Option(help="Unmeasured rounds first (the history fills up).", min=1,
                                        max=200)] = 10,
    interval: Annotated[float, typer.Option(help="Scrape interval the round must fit in, seconds.", min=0.1)] = 15.0,
    seed: Annotated[int, typer.Option(help="Seed of the pods' traffic factors.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """One `serve` watch-loop round (parse, history, snapshot, features, diagnosis, incident store) on real vLLM
    pages at 10, 100 and N pods: CPU seconds per round and the share of one core at the scrape interval, beside
    the ingest-only share."""
    from llm_oncall.drills import bench_watch as bw

    result = bw.run(_ServeRound, pods=pods, rounds=rounds, warmup=warmup, interval_s=interval, seed=seed)
    if as_json:
        print_json(result)
        return
    console.print(f"one serve watch-loop round on real vLLM 0.32 pages ({result['page']}, one live copy per pod, "
                  f"advancing every round); {warmup} warm-up + {rounds} measured rounds; CPU time, no HTTP",
                  soft_wrap=True, markup=False, highlight=False)
    console.print(watch_table(result["scales"], interval))
    verdict = "within" if result["within_goal"] else "over"
    flat = "flat" if result["flat"] else "growing"
    console.print(f"{pods} pods: [bold]{result['core_share'] * 100:.1f}%[/bold] of one core at a {interval:g} s "
                  f"interval ({verdict} the goal of {result['goal_core_share'] * 100:.0f}%; {flat} as the history "
                  f"grows: last/first {result['growth_last_over_first']:.2f}×); ingest alone "
                  f"{result['ingest_only_core_share'] * 100:.1f}%; the per-scrape telemetry log (drill --act, not "
                  f"serve) would add {result['telemetry_log_core_share'] * 100:.1f}%", soft_wrap=True)


def watch_table(scales: list[dict[str, Any]], interval: float) -> FitTable:
    def num(header: str, priority: int = 0, stack: bool = True) -> Column:
        return Column(header, justify="right", no_wrap=True, priority=priority, stack=stack)

    t = FitTable(num("pods"), num("round s"), num(f"core @{interval:g}s"), num("ingest only", 1), num("ms/pod", 3),
                 num("ingest s", 4, stack=False), num("last/first", 2), num("+telemetry", 5, stack=False),
                 Column("diagnosis", no_wrap=True, priority=2),
                 title="watch-loop round per fleet size")
    for s in scales:
        t.add_row(str(s["pods"]), f"{s['round_seconds']:.3f}", f"{s['core_share'] * 100:.1f}%",
                  f"{s['ingest_only_core_share'] * 100:.1f}%", f"{s['ms_per_pod']:.2f}",
                  f"{s['ingest_only_seconds']:.3f}", f"{s['growth_last_over_first']:.2f}×",
                  f"{s['telemetry_log_core_share'] * 100:.1f}%", str(s["diagnosis"]))
    return t


def evidence_table(per_class: dict[str, dict[str, Any]]) -> FitTable:
    t = FitTable(Column("class", no_wrap=True), Column("n", justify="right", no_wrap=True),
                 Column("predicted", justify="right", no_wrap=True, priority=1),
                 Column("precision", justify="right", no_wrap=True), Column("recall", justify="right", no_wrap=True),
                 title="per class")
    for c, v in per_class.items():
        t.add_row(c, str(v["n"]), str(v.get("predicted", "")),
                  "-" if v.get("precision") is None else f"{v['precision']:.3f}",
                  "-" if v.get("recall") is None else f"{v['recall']:.3f}")
    return t


@app.command("events")
def bench_events(
    rate: Annotated[float, typer.Option(help="Events per second of the storm.")] = 100.0,
    seconds: Annotated[float, typer.Option(help="Length of the storm (its own clock).")] = 60.0,
    seed: Annotated[int, typer.Option(help="Seed of the storm's shape.")] = 7,
    as_json: JsonOpt = False,
) -> None:
    """A GPU event storm through the service's alert path: every event written vs the storm gate, side by side."""
    from llm_oncall.drills import bench_events as be

    if rate <= 0 or seconds <= 0:
        raise fail("--rate and --seconds must be positive")
    result = be.run(_alert_handler, rate, seconds, seed)
    if as_json:
        print_json(result)
        return
    t = FitTable(Column("", no_wrap=True), Column("every event written", justify="right"),
                 Column("storm gate", justify="right"),
                 title=f"{result['events']} GPU events at {rate:g}/s ({seconds:g} s storm) through POST "
                       "/api/v1/alerts (minus HTTP)")
    u, g = result["ungated"], result["gated"]
    for key, label in (("events_per_s", "events per second (wall)"), ("events_per_cpu_s", "events per CPU second"),
                       ("core_share_at_target",
                                                                       f"core share at {be.TARGET_RATE:g}/s"),
                       ("incidents", "incidents opened"), ("alert_rows", "alert rows written"),
                       ("timeline_rows", "timeline rows written"), ("wall_s", "wall seconds"),
                       ("cpu_s", "CPU seconds")):
        t.add_row(label, str(u[key]), str(g[key]))
    console.print(t)
    console.print(f"capacity ratio (gate / every event): [bold]{result['capacity_ratio']}×[/bold]; keeps up at "
                  f"{be.TARGET_RATE:g} events/s: {'yes' if result['keeps_up'] else 'NO'}")


def _alert_handler(db: Path, clock: Any, gated: bool) -> Any:
    """The service's POST /api/v1/alerts path without HTTP: webhook validation, the storm gate, the store."""
    import json

    from llm_oncall.incidents import IncidentStore, storm
    from llm_oncall.service.config import StormConfig
    from llm_oncall.service.webhook import Webhook

    store = IncidentStore(db, clock=clock)
    st = StormConfig()
    gate = storm.StormGate(st.dedup_s, st.node_cooldown_s, st.flush_s) if gated else None

    def handle(body: bytes) -> Any:
        hook = Webhook.model_validate(json.loads(body))
        return storm.ingest(store, gate, hook.groupKey, hook.alert_dicts(), clock())
    return handle
