"""The simulator's autoscaling/v2 HorizontalPodAutoscaler and KEDA ScaledObject against real clients: kubectl
(discovery, the server-side table, describe, patch with --dry-run=server, 409 on a stale resourceVersion, 422 on
bounds the apiserver refuses), the Kubernetes schema (kubernetes-validate, strict), and the fleet's autoscaler
acting on what the object says."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.sim.test_kube_api import kubectl

from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster
from llm_oncall.sim.pods import TERMINATED

NS, DEP = "llm", "vllm-llama-8b"


def _start(tmp_path: Path, **hpa: object) -> tuple[Fleet, KubeApiServer, Path]:
    cfg, _ = scenario("kv-capacity", 5)
    if hpa:
        cfg = dataclasses.replace(cfg, hpa=dataclasses.replace(cfg.hpa, **hpa))
    fleet = Fleet(cfg, seed=5)
    fleet.advance(60.0)
    server = KubeApiServer(KubeCluster(fleet)).start()
    return fleet, server, server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[Fleet, KubeApiServer, Path]]:
    fleet, server, kc = _start(tmp_path)
    try:
        yield fleet, server, kc
    finally:
        server.stop()


def live(fleet: Fleet) -> int:
    return sum(1 for p in fleet.pods if p.state != TERMINATED)


def test_kubectl_discovers_lists_and_describes_the_hpa(api: tuple[Fleet, KubeApiServer, Path]) -> None:
    _, _, kc = api
    resources = kubectl(kc, "api-resources", "--api-group=autoscaling", "--no-headers").split()
    assert resources == ["horizontalpodautoscalers", "hpa", "autoscaling/v2", "true", "HorizontalPodAutoscaler"]
    header, row = kubectl(kc, "get", "hpa").splitlines()
    assert header.split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    cells = row.split()
    assert cells[:2] == [DEP, f"Deployment/{DEP}"] and cells[2].endswith("/40") and cells[3:6] == ["8", "16", "8"]
    described = kubectl(kc, "describe", "hpa", DEP)
    assert '"vllm_num_requests_running" on pods:' in described and "Min replicas:                           8" in \
        described
    assert "Type: Pods  Value: 1  Period: 300 seconds" in described and "ScalingActive   True" in described


def test_the_hpa_validates_against_the_kubernetes_schema(api: tuple[Fleet, KubeApiServer, Path]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    _, _, kc = api
    obj = json.loads(kubectl(kc, "get", "hpa", DEP, "-o", "json"))
    assert obj["apiVersion"] == "autoscaling/v2" and obj["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1", "kind": "Deployment", "name": DEP}
    kv.validate(obj, "1.33.0", strict=True)


def test_patch_dry_run_conflict_and_validation(api: tuple[Fleet, KubeApiServer, Path]) -> None:
    fleet, server, kc = api
    rv = kubectl(kc, "get", "hpa", DEP, "-o", "jsonpath={.metadata.resourceVersion}")
    out = kubectl(kc, "patch", "hpa", DEP, "--type=merge", "-p", '{"spec":{"minReplicas":11}}', "--dry-run=server",
                  "-o", "jsonpath={.spec.minReplicas}")
    assert out == "11" and fleet.hpa.min_replicas == 8
    assert kubectl(kc, "get", "hpa", DEP, "-o", "jsonpath={.metadata.resourceVersion}") == rv
    url = f"{server.url}/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/{DEP}"
    merge = {"Content-Type": "application/merge-patch+json"}
    stale = httpx.patch(url, headers=merge, json={"metadata": {"resourceVersion": "1"}, "spec": {"minReplicas": 11}})
    assert stale.status_code == 409 and stale.json()["reason"] == "Conflict"
    bad = httpx.patch(url, headers=merge, json={"spec": {"minReplicas": 20}})
    assert bad.status_code == 422 and "must be greater than or equal to `minReplicas`" in bad.json()["message"]
    zero = httpx.patch(url, headers=merge, json={"spec": {"minReplicas": 0}})
    assert zero.status_code == 422
    other = httpx.patch(url, headers=merge, json={"spec": {"metrics": []}})
    assert other.status_code == 422 and "does not model" in other.json()["message"]
    assert fleet.hpa.min_replicas == 8 and server.cluster.writes == 0
    kubectl(kc, "patch", "hpa", DEP, "-p", '{"spec":{"minReplicas":11}}')  # strategic merge, as kubectl sends
    got = json.loads(kubectl(kc, "get", "hpa", DEP, "-o", "json"))
    assert got["spec"]["minReplicas"] == 11 and got["metadata"]["generation"] == 2
    assert int(got["metadata"]["resourceVersion"]) > int(rv)


def test_the_autoscaler_acts_on_the_object(api: tuple[Fleet, KubeApiServer, Path]) -> None:
    fleet, _, kc = api
    kubectl(kc, "scale", f"deploy/{DEP}", "--replicas=11")  # behind the HPA's back
    assert live(fleet) == 11
    fleet.advance(fleet.now + 15.0)
    assert live(fleet) == 8  # the HPA's next sync takes it back to its recommendation
    kubectl(kc, "patch", "hpa", DEP, "--type=merge", "-p", '{"spec":{"minReplicas":11}}')
    replicas = []
    for _ in range(4):
        fleet.advance(fleet.now + 15.0)
        replicas.append(live(fleet))
    assert replicas == [11] * 4
    status = json.loads(kubectl(kc, "get", "hpa", DEP, "-o", "jsonpath={.status}"))
    assert status["currentReplicas"] == 11 and status["desiredReplicas"] == 11
    limited = next(c for c in status["conditions"] if c["type"] == "ScalingLimited")
    assert (limited["status"], limited["reason"]) == ("True", "TooFewReplicas")
    kubectl(kc, "patch", "hpa", DEP, "--type=merge", "-p", '{"spec":{"minReplicas":8,"maxReplicas":9}}')
    fleet.advance(fleet.now + 15.0)
    assert live(fleet) == 9  # above the new maximum: straight down to it


def test_scale_up_waits_out_its_stabilization_window_then_one_pod_per_period(tmp_path: Path) -> None:
    fleet, server, _ = _start(tmp_path)
    try:
        fleet.rate_factor *= 2.5  # load the HPA sees (running per pod ≫ 40) from t=60
        fleet.advance(60.0 + 590.0)
        assert live(fleet) == 8  # 600 s scale-up stabilization: not yet
        fleet.advance(60.0 + 620.0)
        assert live(fleet) == 9
        fleet.advance(60.0 + 890.0)
        assert live(fleet) == 9  # one pod per 300 s
        fleet.advance(60.0 + 935.0)
        assert live(fleet) == 10
    finally:
        server.stop()


def test_keda_owns_its_hpa_and_puts_a_direct_write_back(tmp_path: Path) -> None:
    fleet, server, kc = _start(tmp_path, keda=True)
    try:
        hpa = json.loads(kubectl(kc, "get", "hpa", f"keda-hpa-{DEP}", "-o", "json"))
        so = json.loads(kubectl(kc, "get", "scaledobjects.keda.sh", DEP, "-o", "json"))
        assert hpa["metadata"]["ownerReferences"] == [{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                                                       "name": DEP, "uid": so["metadata"]["uid"],
                                                       "controller": True, "blockOwnerDeletion": True}]
        assert hpa["metadata"]["labels"]["scaledobject.keda.sh/name"] == DEP
        # a write to KEDA's HPA lands, and KEDA's next reconcile puts the ScaledObject's bounds back
        kubectl(kc, "patch", "hpa", f"keda-hpa-{DEP}", "--type=merge", "-p", '{"spec":{"minReplicas":12}}')
        assert kubectl(kc, "get", "hpa", f"keda-hpa-{DEP}", "-o", "jsonpath={.spec.minReplicas}") == "12"
        fleet.advance(fleet.now + 15.0)
        assert kubectl(kc, "get", "hpa", f"keda-hpa-{DEP}", "-o", "jsonpath={.spec.minReplicas}") == "8"
        assert live(fleet) == 8
        # the ScaledObject is where the floor is changed (a custom resource: merge patch)
        kubectl(kc, "patch", "scaledobjects.keda.sh", DEP, "--type=merge", "-p", '{"spec":{"minReplicaCount":12}}')
        assert kubectl(kc, "get", "hpa", f"keda-hpa-{DEP}", "-o", "jsonpath={.spec.minReplicas}") == "12"
        fleet.advance(fleet.now + 15.0)
        assert live(fleet) == 12
        url = f"{server.url}/apis/keda.sh/v1alpha1/namespaces/{NS}/scaledobjects/{DEP}"
        bad = httpx.patch(url, headers={"Content-Type": "application/merge-patch+json"},
                          json={"spec": {"minReplicaCount": 30}})
        assert bad.status_code == 403 and "MinReplicaCount=30 must be less than MaxReplicaCount=16" in bad.text
    finally:
        server.stop()


def test_on_a_leaderworkerset_the_hpa_counts_groups(tmp_path: Path) -> None:
    cfg, _ = scenario("kv-capacity", 5, group_size=2)
    fleet = Fleet(cfg, seed=5)
    fleet.advance(30.0)
    server = KubeApiServer(KubeCluster(fleet)).start()
    try:
        kc = server.write_kubeconfig(tmp_path / "kubeconfig")
        spec = json.loads(kubectl(kc, "get", "hpa", DEP, "-o", "jsonpath={.spec}"))
        assert spec["scaleTargetRef"]["kind"] == "LeaderWorkerSet" and spec["minReplicas"] == 4
        kubectl(kc, "patch", "hpa", DEP, "--type=merge", "-p", '{"spec":{"minReplicas":5}}')
        fleet.advance(fleet.now + 15.0)
        assert live(fleet) == 10  # five groups of two
        assert kubectl(kc, "get", "lws", DEP, "-o", "jsonpath={.spec.replicas}") == "5"
    finally:
        server.stop()
