"""Golden output for what people read: the diagnosis report and the drill scoreboard.

At 80 and 160 columns; a missing golden fails. Regenerate after an intended change with:
UPDATE_GOLDEN=1 pytest tests/diagnosis/test_golden.py (and review the diff)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import RenderableType
from tests.cli.golden import WIDTHS, check, render

from llm_oncall.diagnosis.engine import Diagnosis, EvidenceItem, RuledOut
from llm_oncall.diagnosis.report import report
from llm_oncall.drills.runner import DrillResult
from llm_oncall.drills.scoreboard import scoreboard

GOLDEN = Path(__file__).parent / "golden"


def _render(renderable: RenderableType, width: int) -> str:
    return render(renderable, width)


def _check(name: str, text: str) -> None:
    check(GOLDEN / name, text)


DIAGNOSIS = Diagnosis(
    incident="kv-capacity",
    confidence=0.9,
    summary="KV-cache capacity exhausted: waiting queue 326 (40.8 per pod); KV-cache usage 100% (median pod 82%)",
    t=420.0,
    evidence=(
        EvidenceItem("waiting", 326.0, None, "sum(vllm:num_requests_waiting)", "waiting queue 326 (40.8 per pod)"),
        EvidenceItem("kv_max", 1.0, None, "max(vllm:kv_cache_usage_perc)", "KV-cache usage 100% (median pod 82%)"),
        EvidenceItem("arrival_rate_ratio", 1.93, 48.2, "sum(rate(gateway_requests_total[1m]))",
                     "arrivals ×1.9 vs baseline (93.1/s vs 48.2/s)"),
    ),
    ruled_out=(RuledOut("long-context-starvation", "prompt mix shifted with a flat rate — not met: `prompt_shift >= 3`"
                        " (prompt_shift=1.01)"),),
    emergency_actions=({"action": "scale_out", "params": {"replicas": "+2"}, "target": {},
                        "text": "Scale out by 2 replicas now, bypassing the HPA."},),
    long_term=({"tag": "automation", "text": "HPA on vllm:num_requests_waiting > 3 per pod."},),
    root_cause="Load surge: arrivals ×1.9 with an unchanged prompt mix exceed the fleet's KV capacity.",
    runbook="kv-capacity",
    title="KV-cache capacity exhausted",
    severity="page",
    extra={"symptoms": [{"signal": "ttft_p99", "value": 3.1, "baseline": 0.21, "slo": 2.0, "red": True},
                        {"signal": "itl_p99", "value": 0.031, "baseline": 0.03, "slo": None, "red": False}],
           "runner_up": {"incident": "long-context-starvation", "confidence": 0.1,
                         "separate_by": "prompt length ×1.0 vs baseline (not met: `prompt_shift >= 3`)"}},
)


@pytest.mark.parametrize("width", WIDTHS)
def test_report_golden(width: int) -> None:
    _check(f"report_kv_capacity.{width}.txt", _render(report(DIAGNOSIS), width))


def test_report_json_shape() -> None:
    body = DIAGNOSIS.to_json()
    assert set(body) >= {"incident", "confidence", "summary", "scope", "evidence", "ruled_out",
                         "emergency_actions", "long_term", "runbook"}
    assert set(body["scope"]) == {"pods", "nodes", "revision"}
    assert set(body["evidence"][0]) >= {"signal", "value", "baseline", "source"}


@pytest.mark.parametrize("width", WIDTHS)
def test_scoreboard_golden(width: int) -> None:
    results = [
        DrillResult("kv-capacity", "kv-capacity", True, 141.9, 278.1, 7, intervals_to_diagnosis=1.0,
                    evidence=("waiting queue 326 (40.8 per pod)", "KV-cache usage 100%")),
        DrillResult("engine-hang", "engine-hang", True, 36.9, 281.0, 7, intervals_to_diagnosis=0.0,
                    evidence=("2 pod(s) hold requests while the engine-step heartbeat is flat for 45s",)),
        DrillResult("gpu-ecc", "healthy", False, None, 300.0, 7, false_pages=1),
    ]
    _check(f"scoreboard.{width}.txt", _render(scoreboard(results, seed=7), width))
