"""Node conditions and Warning Events set by node-problem-detector / GPU-health agents are evidence, read through
the Kubernetes API with lightkube; the simulator's API serves them (NPD's own condition and reason names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.evidence import nodeproblems
from llm_oncall.respond.nodeproblems import NodeProblemReader
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster


def _node(conds: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {"metadata": {"name": "n1"}, "status": {"conditions": [
        {"type": t, "status": s, "reason": "r", "message": m} for t, s, m in conds]}}


def test_problem_conditions_and_node_warning_events_become_findings() -> None:
    xid = "[1036800.1] NVRM: Xid (PCI:0000:9a:00): 48, pid=4242, name=python3, An uncorrectable double bit error"
    nodes = [_node([("KernelDeadlock", "False", "kernel has no deadlock"), ("GPUXIDErrors", "True", xid),
                    ("Ready", "True", "")])]
    ev = {"involvedObject": {"kind": "Node", "name": "n1"}, "type": "Warning", "reason": "TaskHung",
          "message": "task python3:77 blocked for more than 120 seconds.", "lastTimestamp": "2026-01-01T00:00:00Z"}
    old = {**ev, "lastTimestamp": "2025-12-01T00:00:00Z"}  # outside the window
    normal = {**ev, "type": "Normal", "reason": "NodeReady"}
    now = 1_767_225_660.0  # 2026-01-01T00:01:00Z
    found = {f.kind: f for f in nodeproblems.findings(nodes, [ev, old, normal], now)}
    assert set(found) == {"node_condition_GPUXIDErrors", "node_event_TaskHung", "xid_48"}, found
    assert found["node_condition_GPUXIDErrors"].incident_hint == "gpu-ecc"
    assert found["node_event_TaskHung"].incident_hint == "engine-hang"
    assert found["xid_48"].file == "node-problems:n1/messages"  # the Xid quoted by the agent, read by the catalogue
    assert all(f.file.startswith(nodeproblems.PREFIX) for f in found.values())


def test_the_names_are_the_agents_own() -> None:
    cat = nodeproblems.catalog()
    assert {"KernelDeadlock", "GPUXIDErrors", "GPUMissing"} <= set(cat.conditions)
    assert {"TaskHung", "KernelPanic", "OOMKilling"} <= set(cat.events)
    assert "node-problem-detector" in cat.source


def test_the_simulators_api_serves_them_and_lightkube_reads_them(tmp_path: Path) -> None:
    cfg, fault = scenario("gpu-ecc", 7, at=30.0, params={"variant": "off_bus"})
    fleet = Fleet(cfg, seed=7, fault=fault)
    fleet.advance(60.0)
    server = KubeApiServer(KubeCluster(fleet)).start()
    try:
        kube = Kube(server.write_kubeconfig(tmp_path / "kc"))
        reader = NodeProblemReader(kube)
        kinds = {f.kind for f in reader.read(cfg.epoch + fleet.now)}
        assert {"node_condition_GPUXIDErrors", "node_condition_GPUMissing", "node_event_GPUXIDErrors"} <= kinds
        assert any(k.startswith("xid_") for k in kinds)
        node = kube.list("Node")[0]
        conds = {c["type"]: c for c in node["status"]["conditions"]}
        assert conds["KernelDeadlock"]["reason"] == "KernelHasNoDeadlock"
        ev = kube.list("Event", "default")
        assert ev and ev[0]["source"]["component"] == "custom-plugin-monitor" and ev[0]["type"] == "Warning"
        # once the GPUs are healthy again and the agent's look-back has passed, nothing is reported
        for gs in fleet.gpus.values():
            for g in gs:
                g.xid, g.fault = 0, ""
        fleet.advance(fleet.now + 700.0)
        assert reader.read(cfg.epoch + fleet.now) == []
    finally:
        server.stop()


def test_an_api_that_refuses_costs_the_round_nothing() -> None:
    class Refusing:
        def list(self, kind: str, ns: str | None = None) -> list[dict[str, Any]]:
            raise KubeError(403, "Forbidden", "no", "list", "/events", ns or "")

    reader = NodeProblemReader(Refusing())  # type: ignore[arg-type]
    assert reader.read(0.0) == [] and reader.problem is not None and "missing RBAC" in reader.problem
