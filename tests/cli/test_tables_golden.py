"""Every table the CLI prints, at 80 and 160 columns (golden files), plus what makes them readable at 80: no column
squeezed under its readable width, the least important columns dropped or stacked below their row, and no row
taller than its content needs."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console
from tests.cli.golden import WIDTHS, assert_fits, check, render

from llm_oncall.cli.act import plan_table
from llm_oncall.cli.bench import evidence_table, watch_table
from llm_oncall.cli.evidence import render_table
from llm_oncall.cli.incidents import incidents_table
from llm_oncall.cli.runbooks import runbooks_table
from llm_oncall.drills.generator import generate
from llm_oncall.drills.runner import DrillResult
from llm_oncall.drills.scoreboard import act_scoreboard, scoreboard
from llm_oncall.drills.suite import SuiteReport, render_suite
from llm_oncall.evidence.model import Finding
from llm_oncall.signals.events import Event
from llm_oncall.signals.gpu import GpuSnapshot
from llm_oncall.signals.snapshot import FleetSnapshot, PodSnapshot, Snapshot
from llm_oncall.signals.view import snapshot_table
from llm_oncall.termtable import Column, FitTable

GOLDEN = Path(__file__).parent / "golden"

RESULTS = [
    DrillResult("kv-capacity", "kv-capacity", True, 141.9, 278.1, 7, intervals_to_diagnosis=1.0,
                evidence=("waiting queue 326 (40.8 per pod)", "KV-cache usage 100% (median pod 82%)")),
    DrillResult("long-context-starvation", "long-context-starvation", True, 36.9, 281.0, 7,
                intervals_to_diagnosis=0.0, evidence=("KV-cache usage 97% sustained; p99 prompt tokens ×11 with a "
                                                      "flat request rate",)),
    DrillResult("gpu-ecc", "healthy", False, None, 300.0, 7, false_pages=1),
]


def act_results() -> list[Any]:
    def one(r: DrillResult, actions: list[dict[str, Any]], rec: float | None, pm: str | None,
            manual: float | None = None) -> Any:
        return SimpleNamespace(drill=r, actions=actions, recovered=rec is not None, seconds_to_recovery=rec,
                               postmortem={"markdown": pm} if pm else None, manual_seconds_to_recovery=manual,
                               manual_decision_s=600.0)
    return [
        one(RESULTS[0], [{"kind": "scale_out", "target": "deployment/llm/vllm", "status": "executed",
                          "verification": {"verdict": "helped"}},
                         {"kind": "gateway_cap_max_tokens", "target": "configmap/llm/gateway", "status": "executed"}],
            212.0, "pm/kv-capacity/postmortem.md", 1272.0),
        one(RESULTS[1], [{"kind": "route_by_length", "target": "configmap/llm/gateway", "status": "blocked"}], None,
            "pm/long-context-starvation/postmortem.md"),
        one(RESULTS[2], [], None, None),
    ]


def suite_report() -> SuiteReport:
    def r(incident: str, diagnosed: str, seconds: float | None = None, intervals: float | None = None,
          onset: float | None = 300.0) -> DrillResult:
        return DrillResult(incident, diagnosed, diagnosed == incident, seconds, onset, 1,
                           intervals_to_diagnosis=intervals, sim_seconds=400.0)
    rs = [r("kv-capacity", "kv-capacity", 20.0, 1.0), r("kv-capacity", "long-context-starvation"),
          r("engine-hang", "engine-hang", 45.0, 2.0), r("gpu-ecc", "healthy"), r("healthy", "healthy", onset=None),
          r("retry-storm", "retry-storm", 30.0, 1.0)]
    return SuiteReport(1, generate(len(rs), 1), rs, wall_seconds=10.0, workers=2)


INCIDENTS = [
    {"id": "inc-20261201-120000-ab12", "status": "mitigating", "incident": "kv-capacity",
     "opened_at": "2026-12-01T12:00:00Z", "alerts": 2, "title": "KV-cache capacity exhausted"},
    {"id": "inc-20261130-080102-9f00", "status": "resolved", "incident": "long-context-starvation",
     "opened_at": "2026-11-30T08:01:02Z", "alerts": 0,
     "title": "Long prompts starve short chats: KV-cache usage 97% held by a few long requests"},
]

RUNBOOKS = [(10, "engine-hang", "Engine hang (NCCL)", "Everything stuck, no errors: requests present while the "
             "engine-step heartbeat and generated tokens are flat"),
            (20, "kv-capacity", "KV-cache capacity exhausted", "TTFT p99 ×10 (200 ms → 3 s), TPOT normal"),
            (30, "long-context-starvation", "Long-context starvation", "Short chat TTFT spikes while a few long "
             "prompts hold most of the KV cache")]

PLAN = {"id": "p-5841353109", "incident": "kv-capacity", "actions": [
    {"id": "a-9eecbbf2cb", "kind": "scale_out", "target": {"kind": "Deployment", "namespace": "llm", "name": "vllm"},
     "params": {"replicas": 6}, "dry_run": {"ok": True, "detail": None},
     "guard": {"allowed": True, "why": "propose mode: dry-run only"},
     "why": "waiting queue 326 with KV-cache usage 100%: two more replicas absorb the doubled arrivals"},
    {"id": "a-4eff51593d", "kind": "gateway_cap_max_tokens",
     "target": {"kind": "ConfigMap", "namespace": "llm", "name": "gateway-config"}, "params": {"max_tokens": 2048},
     "dry_run": {"ok": False, "detail": "configmaps \"gateway-config\" not found"},
     "guard": {"allowed": False, "why": "cooldown: gateway_cap_max_tokens on llm/gateway-config until 12:10:00"},
     "why": "cap max_tokens at the gateway"}],
    "manual": [{"action": "notify", "text": "Tell client owners their SDK default max_tokens is 8192."}]}

FINDINGS = [
    Finding("logs/rank3-nccl-watchdog.log", "nccl-timeout", False, "engine-hang", 0.93,
            facts={"collectives": "ALLREDUCE", "ranks": [0, 1, 2, 3], "timeout_s": 600}, lines=(12, 13, 14, 57),
            findings=(Finding("logs/rank3-nccl-watchdog.log", "python-traceback", False, None, 0.5, lines=(80,)),)),
    Finding("node/nvidia-smi-q.txt", "nvidia-smi-ecc", False, "gpu-ecc", 0.88,
            facts={"gpus": ["GPU 0000:3B:00.0"], "worst": {"code": 48, "meaning": "double-bit ECC error"}},
            lines=(201,)),
    Finding("startup.log", "vllm-startup", True, None, 0.7),
]

WATCH = [{"pods": n, "round_seconds": 0.012 * n / 10, "ingest_only_seconds": 0.004 * n / 10, "ms_per_pod": 1.21,
          "core_share": 0.0008 * n / 10, "ingest_only_core_share": 0.0003 * n / 10, "growth_last_over_first": 1.02,
          "telemetry_log_core_share": 0.0001, "diagnosis": "healthy"} for n in (10, 100, 1000)]


def snapshot() -> Snapshot:
    def pod(name: str, **kw: Any) -> PodSnapshot:
        base: dict[str, Any] = {"up": True, "running": 12, "waiting": 41, "kv_usage": 0.99, "preemptions_per_s": 0.8,
                                "requests_per_s": 11.6, "generation_tokens_per_s": 2210, "prefix_hit_rate": 0.62,
                                "ttft_p99": 3.1, "itl_p99": 0.031, "e2e_p99": 14.2, "prompt_len_p99": 1830}
        base.update(kw)
        return PodSnapshot(name, {}, **base)
    pods = (pod("vllm-7c9f-0"), pod("vllm-7c9f-1", waiting=38, restarts=1),
            pod("vllm-7c9f-2", up=False, error="connect timeout after 2.0 s (10.0.3.14:8000)", running=None,
                waiting=None, kv_usage=None))
    fleet = FleetSnapshot(3, 2, running=24, waiting=79, kv_usage_max=0.99, preemptions_per_s=1.6, requests_per_s=23.2,
                          generation_tokens_per_s=4420, prefix_hit_rate=0.62, ttft_p99=3.1, itl_p99=0.031,
                          e2e_p99=14.2, prompt_len_p99=1830, restarts=1)
    gpus = (GpuSnapshot("node-a", "0", None, "vllm-7c9f-0", util_percent=97, xid_last=0, ecc_sbe_increase=0,
                        ecc_dbe_increase=0, row_remap_pending=0, row_remap_failure=0, nvlink_crc_increase=0),)
    events = (Event(120, "deploy", "vllm 0.32.0 → 0.32.1 (canary 10%), image registry.example.com/vllm:0.32.1"),)
    return Snapshot(420.0, 60.0, pods, fleet, gpus, events)


class Tee:
    """render_suite prints to a console: capture it at a width."""

    def __init__(self, width: int) -> None:
        self.console = Console(width=width, record=True, color_system=None, force_terminal=False,
                               file=io.StringIO())


def suite_text(width: int) -> str:
    tee = Tee(width)
    render_suite(suite_report(), tee.console)
    return tee.console.export_text()


TABLES: dict[str, Any] = {
    "scoreboard": lambda: scoreboard(RESULTS, seed=7),
    "scoreboard_act": lambda: act_scoreboard(act_results()),
    "incidents_list": lambda: incidents_table(INCIDENTS),
    "runbooks_list": lambda: runbooks_table(RUNBOOKS),
    "act_plan": lambda: plan_table(PLAN),
    "evidence_classify": lambda: render_table(FINDINGS),
    "bench_watch": lambda: watch_table(WATCH, 15.0),
    "diagnose_snapshot": lambda: snapshot_table(snapshot()),
    "bench_evidence": lambda: evidence_table({"nccl-timeout": {"n": 12, "predicted": 11, "precision": 1.0,
                                                               "recall": 0.917},
                                              "benign": {"n": 40, "predicted": 41, "precision": 0.976,
                                                         "recall": 1.0}}),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_golden(name: str, width: int) -> None:
    check(GOLDEN / f"{name}.{width}.txt", render(TABLES[name](), width))


@pytest.mark.parametrize("width", WIDTHS)
def test_suite_golden(width: int) -> None:
    check(GOLDEN / f"drill_suite.{width}.txt", suite_text(width))


def test_scoreboard_at_80_keeps_evidence_readable() -> None:
    text = render(scoreboard(RESULTS, seed=7), 80)
    # the evidence is below its row, whole lines, not a 4-character column
    assert "   key evidence: waiting queue 326 (40.8 per pod); KV-cache usage 100% (median" in text
    assert "not shown at 80 columns: intervals" in text
    assert len(text.splitlines()) <= 12  # title, header, rule, 3 rows × (row + evidence + a wrapped line), note
    wide = render(scoreboard(RESULTS, seed=7), 160)
    assert "│ waiting queue 326 (40.8 per pod); KV-cache usage 100% (median pod 82%)" in wide  # one line at 160
    assert "intervals" in wide and "not shown" not in wide


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120, 160, 200])
@pytest.mark.parametrize("name", sorted(TABLES))
def test_no_line_wider_than_the_terminal(name: str, width: int) -> None:
    assert_fits(render(TABLES[name](), width), width, name)
    assert_fits(suite_text(width), width, "drill suite")


def test_confusion_matrix_where_it_fits_one_row_per_class_where_not() -> None:
    wide, narrow = suite_text(160), suite_text(80)
    assert "Confusion matrix (rows: injected, columns: diagnosed)" in wide and "diagnosed instead" not in wide
    assert "Confusion matrix" not in narrow
    assert "│ kv-capacity │   1/2 │    50% │      100% │ long-context-starvation 1 │" in narrow


def test_columns_are_dropped_and_stacked_by_priority() -> None:
    t = FitTable(Column("id", no_wrap=True), Column("a", no_wrap=True, priority=1),
                 Column("b", no_wrap=True, priority=2, stack=False), Column("note", min_width=20, priority=3))
    t.add_row("x" * 10, "y" * 20, "z" * 20, "w " * 30)
    console = Console(width=200)
    opts = console.options
    assert t.plan(console, opts, 200) == ([0, 1, 2, 3], [], [])
    assert t.plan(console, opts, 75) == ([0, 1, 2], [3], [])  # the least important first: stacked below
    assert t.plan(console, opts, 55) == ([0, 1], [3], [2])  # then one that may only be dropped
    assert t.plan(console, opts, 20) == ([0], [1, 3], [2])  # the first column always stays
    text = render(t, 55)
    assert "note: w w w" in text and "not shown at 55 columns: b" in text and "z" not in text


def test_an_empty_optional_column_takes_no_room() -> None:
    t = FitTable(Column("id", no_wrap=True), Column("essential"), Column("postmortem", priority=2))
    t.add_row("kv-capacity", "", "")
    t.add_row("gpu-ecc", "", "")
    text = render(t, 80)
    assert "essential" in text and "postmortem" not in text


def test_a_wrapping_column_is_never_squeezed() -> None:
    t = FitTable(Column("id", no_wrap=True), Column("evidence", min_width=30))
    t.add_row("kv-capacity", "waiting queue 326 (40.8 per pod); KV-cache usage 100% (median pod 82%)")
    text = render(t, 50)  # 11 + 30 + borders fit: evidence keeps ≥ 30 columns
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) <= 3 and all(len(line) <= 50 for line in rows)
