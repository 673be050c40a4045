"""The randomized drill suite and the healthy soak: accuracy, confusion matrix, MTTD, false pages.

`run_suite` runs generated scenarios through `runner.run_one` on every core and scores them;
`run_soak` keeps one healthy fleet (diurnal traffic, HPA, routine deploys) under the autopilot
for a long simulated time, where every page is a false page.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import resource
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from queue import Empty
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.drills.calibration import Answer, brier, reliability
from llm_oncall.drills.generator import CLASSES, HEALTHY, HEALTHY_AFTER_S, Scenario, generate
from llm_oncall.drills.runner import INTERVAL_S, DrillResult, run_one
from llm_oncall.respond.simsource import SimSource
from llm_oncall.signals import duration
from llm_oncall.sim import Fleet, FleetConfig, lifecycle
from llm_oncall.sim.autoscaler import HpaConfig
from llm_oncall.termtable import Column, FirstFit, FitTable

ProgressFn = Callable[[Scenario, DrillResult], None]


def run_scenario(s: Scenario) -> DrillResult:
    if s.fault is None:
        return run_one(HEALTHY, s.seed, s.cfg, None, after_onset_s=HEALTHY_AFTER_S, flap=s.flap)
    return run_one(s.incident, s.seed, s.cfg, s.fault, flap=s.flap)


def _cost(s: Scenario) -> float:
    """Rough relative run time, to start the big scenarios first."""
    return float(s.cfg.pods * (2.0 if s.fault is None else 1.0))


def run_scenarios(scenarios: Sequence[Scenario], workers: int | None = None,
                  progress: ProgressFn | None = None) -> list[DrillResult]:
    """Results in scenario order; scenarios run on `workers` processes (default: all cores)."""
    workers = max(1, workers or os.cpu_count() or 1)
    results: dict[int, DrillResult] = {}
    if workers == 1 or len(scenarios) <= 1:
        for s in scenarios:
            results[s.index] = r = run_scenario(s)
            if progress:
                progress(s, r)
    else:
        by_index = {s.index: s for s in scenarios}
        with ProcessPoolExecutor(max_workers=min(workers, len(scenarios))) as pool:
            futures = {pool.submit(run_scenario, s): s.index for s in sorted(scenarios, key=_cost, reverse=True)}
            for fut in as_completed(futures):
                idx = futures[fut]
                results[idx] = r = fut.result()
                if progress:
                    progress(by_index[idx], r)
    return [results[s.index] for s in scenarios]


# ---- scoring ---------------------------------------------------------------------------------------------

def quantile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def observed_false_hours(r: DrillResult) -> float:
    """Simulated hours in which any page is false: the whole healthy run, or the time before onset."""
    if r.onset is None:
        return r.sim_seconds / 3600.0
    return min(r.onset, r.sim_seconds) / 3600.0


def _why_missed(r: DrillResult) -> str:
    """The injected runbook's failing check, as the diagnosis reported it in its ruled-out list."""
    for item in r.diagnosis.get("ruled_out", []):
        if item.get("incident") == r.incident:
            return str(item.get("why", ""))
    return ""


