"""The training report's Markdown, golden: a fixed result (no simulation) renders to the file in golden/.
Regenerate with UPDATE_GOLDEN=1 after a deliberate change, and read the diff."""

from __future__ import annotations

import os
from pathlib import Path

from llm_oncall.training.report import render
from llm_oncall.training.session import Result, Step

GOLDEN = Path(__file__).parent / "golden" / "report_gpu_ecc.md"


def _result() -> Result:
    page = ("[FIRING:1] LLMServingSymptoms (namespace=llm, deployment=vllm-llama-8b, severity=page)\n"
            "  - alertname=VLLMTimeToFirstTokenHigh [warning]: TTFT p99 0.0785s (×1.56), baseline 0.0502s\n"
            "  users report: About 1% of answers are wrong (not garbage), intermittently, always from the same GPU.\n"
            "  startsAt: 2026-01-01T00:05:15Z")
    r = Result("gpu-ecc", 7, True, page, 289.4, diagnosed="gpu-ecc", scope=["gpu-node-00"],
               seconds_to_diagnosis=265.6, seconds_to_first_action=370.6, seconds_to_mitigation=385.6, hints=1)
    r.steps = [
        Step(25.6, "query sum by (node) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]))",
             '{node="gpu-node-00"}  1', 60.0, "query"),
        Step(85.6, "hint", "hint 1 (−10 points): ECC counters: `run nvidia-smi -q -d ECC` — …", 30.0, "hint"),
        Step(115.6, "run nvidia-smi -q -d ECC --node gpu-node-00", "\n==============NVSMI LOG==============", 120.0,
             "run"),
        Step(205.6, "act cordon_node", "error: no runbook has an action 'cordon_node'; actions: gpu_repair, …", 10.0,
             "act", "error"),
        Step(235.6, "diagnose gpu-ecc", "diagnosis recorded: gpu-ecc on gpu-node-00", 30.0, "diagnose"),
        Step(265.6, "act scale_out +2", "scale_out Deployment/llm/vllm-llama-8b: executed", 60.0, "act",
             "executed"),
        Step(340.6, "act cordon_node", "cordon_node Node/gpu-node-00: executed", 60.0, "act", "executed"),
    ]
    r.actions = [{"id": "a-1", "kind": "scale_out", "runbook_action": "scale_out",
                  "target": "Deployment/llm/vllm-llama-8b", "status": "executed", "verdict": None},
                 {"id": "a-2", "kind": "cordon_node", "runbook_action": "cordon_node", "target": "Node/gpu-node-00",
                  "status": "executed", "verdict": None}]
    r.harmful = [{**r.actions[0], "why": "scale_out is not an emergency fix of gpu-ecc"}]
    r.autopilot = {"diagnosed": "gpu-ecc", "seconds_to_diagnosis": 25.6, "seconds_to_mitigation": 40.6,
                   "seconds_to_first_action": 25.6,
                   "actions": [{"kind": "cordon_node", "runbook_action": "cordon_node", "target": "Node/gpu-node-00",
                                "status": "executed"},
                               {"kind": "evict_pods", "runbook_action": "drain_pod", "target": "Node/gpu-node-00",
                                "status": "executed"}]}
    return r


def test_report_golden() -> None:
    text = render(_result())
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_report_scores() -> None:
    r = _result()
    assert r.score == 100 - 10 - 25
    text = render(r)
    assert "| time to mitigation | 386 s | 41 s | +345 s |" in text
    assert "- scale_out Deployment/llm/vllm-llama-8b: scale_out is not an emergency fix of gpu-ecc" in text
    assert "- The autopilot also executed: drain_pod." in text
