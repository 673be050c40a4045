"""Failure paths through a real HTTP fault layer in the simulator's API (no mocks of lightkube): 409, 429 under a
PDB, 403 (which RBAC verb), 500/timeouts without duplicates, a target changed since the plan, a stale or resolved
diagnosis, names and label values that must not reach an API path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llm_oncall.actions import execute
from llm_oncall.actions.guard import DRILL_POLICY
from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, ActionTarget, Blocked, Plan, TargetChanged, UnsafeName, check_label_value
from llm_oncall.actions.run import Actuator
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

NS = "llm"
DEP = "vllm-llama-8b"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[KubeApiServer, Kube]]:
    cfg, fault = scenario("kv-capacity", 7, pods=4)
    fleet = Fleet(cfg, seed=7, fault=fault)
    fleet.advance(30.0)
    server = KubeApiServer(KubeCluster(fleet)).start()
    kube = Kube(server.write_kubeconfig(tmp_path / "kubeconfig"), timeout_s=1.0)
    try:
        yield server, kube
    finally:
        kube.close()
        server.stop()


def fault(server: KubeApiServer, **rule: Any) -> None:
    assert httpx.post(f"{server.url}/_sim/faults", json=rule).status_code == 200


def scale_action(replicas: int = 6, seen: int = 4) -> Action:
    return Action(id="a-1", kind="scale_out", target=ActionTarget(kind="Deployment", namespace=NS, name=DEP),
                  params={"replicas": replicas, "from": seen, "_incident_key": "kv-capacity@420"},
                  precondition={"replicas": seen})


def test_409_is_retried_with_a_fresh_read(env: tuple[KubeApiServer, Kube]) -> None:
    server, kube = env
    node = Action(id="a-2", kind="taint_node", target=ActionTarget(kind="Node", namespace="", name="gpu-node-00"),
                  params={"taint": {"key": "llm-oncall.io/x", "value": "true", "effect": "NoSchedule"}})
    fault(server, method="PATCH", path="/nodes/gpu-node-00", code=409, count=1)
    out = execute.run(kube, node, dry_run=False, sleep=lambda s: None)
    assert any(t["key"] == "llm-oncall.io/x" for t in out["taints"])
    patches = [c for m, p, c in server.faults.log if m == "PATCH" and p.endswith("/nodes/gpu-node-00")]
    assert patches == [409, 200]


def test_stale_resource_version_gets_409_from_the_server(env: tuple[KubeApiServer, Kube]) -> None:
    _, kube = env
    with pytest.raises(KubeError) as err:
        kube.patch("Node", "gpu-node-00", {"metadata": {"resourceVersion": "1"}, "spec": {"unschedulable": True}},
                   "merge")
    assert err.value.code == 409 and err.value.reason == "Conflict"


def test_429_from_a_pdb_backs_off_and_reports(env: tuple[KubeApiServer, Kube]) -> None:
    server, kube = env
    kube.create("PodDisruptionBudget", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                        "metadata": {"name": "vllm"},
                                        "spec": {"minAvailable": "100%", "selector": {"matchLabels": {"app": DEP}}}})
    pod = kube.list("Pod", NS)[0]
    a = Action(id="a-3", kind="evict_pods", target=ActionTarget(kind="Node", namespace=NS, name="gpu-node-00"),
               params={"pods": [pod["metadata"]["name"]]}, precondition={"uids": [pod["metadata"]["uid"]]})
    slept: list[float] = []
    with pytest.raises(Blocked, match="disruption budget"):
        execute.run(kube, a, dry_run=False, sleep=slept.append)
    assert slept == [0.5, 1.0, 2.0]  # exponential back-off between the 4 attempts
    assert len(server.cluster.fleet.targets()) == 4  # nothing evicted


def test_403_names_the_missing_rbac_verb(env: tuple[KubeApiServer, Kube]) -> None:
    server, kube = env
    fault(server, method="PATCH", path="/deployments/", code=403, count=5)
    ledger = Ledger()
    actuator = Actuator(kube, ledger, DRILL_POLICY, mode="auto", sleep=lambda s: None)
    plan = Plan(id="p-1", incident="kv-capacity", incident_key="kv-capacity@420", diagnosis={}, diagnosed_at=0,
                created_at=0, namespace=NS, actions=[scale_action()])
    actuator.execute(plan)
    a = plan.actions[0]
    assert a.status == "failed"
    assert 'verbs=[patch] apiGroups=["apps"] resources=[deployments/scale] in namespace llm' in a.result


def test_500_after_the_write_landed_is_not_repeated(env: tuple[KubeApiServer, Kube]) -> None:
    server, kube = env
    fleet = server.cluster.fleet
    fault(server, method="PATCH", path="/deployments/vllm-llama-8b/scale", code=500, when="after", count=1)
    out = execute.run(kube, scale_action(6), dry_run=False, sleep=lambda s: None)
    assert out["landed"] is True
    assert len(fleet.targets()) == 6  # scaled once: the retry saw the change and did not add 2 more
    ledger = Ledger()
    assert ledger.claim("k", "a", "scale_out", "t") and not ledger.claim("k", "a", "scale_out", "t")


def test_timeout_after_the_write_is_not_repeated(env: tuple[KubeApiServer, Kube]) -> None:
    server, kube = env
    fault(server, method="PATCH", path="/deployments/vllm-llama-8b/scale", code=0, delay_s=1.5, when="after")
    out = execute.run(kube, scale_action(7), dry_run=False, sleep=lambda s: None)
    assert out["landed"] is True
    assert server.cluster.fleet.desired_replicas == 7


def test_target_changed_since_the_plan_is_refused(env: tuple[KubeApiServer, Kube]) -> None:
    server, kube = env
    kube.scale("Deployment", DEP, 5)  # someone else scaled after the plan saw 4
    with pytest.raises(TargetChanged):
        execute.run(kube, scale_action(6, seen=4), dry_run=False)
    assert server.cluster.fleet.desired_replicas == 5


def test_stale_or_resolved_diagnosis_is_refused(env: tuple[KubeApiServer, Kube]) -> None:
    server, kube = env
    actuator = Actuator(kube, Ledger(), DRILL_POLICY, mode="auto")
    plan = Plan(id="p-2", incident="kv-capacity", incident_key="kv-capacity@420", diagnosis={}, diagnosed_at=0,
                created_at=0, namespace=NS, actions=[scale_action()])
    actuator.execute(plan, diagnosis_age_s=600.0)  # stale, nothing to re-check with
    assert plan.actions[0].status == "blocked" and "stale" in plan.actions[0].result

    class Healthy:
        incident = "healthy"
    plan.actions[0].status = "planned"
    actuator.execute(plan, diagnosis_age_s=600.0, recheck=lambda: Healthy())  # type: ignore[arg-type,return-value]
    assert plan.actions[0].status == "blocked" and "resolved" in plan.actions[0].result
    assert server.cluster.fleet.desired_replicas == 4


@pytest.mark.parametrize("name", ["../x", "a/b", "x\ny", "Pod", "a b", ""])
def test_unsafe_names_never_reach_an_api_path(env: tuple[KubeApiServer, Kube], name: str) -> None:
    server, kube = env
    before = len(server.faults.log)
    with pytest.raises(UnsafeName):
        kube.get("Pod", name, NS)
    with pytest.raises((UnsafeName, ValueError)):
        ActionTarget(kind="Pod", namespace=NS, name=name)
    assert len(server.faults.log) == before  # no request was sent


def test_label_values_with_newlines_are_refused() -> None:
    with pytest.raises(UnsafeName):
        check_label_value("chat\nx-admin: true")
    assert check_label_value("web-chat") == "web-chat"
