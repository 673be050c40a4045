from __future__ import annotations

import pytest

from llm_oncall.drills.generator import generate
from llm_oncall.drills.runner import DrillResult
from llm_oncall.drills.suite import SuiteReport, observed_false_hours, parse_duration, quantile


def _r(incident: str, diagnosed: str, *, onset: float | None = 300.0, intervals: float | None = 1.0,
       seconds: float | None = 20.0, false_pages: int = 0, sim: float = 400.0) -> DrillResult:
    correct = diagnosed == incident if onset is not None else false_pages == 0
    return DrillResult(incident=incident, diagnosed=diagnosed, correct=correct,
                       seconds_to_diagnosis=seconds if correct and onset is not None else None, onset=onset,
                       seed=1, intervals_to_diagnosis=intervals if correct and onset is not None else None,
                       false_pages=false_pages, sim_seconds=sim)


def _report(results: list[DrillResult]) -> SuiteReport:
    scenarios = generate(len(results), 1)
    return SuiteReport(1, scenarios, results, wall_seconds=10.0, workers=2)


def test_quantile_interpolates() -> None:
    assert quantile([], 0.5) is None
    assert quantile([3.0], 0.95) == 3.0
    assert quantile([0.0, 1.0, 2.0, 3.0], 0.5) == 1.5
    assert quantile([float(i) for i in range(21)], 0.95) == pytest.approx(19.0)


def test_parse_duration() -> None:
    assert parse_duration("24h") == 86_400
    assert parse_duration("90m") == 5_400
    assert parse_duration("3600s") == 3_600
    assert parse_duration("120") == 120
    assert parse_duration("1.5d") == 129_600
    for bad in ("", "h", "-3h", "3 weeks", "0s"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_scores_from_results() -> None:
    results = [
        _r("kv-capacity", "kv-capacity", intervals=0.0, seconds=15.0),
        _r("kv-capacity", "long-context-starvation"),
        _r("engine-hang", "engine-hang", intervals=2.0, seconds=45.0),
        _r("gpu-ecc", "healthy"),
        _r("healthy", "healthy", onset=None, sim=450.0),
        _r("healthy", "pod-outlier", onset=None, false_pages=3, sim=450.0),
        _r("retry-storm", "retry-storm", intervals=1.0, seconds=30.0, false_pages=2),
    ]
    rep = _report(results)
    data = rep.to_json()
    assert data["scenarios"] == 7
    assert data["accuracy"] == pytest.approx(4 / 7, abs=1e-4)
    assert data["correct"] == 4
    assert data["mttd_median_intervals"] == 1.0
    assert data["mttd_p95_intervals"] == pytest.approx(1.9)
    assert data["mttd_median_seconds"] == 30.0
    cm = data["confusion"]
    assert cm["kv-capacity"]["kv-capacity"] == 1 and cm["kv-capacity"]["long-context-starvation"] == 1
    assert cm["gpu-ecc"]["healthy"] == 1
    assert cm["healthy"]["pod-outlier"] == 1 and cm["healthy"]["healthy"] == 1
    assert sum(sum(row.values()) for row in cm.values()) == 7
    pc = data["per_class"]
    assert pc["kv-capacity"]["recall"] == 0.5 and pc["kv-capacity"]["precision"] == 1.0
    assert pc["healthy"]["precision"] == 0.5  # one healthy run + one missed gpu-ecc diagnosed healthy
    assert pc["long-context-starvation"]["precision"] == 0.0
    assert pc["long-context-starvation"]["recall"] is None  # never injected here
    # false pages: 3 in a healthy run + 2 before onset; hours = 2 healthy runs + 5 pre-onset stretches
    hours = (450 + 450 + 5 * 300) / 3600
    assert data["false_pages"] == 5
    assert data["false_page_hours"] == pytest.approx(hours, abs=1e-3)
    assert data["false_pages_per_hour"] == pytest.approx(5 / hours, rel=1e-3)
    assert data["false_page_runs"] == 2
    fails = {(f["injected"], f["diagnosed"]) for f in data["failures"]}
    assert fails == {("kv-capacity", "long-context-starvation"), ("gpu-ecc", "healthy"),
                     ("healthy", "pod-outlier"), ("retry-storm", "retry-storm")}


def test_false_hours_before_onset_only() -> None:
    assert observed_false_hours(_r("healthy", "healthy", onset=None, sim=3600.0)) == 1.0
    assert observed_false_hours(_r("kv-capacity", "kv-capacity", onset=1800.0, sim=2000.0)) == 0.5