@dataclass
class SuiteReport:
    seed: int
    scenarios: list[Scenario]
    results: list[DrillResult]
    wall_seconds: float
    workers: int
    cpu_seconds: float | None = None
    shapes: bool = True
    confusion: dict[str, dict[str, int]] = field(init=False)

    def __post_init__(self) -> None:
        classes = self.classes()
        self.confusion = {a: dict.fromkeys(classes, 0) for a in classes}
        for r in self.results:
            self.confusion.setdefault(r.incident, dict.fromkeys(classes, 0))
            row = self.confusion[r.incident]
            row[r.diagnosed] = row.get(r.diagnosed, 0) + 1

    def classes(self) -> list[str]:
        seen = {r.incident for r in self.results} | {r.diagnosed for r in self.results}
        return [c for c in CLASSES if c in seen] + sorted(seen - set(CLASSES))

    @property
    def accuracy(self) -> float:
        return sum(r.correct for r in self.results) / len(self.results) if self.results else 0.0

    def mttd_intervals(self) -> list[float]:
        return [r.intervals_to_diagnosis for r in self.results
                if r.correct and r.onset is not None and r.intervals_to_diagnosis is not None]

    def mttd_seconds(self) -> list[float]:
        return [r.seconds_to_diagnosis for r in self.results
                if r.correct and r.onset is not None and r.seconds_to_diagnosis is not None]

    @property
    def false_pages(self) -> int:
        return sum(r.false_pages for r in self.results)

    @property
    def false_hours(self) -> float:
        return sum(observed_false_hours(r) for r in self.results)

    def per_class(self) -> dict[str, dict[str, float | int | None]]:
        out: dict[str, dict[str, float | int | None]] = {}
        for c in self.classes():
            support = sum(self.confusion.get(c, {}).values())
            predicted = sum(row.get(c, 0) for row in self.confusion.values())
            tp = self.confusion.get(c, {}).get(c, 0)
            precision = tp / predicted if predicted else None
            recall = tp / support if support else None
            f1 = (2 * precision * recall / (precision + recall)
                  if precision is not None and recall is not None and precision + recall > 0 else None)
            out[c] = {"support": support, "predicted": predicted, "precision": precision, "recall": recall,
                      "f1": f1}
        return out

    def failures(self) -> list[dict[str, Any]]:
        out = []
        for s, r in zip(self.scenarios, self.results, strict=True):
            if r.correct and not r.false_pages:
                continue
            d = r.diagnosis
            out.append({
                "index": s.index, "injected": r.incident, "diagnosed": r.diagnosed, "correct": r.correct,
                "false_pages": r.false_pages, "final": r.final, "seed": r.seed, "scenario": s.describe(),
                "summary": d.get("summary", ""), "why_missed": _why_missed(r) if r.diagnosed == HEALTHY else "",
                "evidence": list(r.evidence),
            })
        return out

    def answers(self) -> list[Answer]:
        return [Answer(r.stated_confidence or 0.0, r.correct, abstained=r.diagnosed == "unknown")
                for r in self.results]

    def by_shape(self) -> dict[str, dict[str, float | int]]:
        out: dict[str, dict[str, float | int]] = {}
        for s, r in zip(self.scenarios, self.results, strict=True):
            row = out.setdefault(s.shape or "first-suite", {"n": 0, "correct": 0})
            row["n"] += 1
            row["correct"] += int(r.correct)
        for row in out.values():
            row["accuracy"] = round(row["correct"] / row["n"], 4)
        return out

    def to_json(self) -> dict[str, Any]:
        iv = self.mttd_intervals()
        secs = self.mttd_seconds()
        hours = self.false_hours
        healthy = sum(1 for r in self.results if r.onset is None)
        return {
            "scenarios": len(self.results),
            "seed": self.seed,
            "accuracy": round(self.accuracy, 4),
            "correct": sum(r.correct for r in self.results),
            "mttd_median_intervals": _r(quantile(iv, 0.5)),
            "mttd_p95_intervals": _r(quantile(iv, 0.95)),
            "mttd_median_seconds": _r(quantile(secs, 0.5)),
            "mttd_p95_seconds": _r(quantile(secs, 0.95)),
            "false_pages_per_hour": round(self.false_pages / hours, 4) if hours > 0 else 0.0,
            "false_pages": self.false_pages,
            "false_page_runs": sum(1 for r in self.results if r.false_pages),
            "false_page_hours": round(hours, 3),
            "healthy_runs": healthy,
            "confusion": self.confusion,
            "per_class": {c: {k: _r(v) if isinstance(v, float) else v for k, v in row.items()}
                          for c, row in self.per_class().items()},
            "failures": self.failures(),
            "calibration": reliability(self.answers()),
            "brier": brier(self.answers()),
            "abstained": sum(1 for a in self.answers() if a.abstained),
            "early_warnings": sum(1 for r in self.results if r.early_warning),
            "warnings_before_onset": sum(r.warnings for r in self.results),
            "detected_unknown_first": sum(1 for r in self.results if r.detected_unknown),
            "by_shape": self.by_shape(),
            "shapes": self.shapes,
            "wall_seconds": round(self.wall_seconds, 2),
            "cpu_seconds": _r(self.cpu_seconds, 1),
            "workers": self.workers,
            "scenarios_per_minute": round(60.0 * len(self.results) / self.wall_seconds, 2)
            if self.wall_seconds > 0 else None,
        }


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def run_suite(n: int, seed: int, workers: int | None = None, progress: ProgressFn | None = None,
              shapes: bool = True) -> SuiteReport:
    """``shapes=False``: the first suite's scenarios only (what the diagnosis was first tuned on), to compare."""
    scenarios = generate(n, seed, shapes)
    workers = max(1, workers or os.cpu_count() or 1)
    start = time.perf_counter()
    cpu0 = _cpu_seconds()
    results = run_scenarios(scenarios, workers, progress)
    report = SuiteReport(seed, scenarios, results, time.perf_counter() - start, workers, shapes=shapes)
    report.cpu_seconds = _cpu_seconds() - cpu0
    return report


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the worker pool), user + system."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


