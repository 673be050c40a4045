"""Golden-prompt prober: finds the ECC pod, blames the bad revision, and speaks the metric names diagnosis reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.testkit import free_port, wait_for
from typer.testing import CliRunner

from llm_oncall.cli import probe as cli_probe
from llm_oncall.probe.golden import (
    GOLDEN_PROMPTS,
    GoldenProber,
    load_refs,
    majority_refs,
    probe_fleet,
    record_fleet,
    save_refs,
)
from llm_oncall.signals.exposition import parse
from llm_oncall.sim.serve import SimServer

from .conftest import fault_fleet


def by_pod(page: str, name: str) -> dict[tuple[str, str], float]:
    parsed = parse(page)
    return {(s.label("pod"), s.label("revision")): s.value for s in parsed.get(name)}


def test_gpu_ecc_mismatches_concentrate_on_the_truth_pod() -> None:
    fleet = fault_fleet("gpu-ecc", seed=7, at=60.0)
    fleet.advance(30.0)
    refs = record_fleet(fleet)
    assert set(refs[fleet.cfg.model_name]) == set(GOLDEN_PROMPTS)
    prober = GoldenProber(refs)
    fleet.advance(120.0)
    page = probe_fleet(fleet, prober, rounds=60)
    truth = fleet.ground_truth
    assert truth.incident == "gpu-ecc" and len(truth.pods) == 1
    mism = by_pod(page, "llm_oncall_probe_mismatches_total")
    reqs = by_pod(page, "llm_oncall_probe_requests_total")
    assert len(reqs) == fleet.cfg.pods and all(v == 60 * len(GOLDEN_PROMPTS) for v in reqs.values())
    per_pod: dict[str, float] = {}
    for (pod, _), v in mism.items():
        per_pod[pod] = per_pod.get(pod, 0.0) + v
    total = sum(per_pod.values())
    top = max(per_pod, key=lambda p: per_pod[p])
    assert total > 0 and top == truth.pods[0]
    assert per_pod[top] / total >= 0.9


def test_bad_model_rollout_mismatches_fall_on_the_new_revision() -> None:
    fleet = fault_fleet("bad-model-rollout", seed=4, at=60.0, model_load_s=10.0)
    fleet.advance(30.0)
    prober = GoldenProber(record_fleet(fleet))
    fleet.advance(120.0)  # the canary pods have loaded and serve
    page = probe_fleet(fleet, prober, rounds=3)
    truth = fleet.ground_truth
    assert truth.revision
    mism = by_pod(page, "llm_oncall_probe_mismatches_total")
    reqs = by_pod(page, "llm_oncall_probe_requests_total")
    bad = {k: v for k, v in mism.items() if v > 0}
    assert bad and {rev for _, rev in bad} == {truth.revision}
    assert {pod for pod, _ in bad} == {pod for pod, rev in reqs if rev == truth.revision}
    assert all(mism.get(k, 0.0) == 0.0 for k in reqs if k[1] != truth.revision)


def test_healthy_fleet_has_no_mismatches_and_hung_pods_count_as_errors() -> None:
    fleet = fault_fleet("engine-hang", seed=3, at=60.0)
    prober = GoldenProber(record_fleet(fleet))
    fleet.advance(90.0)
    page = probe_fleet(fleet, prober, rounds=2)
    assert all(v == 0 for v in by_pod(page, "llm_oncall_probe_mismatches_total").values())
    errors = {pod for (pod, _), v in by_pod(page, "llm_oncall_probe_errors_total").items() if v > 0}
    assert errors == set(fleet.ground_truth.pods)


def test_one_bad_pod_at_recording_time_does_not_poison_the_references() -> None:
    answers = [("m", "p", "right"), ("m", "p", "right "), ("m", "p", "wrong"), ("m", "q", "x")]
    assert majority_refs(answers) == {"m": {"p": "right", "q": "x"}}


def test_missing_reference_is_an_error_not_a_pass() -> None:
    prober = GoldenProber({"model-a": {"p": "x"}}, prompts=("p",))
    out = prober.judge("pod-1", "r1", "model-b", "p", "anything")
    assert out.error and out.match is None
    assert prober.totals()[("pod-1", "r1")] == (0.0, 0.0, 1.0)


def test_refs_file_round_trip_and_validation(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    save_refs(path, {"m": {"p": "a"}}, 24)
    assert load_refs(path) == ({"m": {"p": "a"}}, 24)
    for bad in ("{", "[]", '{"models": {"m": {"p": 3}}}', '{"models": {}, "max_tokens": 0}'):
        path.write_text(bad)
        with pytest.raises(ValueError):
            load_refs(path)


def test_cli_record_then_check_against_sim_serve(serve: Callable[..., SimServer], tmp_path: Path) -> None:
    fleet = fault_fleet("gpu-ecc", seed=2, at=2.0, pods=3, params={"wrong_rate": 0.4, "pod_index": 1})
    server = serve(fleet, speed=2.0)
    sd = tmp_path / "targets.json"
    sd.write_text(json.dumps(server.file_sd()))
    refs = tmp_path / "refs.json"
    runner = CliRunner()
    rec = runner.invoke(cli_probe.app, ["golden", "--file-sd", str(sd), "--refs", str(refs), "--record", "--json"])
    assert rec.exit_code == 0, rec.output
    assert json.loads(rec.stdout)["mode"] == "record" and refs.exists()
    wait_for(lambda: fleet.ground_truth.incident == "gpu-ecc", 60, "the gpu-ecc fault at t=2s (simulated)")
    chk = runner.invoke(cli_probe.app, ["golden", "--file-sd", str(sd), "--refs", str(refs), "--rounds", "3",
                                        "--interval", "0", "--json"])
    assert chk.exit_code == 0, chk.output
    out = json.loads(chk.stdout)
    assert out["mode"] == "check" and out["rounds"] == 3 and out["errors"] == 0
    bad = {r["pod"] for r in out["targets"] if r["mismatches"] > 0}
    assert bad == set(fleet.ground_truth.pods)
    # explicit targets and revision labels; an unreachable one is an error, not a crash
    pod, url = next(iter(server.pod_urls().items()))
    chk2 = runner.invoke(cli_probe.app, ["golden", "--target", f"{pod}={url}", "--revision-label", f"{pod}=r9",
                                         "--target", f"gone=http://127.0.0.1:{free_port()}", "--refs", str(refs),
                                         "--timeout", "30s", "--json"])
    assert chk2.exit_code == 0, chk2.output
    rows = {r["pod"]: r for r in json.loads(chk2.stdout)["targets"]}
    assert rows[pod]["revision"] == "r9" and rows[pod]["requests"] == len(GOLDEN_PROMPTS)
    assert rows["gone"]["errors"] == len(GOLDEN_PROMPTS)
    assert runner.invoke(cli_probe.app, ["golden", "--refs", str(refs)]).exit_code != 0
