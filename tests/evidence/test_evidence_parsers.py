"""Parser-level cases that the sample files do not cover."""

from __future__ import annotations

from llm_oncall.evidence import crashloop, dcgm_health, matcher, nccl, nvidia_smi, pyspy, stats
from llm_oncall.evidence.model import Finding, strongest


def signatures(text: str) -> Finding | None:
    """The catalogue's strongest finding (Xid lines, vLLM/SGLang log lines are signatures now)."""
    return strongest(matcher.findings(text, "t"))


def test_nccl_old_pytorch_format_without_numel() -> None:
    text = (
        "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before "
        "timing out.\n"
    )
    f = nccl.parse(text, "t")
    assert f is not None and f.kind == "nccl_watchdog_timeout"
    assert f.facts["timeout_ms"] == 1800000 and f.facts["seq_nums"] == [469508]


def test_nccl_unrelated_text_is_none() -> None:
    assert nccl.parse("all good\n", "t") is None


def test_pyspy_two_dumps_of_the_same_thread_raise_confidence() -> None:
    dump = (
        "Process 77: python3 worker.py\nPython v3.11.7 (/usr/bin/python3)\n\n"
        'Thread 77 (idle): "MainThread"\n'
        "    ncclAllReduce (libnccl.so.2)\n"
        "    all_reduce (torch/distributed/distributed_c10d.py:2050)\n"
    )
    one = pyspy.parse(dump, "d")
    two = pyspy.parse(dump + "\n" + dump, "d")
    assert one is not None and two is not None
    assert one.confidence == 0.5
    assert two.facts["repeated_in_same_frame"] is True and two.confidence == 0.75
    assert two.facts["collectives"] == ["ncclAllReduce"]


def test_pyspy_busy_forward_is_benign() -> None:
    dump = 'Thread 9 (active+gil): "MainThread"\n    forward (vllm/model_executor/models/llama.py:191)\n'
    f = pyspy.parse(dump, "d")
    assert f is not None and f.kind == "pyspy_busy" and f.benign


def test_nvsmi_truncated_xml_does_not_raise() -> None:
    text = '<nvidia_smi_log><gpu id="00000000:18:00.0"><ecc_errors><volatile><dram_uncorrectable>2</dram_unc'
    f = nvidia_smi.parse(text, "x")
    assert f is None or f.kind in {"ecc_clean", "ecc_uncorrectable"}


def test_nvsmi_unbalanced_xml_still_reads_leaves() -> None:
    text = (
        '<nvidia_smi_log><gpu id="00000000:18:00.0"><remapped_rows><remapped_row_pending>Yes'
        "</remapped_row_pending><stray></remapped_rows></gpu></nvidia_smi_log>"
    )
    f = nvidia_smi.parse(text, "x")
    assert f is not None and f.kind == "row_remap_pending"


def test_nvsmi_remap_failure_wins() -> None:
    text = (
        "GPU 00000000:18:00.0\n    Remapped Rows\n        Correctable Error                 : 0\n"
        "        Uncorrectable Error               : 12\n        Pending                           : No\n"
        "        Remapping Failure Occurred        : Yes\n"
    )
    f = nvidia_smi.parse(text, "x")
    assert f is not None and f.kind == "row_remap_failure" and f.incident_hint == "gpu-ecc"


def test_nvsmi_sram_threshold_exceeded() -> None:
    text = (
        "GPU 00000000:18:00.0\n    ECC Errors\n        Aggregate\n"
        "            SRAM Correctable              : 3\n"
        "            SRAM Threshold Exceeded       : Yes\n"
    )
    f = nvidia_smi.parse(text, "x")
    assert f is not None and f.kind == "ecc_correctable_storm"


def test_nvlink_small_counts_are_weak() -> None:
    text = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: Replay Errors: 3\n\t Link 0: CRC Errors: 0\n"
    f = nvidia_smi.parse(text, "n")
    assert f is not None and f.kind == "nvlink_errors" and f.confidence < 0.5


def test_xid_unlisted_code_and_old_format_without_pid() -> None:
    f = signatures("NVRM: Xid (PCI:0000:3b:00): 999, something new\n")
    assert f is not None and f.kind == "xid_999" and f.incident_hint is None and f.category == "unknown"
    g = signatures("kernel: NVRM: Xid (PCI:0000:3b:00): 95, Uncontained: FBHUB. RST: Yes, D-RST: No\n")
    assert g is not None and g.incident_hint == "gpu-ecc" and g.facts["worst"]["severity"] == "critical"


def test_xid_app_faults_plus_a_hardware_code_is_not_benign() -> None:
    text = (
        "NVRM: Xid (PCI:0000:65:00): 13, pid=1, name=python3, Graphics SM Warp Exception\n"
        "NVRM: Xid (PCI:0000:65:00): 92, pid=1, name=python3, High single-bit ECC error rate\n"
    )
    f = signatures(text)
    assert f is not None and not f.benign and f.incident_hint == "gpu-ecc"


def test_dcgm_xid_message() -> None:
    text = (
        "| Overall Health            | Failure                                                  |\n"
        "|       -> Driver           | Failure                                                  |\n"
        "|                           | Detected XID 79 for GPU 3                                |\n"
    )
    f = dcgm_health.parse(text, "d")
    assert f is not None and f.facts["xids"] == [79]


def test_vllm_capture_oom_suggests_memory_knobs() -> None:
    text = (
        "Capturing CUDA graph shapes:  10%|█         | 7/67 [00:01<00:10,  5.5it/s]\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    f = signatures(text)
    assert f is not None and f.kind == "cuda_graph_capture_error"
    assert "memory" in str(f.facts["error"]).lower() and "gpu-memory-utilization" in str(f.facts["fix"])


def test_vllm_error_after_capture_is_not_a_capture_error() -> None:
    text = (
        "Capturing CUDA graph shapes: 100%|██████████| 67/67 [00:14<00:00,  4.60it/s]\n"
        + "INFO routine\n" * 200
        + "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    f = signatures(text)
    assert f is None or f.kind != "cuda_graph_capture_error"


def test_vllm_kv_pressure_from_stats() -> None:
    line = (
        "INFO 10-02 11:40:12 [loggers.py:123] Engine 000: Avg prompt throughput: 900.0 tokens/s, "
        "Avg generation throughput: 400.0 tokens/s, Running: 250 reqs, Waiting: 40 reqs, "
        "GPU KV cache usage: 97.5%, Prefix cache hit rate: 12.0%\n"
    )
    f = stats.parse(line * 3, "v")
    assert f is not None and f.kind == "vllm_stats_kv_pressure" and f.incident_hint == "kv-capacity"


def test_crashloop_liveness_kill_and_segfault() -> None:
    text = (
        "    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    137\n"
        "  Warning  Unhealthy  1m (x3 over 2m)  kubelet  Liveness probe failed: HTTP probe failed\n"
    )
    f = crashloop.parse(text, "k")
    assert f is not None and f.kind == "liveness_killed" and f.incident_hint == "engine-hang"
    g = crashloop.parse("    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    139\n", "k")
    assert g is not None and g.kind == "container_exit" and "SIGSEGV" in g.facts["signals"][0]


def test_crashloop_completed_only_is_none() -> None:
    assert crashloop.parse("      Reason:       Completed\n      Exit Code:    0\n", "k") is None