# ---- rendering -------------------------------------------------------------------------------------------

ABBREV = {"kv-capacity": "kv", "engine-hang": "hang", "prefix-cache-drop": "prefix", "retry-storm": "retry",
          "bad-model-rollout": "rollout", "gpu-ecc": "ecc", "cuda-graph-crash": "cuda", "long-context-starvation":
          "longctx", "pod-outlier": "outlier", "healthy": "healthy"}


def _fmt(v: float | None, spec: str = ".2f") -> str:
    return "–" if v is None else format(v, spec)


def confusion_table(report: SuiteReport) -> FirstFit:
    """The confusion matrix where it fits; in a narrow terminal the same numbers one row per injected class: how
    many, how many right, recall, precision and what the others were diagnosed as (the off-diagonal cells)."""
    return FirstFit(confusion_matrix(report), confusion_rows(report))


def confusion_matrix(report: SuiteReport) -> FitTable:
    classes = report.classes()
    per = report.per_class()
    cm = FitTable(Column("injected \\ diagnosed", no_wrap=True),
                  *[Column(ABBREV.get(c, c), justify="right", no_wrap=True) for c in classes],
                  Column("recall", justify="right", no_wrap=True),
                  title="Confusion matrix (rows: injected, columns: diagnosed)")
    for a in classes:
        row = report.confusion.get(a, {})
        if not sum(row.values()):
            continue
        cells = []
        for c in classes:
            n = row.get(c, 0)
            cells.append(Text(str(n), style="green" if a == c else ("bold red" if n else "dim")))
        recall = per[a]["recall"]
        cm.add_row(a, *cells, _fmt(recall if isinstance(recall, float) else None, ".0%"))
    prec = [_fmt(p if isinstance(p := per[c]["precision"], float) else None, ".0%") for c in classes]
    cm.add_row(Text("precision", style="italic"), *prec, "")
    return cm


def confusion_rows(report: SuiteReport) -> FitTable:
    per = report.per_class()
    t = FitTable(Column("injected", no_wrap=True), Column("right", justify="right", no_wrap=True),
                 Column("recall", justify="right", no_wrap=True), Column("precision", justify="right", no_wrap=True,
                                                                         priority=2),
                 Column("diagnosed instead", min_width=24, priority=1),
                 title="Confusion (rows: injected; precision: of the diagnoses of that class)")
    for a in report.classes():
        row = report.confusion.get(a, {})
        total = sum(row.values())
        if not total:
            continue
        recall = per[a]["recall"]
        precision = per[a]["precision"]
        wrong = ", ".join(f"{c} {n}" for c, n in sorted(row.items(), key=lambda kv: (-kv[1], kv[0]))
                          if c != a and n)
        t.add_row(a, f"{row.get(a, 0)}/{total}", _fmt(recall if isinstance(recall, float) else None, ".0%"),
                  _fmt(precision if isinstance(precision, float) else None, ".0%"),
                  Text(wrong or "–", style="bold red" if wrong else "dim"))
    return t


