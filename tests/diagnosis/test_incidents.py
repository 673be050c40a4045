"""Each incident, driven through the simulator's telemetry only, gets its runbook — and not a look-alike."""

from __future__ import annotations

import pytest

from llm_oncall.drills.runner import run_one
from llm_oncall.sim import scenario

pytestmark = pytest.mark.xdist_group("sim-incidents")

# incident -> (signals that must appear in the evidence, whether the scope must name the truth pods)
EXPECT: dict[str, tuple[set[str], bool]] = {
    "kv-capacity": ({"kv_max", "arrival_rate_ratio"}, False),
    "engine-hang": ({"n_stalled"}, True),
    "prefix-cache-drop": ({"hit_rate", "waiting_per_pod"}, False),
    "retry-storm": ({"arrival_rate_ratio", "success_ratio"}, False),
    "bad-model-rollout": ({"bad_rev_quality"}, True),
    "gpu-ecc": ({"n_ecc_gpus"}, True),
    "cuda-graph-crash": ({"n_crashloop", "log_cuda_graph_crash"}, True),
    "long-context-starvation": ({"kv_max", "prompt_shift"}, False),
    "pod-outlier": ({"n_outliers"}, True),
}


@pytest.mark.parametrize("incident", sorted(EXPECT))
def test_incident_is_diagnosed_with_evidence_and_scope(incident: str) -> None:
    result = run_one(incident, seed=3)
    assert result.diagnosed == incident, result.diagnosis.get("summary")
    assert result.false_pages == 0
    assert result.seconds_to_diagnosis is not None and result.seconds_to_diagnosis <= 240
    diagnosis = result.diagnosis
    signals = {e["signal"] for e in diagnosis["evidence"]}
    must, scoped = EXPECT[incident]
    assert must <= signals, signals
    for e in diagnosis["evidence"]:
        assert e["source"], e
    if scoped:
        assert set(result.truth_pods) & set(diagnosis["scope"]["pods"]), (result.truth_pods, diagnosis["scope"])
    ruled = {r["incident"] for r in diagnosis["ruled_out"]}
    assert ruled, "a diagnosis says which look-alikes it ruled out"
    assert incident not in ruled
    assert diagnosis["emergency_actions"] and diagnosis["long_term"]


def test_healthy_fleet_with_confounders_does_not_page() -> None:
    for seed in (1, 2):
        result = run_one("healthy", seed=seed)
        assert result.correct and result.false_pages == 0, result.diagnosis.get("summary")


def test_frozen_engine_under_load_is_a_hang_not_kv_capacity() -> None:
    cfg, fault = scenario("engine-hang", 5, rate_per_pod=9.0)
    result = run_one("engine-hang", 5, cfg, fault)
    assert result.diagnosed == "engine-hang"
    ruled = {r["incident"]: r["why"] for r in result.diagnosis["ruled_out"]}
    assert "kv-capacity" in ruled


def test_idle_fleet_is_healthy() -> None:
    cfg, _ = scenario("healthy", 4, rate_per_pod=0.02, diurnal_amplitude=0.0, spikes=(), routine_deploy_at=None)
    result = run_one("healthy", 4, cfg, None)
    assert result.correct, result.diagnosis.get("summary")
