"""Scripted trainees: a correct path through each incident, and wrong paths scored (a wrong diagnosis, an action
that hurts, hints). The autopilot comparison is one CLI run (test_cli_json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.sim import FAULTS
from llm_oncall.training.session import HINT_POINTS, Session, run_script

HUNG = "vllm-llama-8b-0"
OUTLIER = "vllm-llama-8b-ngq2cd9wf-cdrrd"

CORRECT: dict[str, list[str]] = {
    "kv-capacity": ["query sum by (pod) (vllm:num_requests_waiting)", "query max(vllm:kv_cache_usage_perc)",
                    "diagnose kv-capacity", "act scale_out +4", "act gateway_cap"],
    "engine-hang": ["query changes(vllm:iteration_tokens_total_count[1m]) == 0 and vllm:num_requests_running > 0",
                    f"run py-spy dump --pod {HUNG}", "diagnose engine-hang", "act restart_group"],
    "prefix-cache-drop": ["query rate(vllm:prefix_cache_hits_total[5m]) / rate(vllm:prefix_cache_queries_total[5m])",
                          "run kubectl get events -A", "diagnose prefix-cache-drop", "act rollback router-config"],
    "retry-storm": ["run kubectl get pods -o wide", "diagnose retry-storm", "act rate_limit"],
    "bad-model-rollout": ["run kubectl rollout history deployment/vllm-llama-8b", "diagnose bad-model-rollout",
                          "act rollback"],
    "gpu-ecc": ["run nvidia-smi -q -d ECC --node gpu-node-00", "run dmesg --level=err,warn --node gpu-node-00",
                "diagnose gpu-ecc", "act gpu_repair"],
    "cuda-graph-crash": ["run kubectl get pods", "diagnose cuda-graph-crash", "act set_flag"],
    "long-context-starvation": [
        "query histogram_quantile(0.99, sum by (le) (rate(vllm:request_prompt_tokens_bucket[5m])))",
        "diagnose long-context-starvation", "act route_by_length"],
    "pod-outlier": [
        "query histogram_quantile(0.99, sum by (pod, le) (rate(vllm:inter_token_latency_seconds_bucket[5m])))",
        f"diagnose pod-outlier {OUTLIER}", "act drain_pod"],
}
MITIGATED = {"engine-hang", "prefix-cache-drop", "bad-model-rollout", "gpu-ecc", "cuda-graph-crash",
             "long-context-starvation"}
"""kv-capacity: a human's +4 (the policy's step cap) one to two minutes after the page is not enough against ×2.2
arrivals within the run; pod-outlier: the drained pod's replacement is not verified within the run; retry-storm:
the gateway's rate limit protects the engines, but clients that retry at once keep users' requests failing until
the clients change (recovery is judged on the users, as for the autopilot, which does not recover it either)."""


def test_every_incident_has_a_correct_path() -> None:
    assert set(CORRECT) == set(FAULTS)


@pytest.mark.parametrize("incident", sorted(CORRECT))
def test_correct_path(incident: str) -> None:
    r = run_script(incident, 7, CORRECT[incident], autopilot=False)
    assert r.paged and r.page.startswith("[FIRING:")
    assert incident not in r.page  # the page names the symptom, never the diagnosis
    assert r.correct and r.diagnosed == incident
    assert r.seconds_to_diagnosis is not None and r.seconds_to_diagnosis > 0
    assert not r.harmful, r.harmful
    assert [s.status for s in r.steps if s.kind != "act"] == ["ok"] * sum(1 for s in r.steps if s.kind != "act")
    assert r.actions and r.actions[0]["status"] == "executed", r.actions
    assert r.seconds_to_first_action is not None and r.seconds_to_first_action > r.seconds_to_diagnosis
    if incident in MITIGATED:
        assert r.seconds_to_mitigation is not None and r.seconds_to_mitigation >= r.seconds_to_first_action
        assert r.score == 100
    # the commands' costs are what the timeline shows
    assert [s.t for s in r.steps] == sorted(s.t for s in r.steps)


def test_wrong_diagnosis_is_scored() -> None:
    r = run_script("gpu-ecc", 7, ["diagnose bad-model-rollout", "act rollback"], autopilot=False)
    assert r.diagnosed == "bad-model-rollout" and not r.correct
    assert r.actions[0]["status"] == "blocked"  # one revision only: no rollout to undo (the dry-run says so)
    assert not r.harmful and r.seconds_to_mitigation is None
    assert r.score == 100 - 40 - 20
    j = r.to_json()
    assert j["correct"] is False and j["harmful_actions"] == 0


def test_harmful_action_is_scored() -> None:
    r = run_script("engine-hang", 7, ["diagnose kv-capacity", "act scale_out +2", "hint", "hint"], autopilot=False)
    assert not r.correct and r.hints == 2
    assert len(r.harmful) == 1 and r.harmful[0]["runbook_action"] == "scale_out"
    assert "not an emergency fix of engine-hang" in r.harmful[0]["why"]
    assert r.score == max(0, 100 - 2 * HINT_POINTS - 25 - 40 - 20)
    assert "hint 1" in r.steps[2].output and "forward progress" in r.steps[2].output


def test_guard_and_usage_errors_cost_little() -> None:
    s = Session("gpu-ecc", 7)
    try:
        t0 = s.fleet.now
        st = s.do("run nvidia-smi -q --node no-such-node")
        assert st.status == "error" and "on which node" in st.output
        st = s.do("query rate(vllm:num_requests_waiting)")
        assert st.status == "error" and "range vector" in st.output
        st = s.do("act restart_everything")
        assert st.status == "error" and "no runbook has an action" in st.output
        assert s.fleet.now - t0 <= 10.0 + 10.0 + 10.0 + 15.0
        st = s.do("run dcgmi health -c --node gpu-node-00")
        assert st.status == "ok" and "Memory system" in st.output and s.flagged == ["gpu-node-00"]
        st = s.do("run kubectl describe pod vllm-llama-8b-ngq2cd9wf-2xcxx")
        assert st.status == "ok" and st.output.startswith("Name:")
        st = s.do("diagnose gpu-ecc gpu-node-00")
        assert "gpu-node-00" in st.output and s.scope == ["gpu-node-00"]
    finally:
        s.close()


def test_cli_json_and_report(tmp_path: Path) -> None:
    script = tmp_path / "s.txt"
    script.write_text("# a trainee\nrun nvidia-smi -q -d ECC --node gpu-node-00\ndiagnose gpu-ecc\nact gpu_repair\n")
    report = tmp_path / "report.md"
    res = CliRunner().invoke(app, ["train", "gpu-ecc", "--seed", "7", "--script", str(script), "--json",
                                   "--report", str(report)])
    assert res.exit_code == 0, res.output
    j = json.loads(res.output)
    for key in ("incident", "diagnosed", "correct", "seconds_to_diagnosis", "seconds_to_mitigation",
                "harmful_actions", "hints", "autopilot"):
        assert key in j
    assert set(j["autopilot"]) >= {"seconds_to_diagnosis", "seconds_to_mitigation"}
    assert j["incident"] == j["diagnosed"] == "gpu-ecc" and j["correct"] is True and j["hints"] == 0
    assert j["autopilot"]["seconds_to_diagnosis"] is not None
    assert j["autopilot"]["seconds_to_diagnosis"] <= j["seconds_to_diagnosis"]
    text = report.read_text()
    assert text.startswith("# On-call training: gpu-ecc (seed 7)") and "## What the autopilot did" in text


def test_cli_usage_errors(tmp_path: Path) -> None:
    assert CliRunner().invoke(app, ["train"]).exit_code == 2
    assert CliRunner().invoke(app, ["train", "no-such-incident"]).exit_code == 2