def render_suite(report: SuiteReport, console: Console) -> None:
    data = report.to_json()
    summary = FitTable(Column("score", min_width=24), Column("value", justify="right", min_width=16),
                       Column("goal", no_wrap=True, priority=1),
                       title=f"Drill suite: {data['scenarios']} scenarios, seed {report.seed}", show_header=False)
    summary.add_row("top-1 accuracy", f"{data['accuracy']:.1%} ({data['correct']}/{data['scenarios']})", "≥ 99 %")
    summary.add_row("MTTD median (scrape intervals from symptom)", _fmt(data["mttd_median_intervals"]), "≤ 1")
    summary.add_row("MTTD p95 (scrape intervals from symptom)", _fmt(data["mttd_p95_intervals"]), "≤ 2")
    summary.add_row("MTTD median / p95 (seconds from onset)",
                    f"{_fmt(data['mttd_median_seconds'], '.0f')} / {_fmt(data['mttd_p95_seconds'], '.0f')}", "")
    summary.add_row("false pages per simulated hour",
                    f"{data['false_pages_per_hour']:.2f} ({data['false_pages']} in {data['false_page_hours']:.2f} h, "
                    f"{data['false_page_runs']} runs)", "0")
    cpu = f", {data['cpu_seconds']:.0f} CPU s" if data["cpu_seconds"] is not None else ""
    summary.add_row("wall time", f"{data['wall_seconds']:.0f} s on {report.workers} workers{cpu} "
                    f"({data['scenarios_per_minute']} scenarios/min)", "")
    console.print(summary)
    console.print(confusion_table(report))

    fails = data["failures"]
    if not fails:
        console.print("[green]No failures.[/green]")
        return
    console.print(f"[bold]Failures and false pages ({len(fails)})[/bold]")
    for f in fails:
        mark = "[green]✓[/green]" if f["correct"] else "[bold red]✗[/bold red]"
        fp = f", {f['false_pages']} false page(s) before onset" if f["false_pages"] and f["injected"] != HEALTHY \
            else (f", {f['false_pages']} paging scrape(s)" if f["false_pages"] else "")
        console.print(f"{mark} #{f['index']} {f['injected']} → {f['diagnosed']}{fp}  [dim]({f['scenario']}; "
                      f"seed {f['seed']})[/dim]", highlight=False)
        why = f["why_missed"] or f["summary"]
        if why:
            console.print(f"    {why[:400]}", highlight=False, markup=False)


def suite_cli(n: int, seed: int, workers: int | None, as_json: bool, console: Console, shapes: bool = True) -> None:
    if n <= 0:
        raise ValueError("--suite needs a positive number of scenarios")
    err = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[ok]}"),
                  TimeElapsedColumn(), console=err, transient=True, disable=as_json) as bar:
        task = bar.add_task("drill suite", total=n, ok="")
        tally = [0, 0]

        def tick(s: Scenario, r: DrillResult) -> None:
            tally[0] += 1
            tally[1] += int(r.correct)
            bar.update(task, advance=1, ok=f"{tally[1]}/{tally[0]} correct")

        report = run_suite(n, seed, workers, tick, shapes)
    if as_json:
        import json

        console.print_json(json.dumps(report.to_json()))
        return
    render_suite(report, console)


# ---- soak ------------------------------------------------------------------------------------------------

