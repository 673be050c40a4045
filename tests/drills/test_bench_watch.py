"""`bench watch` is functional at a small size (its figures are measured by the command, never asserted here)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.drills import bench_watch


def test_bench_watch_json_has_the_design_keys_and_every_size_side_by_side() -> None:
    out = CliRunner().invoke(app, ["bench", "watch", "--pods", "25", "--rounds", "2", "--warmup", "2", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert {"pods", "interval_s", "round_seconds", "core_share", "ingest_only_core_share", "rounds"} <= set(data)
    assert data["pods"] == 25 and data["rounds"] == 2 and data["interval_s"] == 15.0
    assert [s["pods"] for s in data["scales"]] == [10, 25]
    for s in data["scales"]:
        assert s["round_seconds"] > 0 and s["core_share"] == s["round_seconds"] / 15.0
        assert s["diagnosis"] == "healthy"  # a healthy fleet at every size: the re-labelled pages stay coherent


def test_the_relabelled_fleet_has_unique_pods_nodes_and_groups() -> None:
    rec = bench_watch.record(1)
    targets = bench_watch._targets(rec[0], 25)
    assert len({t.name for t, _ in targets}) == 25
    assert len({t.labels["pod"] for t, _ in targets}) == 25
    assert len({t.labels["group"] for t, _ in targets}) == 25
    assert bench_watch.ladder(1000) == [10, 100, 1000] and bench_watch.ladder(5) == [5]


def test_bench_watch_prints_the_table() -> None:
    out = CliRunner().invoke(app, ["bench", "watch", "--pods", "12", "--rounds", "1", "--warmup", "1"])
    assert out.exit_code == 0, out.output
    assert "of one core at a 15 s interval" in out.output and "ingest alone" in out.output
