"""What the trainee's commands print is what a real fleet would print: each output, read by the evidence parsers
(evidence/), says what the injected fault is — and a healthy node or pod reads as healthy."""

from __future__ import annotations

import pytest

from llm_oncall.evidence.classify import classify_text
from llm_oncall.sim import Fleet, nodecmd, scenario


def _fleet(incident: str, after_s: float = 120.0) -> Fleet:
    cfg, fault = scenario(incident, 7)
    f = Fleet(cfg, seed=7, fault=fault)
    f.advance((fault.at if fault is not None else 300.0) + after_s)
    return f


@pytest.fixture(scope="module")
def ecc() -> Fleet:
    return _fleet("gpu-ecc")


@pytest.fixture(scope="module")
def hang() -> Fleet:
    return _fleet("engine-hang")


@pytest.fixture(scope="module")
def healthy() -> Fleet:
    return _fleet("healthy", 60.0)


def test_nvidia_smi_ecc_on_the_faulty_gpu(ecc: Fleet) -> None:
    gt = ecc.ground_truth
    node = ecc.by_name[gt.pods[0]].node
    f = classify_text(nodecmd.nvidia_smi_q(ecc, node, "ECC,ROW_REMAPPER"), "nvidia-smi")
    assert not f.benign and f.incident_hint == "gpu-ecc"
    gpus = f.facts["gpus"]
    assert isinstance(gpus, list) and len(gpus) == 1  # one GPU, the faulty pod's
    bad = ecc.by_name[gt.pods[0]].gpus[0]
    assert gpus[0]["volatile_uncorrectable"] == bad.dbe_vol and gpus[0]["remap_pending"] is True


def test_dmesg_xid_on_the_faulty_node(ecc: Fleet) -> None:
    node = ecc.by_name[ecc.ground_truth.pods[0]].node
    f = classify_text(nodecmd.dmesg(ecc, node, ecc.kernel_logs.get(node, [])), "dmesg")
    assert f.incident_hint == "gpu-ecc" and "48" in f.facts["xids"]


def test_py_spy_of_a_hung_group_is_stuck_in_a_collective(hang: Fleet) -> None:
    f = classify_text(nodecmd.py_spy_dump(hang, hang.ground_truth.pods[0]), "py-spy")
    assert not f.benign and f.incident_hint == "engine-hang"
    assert f.facts["collectives"] == ["all_reduce"]


def test_nvlink_errors_of_a_hung_group(hang: Fleet) -> None:
    node = hang.by_name[hang.ground_truth.pods[0]].node
    f = classify_text(nodecmd.nvidia_smi_nvlink_errors(hang, node), "nvlink")
    assert f.incident_hint == "engine-hang" and int(f.facts["total"]) > 0


def test_crash_looping_pods_and_their_logs() -> None:
    f = _fleet("cuda-graph-crash")
    crashing = f.ground_truth.pods[0]
    got = classify_text(nodecmd.kubectl_get_pods(f, wide=True), "kubectl")
    assert not got.benign and got.facts["pods"] == {crashing: "CrashLoopBackOff"}
    logs = classify_text(nodecmd.kubectl_logs(f, crashing, f.by_name[crashing].logs), "logs")
    assert logs.incident_hint == "cuda-graph-crash"


def test_a_healthy_fleet_reads_healthy(healthy: Fleet) -> None:
    node, pod = healthy.nodes()[0], healthy.pods[0].name
    for text in (nodecmd.nvidia_smi_q(healthy, node), nodecmd.nvidia_smi_nvlink_errors(healthy, node),
                 nodecmd.dmesg(healthy, node, []), nodecmd.py_spy_dump(healthy, pod)):
        f = classify_text(text, "out")
        assert f.benign and f.incident_hint is None, (f.kind, text[:200])


def test_kubectl_tables(healthy: Fleet) -> None:
    assert nodecmd.kubectl_get_pods(healthy).splitlines()[0].split()[:5] == [
        "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert "REVISION" in nodecmd.kubectl_rollout_history(healthy)
    with pytest.raises(ValueError, match="NotFound"):
        nodecmd.py_spy_dump(healthy, "no-such-pod")
    with pytest.raises(ValueError, match="unknown display section"):
        nodecmd.nvidia_smi_q(healthy, healthy.nodes()[0], "CLOCKS")


def test_dcgmi_health(ecc: Fleet, hang: Fleet, healthy: Fleet) -> None:
    node = ecc.by_name[ecc.ground_truth.pods[0]].node
    text = nodecmd.dcgmi_health(ecc, node)
    assert {len(line) for line in text.splitlines()} == {88}  # the report's fixed-width table
    f = classify_text(text, "dcgmi")
    assert f.incident_hint == "gpu-ecc" and not f.benign
    hung_node = hang.by_name[hang.ground_truth.pods[0]].node
    assert classify_text(nodecmd.dcgmi_health(hang, hung_node), "dcgmi").incident_hint == "engine-hang"
    assert classify_text(nodecmd.dcgmi_health(healthy, healthy.nodes()[0]), "dcgmi").benign


def test_kubectl_describe_the_first_restart_of_a_retry_storm() -> None:
    f = _fleet("retry-storm", 60.0)
    first = f.ground_truth.pods[0]
    got = classify_text(nodecmd.kubectl_describe_pod(f, first), "describe")
    assert not got.benign and got.facts["reasons"] == {"OOMKilled": 1} and got.facts["exit_codes"] == {"137": 1}