def parse_duration(text: str) -> float:
    """'24h', '90m', '3600s', '3600', '1.5d' → seconds (signals/duration.py), positive."""
    value = duration.parse_duration(text)
    if value <= 0:
        raise ValueError("duration must be positive")
    return value


SOAK_PODS = 4
SOAK_RATE_PER_POD = 5.0
SOAK_DEPLOY_EVERY_S = 4 * 3600.0


@dataclass(frozen=True)
class SoakPage:
    t: float
    evaluations: int
    incident: str
    summary: str


@dataclass
class SoakSegment:
    start: float
    seconds: float
    evaluations: int = 0
    paging: int = 0
    deploys: int = 0
    scale_events: int = 0
    pages: list[SoakPage] = field(default_factory=list)


@dataclass
class SoakReport:
    seconds: float
    seed: int
    pods: int
    segments: list[SoakSegment]
    wall_seconds: float

    def to_json(self) -> dict[str, Any]:
        hours = self.seconds / 3600.0
        paging = sum(s.paging for s in self.segments)
        pages = [p for s in self.segments for p in s.pages]
        return {
            "sim_seconds": self.seconds, "sim_hours": hours, "seed": self.seed, "pods": self.pods,
            "segments": len(self.segments), "evaluations": sum(s.evaluations for s in self.segments),
            "deploys": sum(s.deploys for s in self.segments),
            "scale_events": sum(s.scale_events for s in self.segments),
            "false_pages": paging, "episodes": len(pages),
            "false_pages_per_hour": round(paging / hours, 4) if hours else 0.0,
            "episodes_per_hour": round(len(pages) / hours, 4) if hours else 0.0,
            "pages": [{"t": p.t, "evaluations": p.evaluations, "incident": p.incident, "summary": p.summary}
                      for p in pages],
            "wall_seconds": round(self.wall_seconds, 1),
        }


def soak_config(seed: int, start: float, pods: int = SOAK_PODS, rate: float = SOAK_RATE_PER_POD) -> FleetConfig:
    """A healthy fleet: ±30 % daily traffic cycle (phase = where in the day this segment starts), HPA on."""
    return FleetConfig(pods=pods, rate_per_pod=rate, dcgm_custom_csv=True, diurnal_amplitude=0.3,
                       diurnal_period_s=86_400.0, diurnal_phase_s=start,
                       hpa=HpaConfig(enabled=True, min_replicas=max(2, pods - 1), max_replicas=2 * pods,
                                     target_value=35.0))


_SOAK_QUEUE: Any = None


def _soak_init(queue: Any) -> None:
    global _SOAK_QUEUE
    _SOAK_QUEUE = queue


def run_soak_segment(seed: int, start: float, seconds: float, pods: int = SOAK_PODS,
                     report_every: int = 40) -> SoakSegment:
    """One continuous healthy run of `seconds`, as if it began `start` seconds into the day."""
    rng = random.Random(f"soak:{seed}:{start}")  # noqa: S311 - simulation, not crypto
    fleet = Fleet(soak_config(seed, start, pods), seed=seed * 1000 + int(start) % 997)
    deploy_at = rng.uniform(0.3, 1.0) * SOAK_DEPLOY_EVERY_S
    seg = SoakSegment(start, seconds)

    def deploy(t: float) -> None:
        lifecycle.start_rollout(fleet, fleet.new_revision(), t, kind="deploy")

    while deploy_at < seconds:
        fleet.schedule(deploy_at, deploy)
        seg.deploys += 1
        deploy_at += SOAK_DEPLOY_EVERY_S * rng.uniform(0.8, 1.2)
    source = SimSource(fleet, INTERVAL_S)
    pilot = Autopilot(interval_s=INTERVAL_S)
    open_page: list[Any] = []  # [t, count, incident, summary] of the current paging episode
    while fleet.now < seconds - 1e-9:
        pilot.observe(source.collect())
        d = pilot.step()
        seg.evaluations += 1
        if d.pages:
            seg.paging += 1
            if open_page and open_page[2] == d.incident:
                open_page[1] += 1
            else:
                if open_page:
                    seg.pages.append(SoakPage(start + open_page[0], open_page[1], open_page[2], open_page[3]))
                open_page = [fleet.now, 1, d.incident, d.summary]
        elif open_page:
            seg.pages.append(SoakPage(start + open_page[0], open_page[1], open_page[2], open_page[3]))
            open_page = []
        if _SOAK_QUEUE is not None and seg.evaluations % report_every == 0:
            _SOAK_QUEUE.put(report_every * INTERVAL_S)
    if open_page:
        seg.pages.append(SoakPage(start + open_page[0], open_page[1], open_page[2], open_page[3]))
    seg.scale_events = fleet.event_counts["scale"]
    return seg


