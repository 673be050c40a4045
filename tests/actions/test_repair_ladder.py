"""The GPU repair ladder: the rung comes from the Xid catalogue (each code's rung, the DCGM health classes), each
rung is its own action kinds with their own guard and verification, repeat offenders go to the last rung, and the
simulator runs the repair Jobs (nvidia-smi -r, a node reboot) as the real tools would behave."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_oncall.actions import ladder, repair
from llm_oncall.actions.guard import DRILL_POLICY, RepeatOffender, decide
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import ACTION_KINDS, Action, ActionTarget, Plan, UnsafeName
from llm_oncall.drills import act
from llm_oncall.evidence import repair as rungs
from llm_oncall.evidence.xid import RUNGS, catalog
from llm_oncall.incidents import IncidentStore
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.faults import GPU_ECC_VARIANTS
from llm_oncall.sim.kubeapi import KubeCluster
from llm_oncall.sim.kubeapi.model import BY_KIND
from llm_oncall.sim.pods import TERMINATED


# ---- the catalogue: one source of truth ------------------------------------------------------------------
def test_every_gpu_hardware_xid_has_a_rung_with_its_provenance() -> None:
    for code, e in catalog().items():
        if e.incident_hint == "gpu-ecc":
            assert e.rung in RUNGS and e.rung_from, code


def test_the_ladder_is_ordered_and_plans_known_action_kinds() -> None:
    lad = rungs.ladder()
    assert [r.id for r in lad.rungs] == list(RUNGS)
    for r in lad.rungs:
        assert set(r.actions) <= set(ACTION_KINDS), r
    assert lad.last == "replace_hardware"
    assert all(h.rung in RUNGS for h in lad.health.values())


@pytest.mark.parametrize(("codes", "health", "rung"), [
    ([94], ["ecc_dbe"], "restart_app"),  # contained: the DBE counter does not override the Xid's own reading
    ([48, 63], ["ecc_dbe", "row_remap_pending"], "reset_gpu"),
    ([48, 63, 79], [], "reboot_node"),  # the worst code decides
    ([], ["row_remap_pending"], "reset_gpu"),  # DCGM alone
    ([48], ["row_remap_failure"], "replace_hardware"),  # a failed remap escalates even with an Xid
    ([57], [], "replace_hardware"),
])
def test_the_rung_is_the_highest_the_evidence_asks_for(codes: list[int], health: list[str], rung: str) -> None:
    d = rungs.choose(codes, health)
    assert d is not None and d.rung == rung, d


def test_nothing_on_the_ladder_and_repeat_offenders() -> None:
    assert rungs.choose([13], []) is None  # an application Xid: not a GPU repair
    d = rungs.choose([94], [], repeat="node n: 3 incidents in 30 days")
    assert d is not None and d.rung == "replace_hardware" and "repeat offender" in d.why


# ---- names that reach a command ----------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["0; reboot", "../0", "-r", "GPU-zz", "0 1", "", "123"])
def test_gpu_ids_that_would_reach_nvidia_smi_are_validated(bad: str) -> None:
    with pytest.raises(UnsafeName):
        ladder.check_gpu(bad)


@given(st.text(max_size=60))
def test_a_validated_gpu_id_is_an_index_or_a_uuid(s: str) -> None:
    try:
        ok = ladder.check_gpu(s)
    except UnsafeName:
        return
    assert ok.isdigit() or (ok.startswith("GPU-") and len(ok) == 40)


# ---- repeat offenders from the store -----------------------------------------------------------------
def test_repeat_offender_counts_incidents_in_the_window() -> None:
    ledger = Ledger()
    day = 86_400.0
    now = 100 * day
    b = ladder.BadGpu("n1", "GPU-1", "0")
    policy = RepeatOffender(incidents=3, days=30)
    ledger.record_gpu_incident("n1", "GPU-1", "gpu-ecc@1", now - 40 * day, "reset_gpu")  # outside the window
    ledger.record_gpu_incident("n1", "GPU-1", "gpu-ecc@2", now - 10 * day, "reset_gpu")
    assert ladder._repeat(ledger, b, policy, "gpu-ecc@now", now) is None
    ledger.record_gpu_incident("n1", "GPU-2", "gpu-ecc@3", now - 5 * day, "reset_gpu")  # same node, other GPU
    why = ladder._repeat(ledger, b, policy, "gpu-ecc@now", now)
    assert why is not None and "node n1: 3" in why
    ledger.record_gpu_incident("n1", "GPU-1", "gpu-ecc@now", now, "reset_gpu")  # this incident is not counted twice
    assert len(ledger.gpu_incidents("n1", "GPU-1", now - 30 * day, exclude="gpu-ecc@now")) == 1


# ---- guards ------------------------------------------------------------------------------------------
def _action(kind: str, **params: Any) -> Action:
    target = ActionTarget(kind="Job", namespace="llm", name=f"{kind.replace('_', '-')}-x")
    return Action.model_validate({"id": f"a-{kind}", "kind": kind, "runbook_action": "gpu_repair", "target": target,
                                  "params": {"_incident_key": "gpu-ecc@1", **params}})


def test_one_reboot_per_window() -> None:
    ledger = Ledger(clock=lambda: 1000.0)
    plan = Plan(id="p", incident="gpu-ecc", incident_key="gpu-ecc@1", diagnosis={}, diagnosed_at=0, created_at=0,
                namespace="llm")
    a = _action("reboot_node", node="n1")
    assert decide(a, plan, "auto", DRILL_POLICY, ledger, 1000.0).allowed
    ledger.claim("k0", "a-0", "reboot_node", "Job/llm/node-reboot-n0")
    ledger.finish("k0", "executed", {})
    g = decide(a, plan, "auto", DRILL_POLICY, ledger, 1001.0)
    assert not g.allowed and "rebooted" in g.why


class FakeKube:
    def __init__(self, pods: dict[str, str], unschedulable: bool) -> None:
        self.pods, self.unschedulable = pods, unschedulable

    def get(self, kind: str, name: str, ns: str | None = None) -> dict[str, Any]:
        from llm_oncall.actions.kube import KubeError
        if kind == "Node":
            return {"metadata": {"name": name}, "spec": {"unschedulable": self.unschedulable},
                    "status": {"nodeInfo": {"bootID": "b0"}}}
        if kind == "Pod" and name in self.pods:
            return {"metadata": {"name": name, "uid": self.pods[name]}}
        raise KubeError(404, "NotFound", name, "get", "pods", ns or "")


def test_a_gpu_is_reset_only_on_a_cordoned_node_once_its_pods_are_gone() -> None:
    from llm_oncall.actions.model import Blocked
    a = _action("reset_gpu", node="n1", namespace="llm", pods=["p1"], gpu="0", image="i")
    a.precondition = {"uids": ["u1"]}
    with pytest.raises(Blocked, match="schedulable"):
        repair.ResetGpu().check(FakeKube({"p1": "u1"}, unschedulable=False), a)  # type: ignore[arg-type]
    with pytest.raises(Blocked, match="still in use by pod"):
        repair.ResetGpu().check(FakeKube({"p1": "u1"}, unschedulable=True), a)  # type: ignore[arg-type]
    repair.ResetGpu().check(FakeKube({"p1": "u2"}, unschedulable=True), a)  # type: ignore[arg-type]  # replaced
    repair.ResetGpu().check(FakeKube({}, unschedulable=True), a)  # type: ignore[arg-type]  # gone
    assert repair.ResetGpu().argv(a) == ["nvidia-smi", "-r", "-i", "0"]
    a.params["gpu"] = "0;reboot"
    with pytest.raises(UnsafeName):
        repair.ResetGpu().argv(a)


# ---- the simulator runs the repair Jobs --------------------------------------------------------------
def _job(node: str, argv: list[str], name: str = "j") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"template": {"spec": {
        "nodeName": node, "restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "command": argv}]}}}}


def _cluster(variant: str) -> tuple[Fleet, KubeCluster]:
    cfg, fault = scenario("gpu-ecc", 7, params={"variant": variant}, at=30.0)
    fleet = Fleet(cfg, seed=7, fault=fault)
    fleet.advance(60.0)
    return fleet, KubeCluster(fleet)


def _status(cluster: KubeCluster, name: str) -> dict[str, Any]:
    status: dict[str, Any] = cluster.get(BY_KIND["Job"], "llm", name)["status"]
    return status


def test_sim_gpu_reset_refused_in_use_then_clears_the_fault() -> None:
    fleet, cluster = _cluster("dbe")
    gpu = next(g for gs in fleet.gpus.values() for g in gs if g.fault)
    node = next(n for n, gs in fleet.gpus.items() if gpu in gs)
    ns = fleet.cfg.namespace
    cluster.create(BY_KIND["Job"], ns, _job(node, ["nvidia-smi", "-r", "-i", gpu.uuid], "r1"), False)
    st1 = _status(cluster, "r1")
    assert st1.get("failed") == 1 and "in use" in st1["conditions"][0]["message"]
    user = next(p for p in fleet.pods if gpu in p.gpus and p.state != TERMINATED)
    cluster.evict(ns, user.name, {}, False)  # not cordoned: its replacement takes the freed GPU again
    st2 = cluster.create(BY_KIND["Job"], ns, _job(node, ["nvidia-smi", "-r", "-i", gpu.uuid], "r1b"), False)
    assert st2["status"].get("failed") == 1
    fleet.cordoned.add(node)
    user = next(p for p in fleet.pods if gpu in p.gpus and p.state != TERMINATED)
    cluster.evict(ns, user.name, {}, False)
    cluster.create(BY_KIND["Job"], ns, _job(node, ["nvidia-smi", "-r", "-i", str(gpu.index)], "r2"), False)
    assert _status(cluster, "r2").get("succeeded") == 1
    assert gpu.fault == "" and gpu.remap_pending == 0 and gpu.dbe_vol == 0
    cluster.create(BY_KIND["Job"], ns, _job(node, ["sh", "-c", "nvidia-smi -r"], "r3"), False)
    assert _status(cluster, "r3").get("failed") == 1  # only the argv forms it knows, never a shell


def test_sim_gpu_off_the_bus_needs_a_reboot() -> None:
    fleet, cluster = _cluster("off_bus")
    gpu = next(g for gs in fleet.gpus.values() for g in gs if g.fault == "off_bus")
    node = next(n for n, gs in fleet.gpus.items() if gpu in gs)
    ns = fleet.cfg.namespace
    for p in [p for p in fleet.pods if p.node == node and p.state != TERMINATED]:
        cluster.evict(ns, p.name, {}, False)
    cluster.create(BY_KIND["Job"], ns, _job(node, ["nvidia-smi", "-r", "-i", "0"], "r1"), False)
    assert "GPU is lost" in _status(cluster, "r1")["conditions"][0]["message"]
    boot = cluster.get(BY_KIND["Node"], "", node)["status"]["nodeInfo"]["bootID"]
    cluster.create(BY_KIND["Job"], ns, _job(node, list(ladder.REBOOT_ARGV), "boot"), False)
    n = cluster.get(BY_KIND["Node"], "", node)
    ready = next(c for c in n["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "Unknown" and n["status"]["nodeInfo"]["bootID"] != boot
    assert not any(p.node == node and p.state != TERMINATED for p in fleet.pods)  # its pods went elsewhere
    fleet.advance(fleet.now + 120.0)
    n = cluster.get(BY_KIND["Node"], "", node)
    assert next(c for c in n["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    assert gpu.fault == "" and gpu.xid == 0


def test_an_unknown_variant_is_refused() -> None:
    cfg, fault = scenario("gpu-ecc", 7, params={"variant": "meltdown"})
    with pytest.raises(ValueError, match="variant"):
        Fleet(cfg, seed=7, fault=fault)


# ---- a drill per rung --------------------------------------------------------------------------------
RUNG_OF = {"contained": ("restart_app", ["restart_pod"]),
           "dbe": ("reset_gpu", ["cordon_node", "evict_pods", "reset_gpu"]),
           "off_bus": ("reboot_node", ["cordon_node", "evict_pods", "reboot_node"]),
           "repeat": ("replace_hardware", ["cordon_node", "evict_pods", "hardware_ticket"])}


@pytest.mark.slow
@pytest.mark.parametrize("variant", GPU_ECC_VARIANTS)
def test_a_drill_per_rung_picks_it_from_the_catalogue_and_verifies_it(variant: str, tmp_path: Path) -> None:
    r = act.run_act("gpu-ecc", seed=7, params={"variant": variant}, record=tmp_path / "record.db")
    assert r.drill.correct, r.drill.diagnosed
    rung, kinds = RUNG_OF[variant]
    assert [a["kind"] for a in r.actions] == kinds, r.actions
    assert all(a["status"] == "executed" for a in r.actions), r.actions
    assert all(a["rung"] == rung for a in r.actions)
    assert r.recovered, [a.get("verification") for a in r.actions]
    last = r.actions[-1]["verification"]
    assert last["verdict"] == "helped", last  # the rung's own check passed too (Job succeeded, node back, ticket)
    assert kinds[-1] in last["detail"]
    # what the cluster's GPU-health agent (NPD) set on the node was evidence too, read through the API
    assert any(e["signal"] == "evidence:node_condition_GPUXIDErrors" for e in r.drill.diagnosis["evidence"])
    # Resolved: a node whose GPU the rung made whole serves again; one awaiting new hardware stays cordoned.
    assert r.incident_id is not None
    store = IncidentStore(tmp_path / "record.db")
    given_back = [e["detail"] for e in store.timeline(r.incident_id)
                  if e["kind"] == "action" and e["detail"].get("kind") == "cordon_node"
                  and e["detail"].get("status") == "reverted"]
    if rung in ("reset_gpu", "reboot_node"):
        assert r.seconds_to_resolution is not None, r.to_json()
        assert len(given_back) == 1 and "back in service" in given_back[0]["result"], given_back
    else:
        assert given_back == [], given_back
