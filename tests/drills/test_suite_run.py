"""End-to-end: generated scenarios through the simulator and the autopilot, scored.

The accuracy gate runs a fixed suite (seed and size in accuracy_floor.json) and fails when
top-1 accuracy drops below the recorded floor.  Slow (about a minute on two idle cores), never skipped.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from llm_oncall.drills import bench_drill
from llm_oncall.drills.suite import run_soak, soak_cli, suite_cli

FLOOR_FILE = Path(__file__).with_name("accuracy_floor.json")
DESIGN_KEYS = {"scenarios": int, "accuracy": float, "mttd_median_intervals": (float, type(None)),
               "mttd_p95_intervals": (float, type(None)), "false_pages_per_hour": float, "confusion": dict,
               "per_class": dict, "failures": list, "wall_seconds": float, "calibration": list,
               "brier": (float, type(None)), "abstained": int, "by_shape": dict}

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("drill-suite")]


def _floor() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FLOOR_FILE.read_text())
    return data


@pytest.fixture(scope="module")
def gate() -> dict[str, Any]:
    floor = _floor()
    buf = io.StringIO()
    suite_cli(int(floor["scenarios"]), int(floor["seed"]), 2, True, Console(file=buf, color_system=None, width=200))
    out: dict[str, Any] = json.loads(buf.getvalue())
    return out


def test_floor_file_is_sane() -> None:
    floor = _floor()
    assert 0.5 <= floor["accuracy_floor"] < floor["measured_accuracy"] <= 1.0
    assert 24 <= floor["scenarios"] <= 40


def test_suite_json_has_design_keys(gate: dict[str, Any]) -> None:
    for key, kind in DESIGN_KEYS.items():
        assert key in gate, key
        assert isinstance(gate[key], kind), (key, gate[key])
    n = gate["scenarios"]
    assert n == _floor()["scenarios"]
    cm = gate["confusion"]
    assert sum(sum(row.values()) for row in cm.values()) == n
    assert "healthy" in cm and gate["healthy_runs"] >= n // 5
    assert gate["correct"] == round(gate["accuracy"] * n)
    for f in gate["failures"]:
        assert {"index", "injected", "diagnosed", "scenario", "summary"} <= set(f)
    assert gate["false_pages_per_hour"] >= 0.0
    assert gate["false_page_hours"] > 0


def test_accuracy_gate(gate: dict[str, Any]) -> None:
    floor = _floor()
    wrong = [f"#{f['index']} {f['injected']}→{f['diagnosed']}" for f in gate["failures"] if not f["correct"]]
    assert gate["accuracy"] >= floor["accuracy_floor"], (
        f"accuracy {gate['accuracy']:.3f} fell below the floor {floor['accuracy_floor']:.3f} "
        f"(recorded {floor['measured_accuracy']:.3f}); wrong: {', '.join(wrong)}")
    if gate["mttd_p95_intervals"] is not None:
        assert gate["mttd_p95_intervals"] <= floor["mttd_p95_intervals_ceiling"]
    paged = [f"#{f['index']} {f['injected']}: {f['false_pages']}" for f in gate["failures"] if f["false_pages"]]
    assert gate["false_pages"] <= floor["false_pages_ceiling"], paged
    # Stated confidence is honest where there is enough to judge: within 10 points of the observed accuracy.
    for row in gate["calibration"]:
        if row["judged"]:
            assert abs(row["gap"]) <= 0.10, row


def test_short_soak_scores_every_page_as_false() -> None:
    rep = run_soak(1800.0, seed=3, workers=1)
    data = rep.to_json()
    assert data["sim_hours"] == 0.5 and data["evaluations"] == 120
    assert data["false_pages"] == sum(p["evaluations"] for p in data["pages"])
    assert data["false_pages_per_hour"] == pytest.approx(data["false_pages"] / 0.5)
    buf = io.StringIO()
    soak_cli("30m", 3, True, Console(file=buf, color_system=None, width=200))
    again = json.loads(buf.getvalue())
    assert again["false_pages"] == data["false_pages"]  # same seed, same soak
    assert again["segments"] == 1


def test_bench_drill_reports_both_passes() -> None:
    result = bench_drill.run(2, seed=1, workers=2)
    for key in ("scenarios_per_minute", "workers", "single_worker_scenarios_per_minute", "speedup"):
        assert key in result
    assert result["workers"] == 2
    assert result["scenarios_per_minute"] > 0 and result["single_worker_scenarios_per_minute"] > 0
    assert result["identical_results"] is True