def run_soak(seconds: float, seed: int, workers: int | None = None, pods: int = SOAK_PODS,
             progress: Callable[[float], None] | None = None) -> SoakReport:
    """Split the soak into one segment per core (each covers its own part of the day) and run them in parallel."""
    workers = max(1, workers or os.cpu_count() or 1)
    n = max(1, min(workers, math.ceil(seconds / 3600.0)))
    length = seconds / n
    starts = [i * length for i in range(n)]
    begin = time.perf_counter()
    if n == 1:
        seg = run_soak_segment(seed, 0.0, seconds, pods)
        if progress:
            progress(seconds)
        return SoakReport(seconds, seed, pods, [seg], time.perf_counter() - begin)
    ctx = multiprocessing.get_context()
    queue = ctx.Queue()
    done = 0.0
    with ProcessPoolExecutor(max_workers=n, initializer=_soak_init, initargs=(queue,)) as pool:
        futures = [pool.submit(run_soak_segment, seed, s, length, pods) for s in starts]
        while not all(f.done() for f in futures):
            try:
                done += queue.get(timeout=0.5)
            except Empty:
                continue
            if progress:
                progress(min(done, seconds))
        segments = [f.result() for f in futures]
    if progress:
        progress(seconds)
    return SoakReport(seconds, seed, pods, segments, time.perf_counter() - begin)


def soak_cli(duration: str, seed: int, as_json: bool, console: Console) -> None:
    seconds = parse_duration(duration)
    err = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[sim]}"),
                  TimeElapsedColumn(), console=err, transient=True, disable=as_json) as bar:
        task = bar.add_task("soak", total=seconds, sim="")

        def tick(done: float) -> None:
            bar.update(task, completed=done, sim=f"{done / 3600.0:.1f} h simulated")

        report = run_soak(seconds, seed, progress=tick)
    if as_json:
        import json

        console.print_json(json.dumps(report.to_json()))
        return
    _render_soak(report, console)


def _render_soak(report: SoakReport, console: Console) -> None:
    d = report.to_json()
    console.print(f"Soak: {d['sim_hours']:.1f} simulated hours, {d['pods']} pods (diurnal traffic, HPA, "
                  f"{d['deploys']} routine deploys), autopilot every {INTERVAL_S:.0f} s; "
                  f"wall {d['wall_seconds']:.0f} s")
    style = "green" if not d["false_pages"] else "bold red"
    console.print(f"[{style}]false pages: {d['false_pages']} paging evaluations in {d['episodes']} episode(s) "
                  f"= {d['false_pages_per_hour']:.2f}/hour[/{style}]")
    if not d["pages"]:
        return
    t = FitTable(Column("from (sim h)", justify="right", no_wrap=True), Column("scrapes", justify="right", no_wrap=True,
                                                                           priority=2),
                 Column("diagnosed as", no_wrap=True), Column("summary", min_width=30, priority=1),
                 title="False pages (episodes)")
    for p in d["pages"]:
        t.add_row(f"{p['t'] / 3600.0:.2f}", str(p["evaluations"]), p["incident"], p["summary"][:300])
    console.print(t)
