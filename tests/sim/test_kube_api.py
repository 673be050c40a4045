"""The simulator's Kubernetes API against real clients: kubectl (get, scale, cordon, taint, rollout undo,
--dry-run=server) and the Kubernetes OpenAPI schemas (kubernetes-validate, strict: no invented fields)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster
from llm_oncall.sim.kubeapi.model import RESOURCES

KUBECTL = shutil.which("kubectl")
SDK_BIN = Path(os.path.realpath(KUBECTL)).parent if KUBECTL else Path("/nonexistent")
VERSIONS = [v for v in ("1.27", "1.30", "1.33") if (SDK_BIN / f"kubectl.{v}").exists()]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[KubeApiServer, Path]]:
    cfg, fault = scenario("kv-capacity", 7, pods=4)
    fleet = Fleet(cfg, seed=7, fault=fault)
    fleet.advance(30.0)
    server = KubeApiServer(KubeCluster(fleet)).start()
    try:
        yield server, server.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        server.stop()


def kubectl(kc: Path, *args: str, binary: str | None = None) -> str:
    exe = binary or KUBECTL
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is missing on a CI machine")
        pytest.skip("kubectl is not installed")
    out = subprocess.run([exe, "--kubeconfig", str(kc), "--cache-dir", str(kc.parent / "cache"), *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def rv(kc: Path, what: str) -> str:
    return kubectl(kc, "get", what, "-o", "jsonpath={.metadata.resourceVersion}")


def test_get_lists_the_fleet(api: tuple[KubeApiServer, Path]) -> None:
    server, kc = api
    pods = json.loads(kubectl(kc, "get", "pods", "-o", "json"))["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(server.cluster.fleet.targets())
    owner = pods[0]["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "ReplicaSet" and owner["controller"] is True
    assert kubectl(kc, "get", "nodes", "-o", "name").split() == ["node/gpu-node-00"]
    selected = kubectl(kc, "get", "pods", "-l", "app=vllm-llama-8b,pod-template-hash", "-o", "name").split()
    assert len(selected) == 4


def test_scale_dry_run_changes_nothing_then_scale_does(api: tuple[KubeApiServer, Path]) -> None:
    server, kc = api
    before = rv(kc, "deploy/vllm-llama-8b")
    assert "server dry run" in kubectl(kc, "scale", "deploy/vllm-llama-8b", "--replicas=6", "--dry-run=server")
    assert rv(kc, "deploy/vllm-llama-8b") == before
    assert len(server.cluster.fleet.targets()) == 4
    kubectl(kc, "scale", "deploy/vllm-llama-8b", "--replicas=6")
    assert len(server.cluster.fleet.targets()) == 6  # two new pods, loading the model
    assert kubectl(kc, "get", "deploy/vllm-llama-8b", "-o", "jsonpath={.spec.replicas}") == "6"


def test_cordon_and_taint_act_on_scheduling(api: tuple[KubeApiServer, Path]) -> None:
    server, kc = api
    fleet = server.cluster.fleet
    kubectl(kc, "cordon", "gpu-node-00")
    assert "gpu-node-00" in fleet.cordoned
    spec = json.loads(kubectl(kc, "get", "node", "gpu-node-00", "-o", "jsonpath={.spec}"))
    assert spec["unschedulable"] is True
    kubectl(kc, "taint", "node", "gpu-node-00", "nvidia.com/gpu-ecc=dbe:NoSchedule")
    taints = json.loads(kubectl(kc, "get", "node", "gpu-node-00", "-o", "jsonpath={.spec.taints}"))
    assert {"key": "nvidia.com/gpu-ecc", "value": "dbe", "effect": "NoSchedule"} in taints
    kubectl(kc, "scale", "deploy/vllm-llama-8b", "--replicas=5")
    new = [p for p in fleet.pods if p.state != "terminated" and p.node != "gpu-node-00"]
    assert len(new) == 1  # the new pod went to another node
    kubectl(kc, "uncordon", "gpu-node-00")
    assert "gpu-node-00" not in fleet.cordoned


@pytest.mark.parametrize("version", VERSIONS or ["default"])
def test_rollout_undo_goes_back_to_the_previous_replicaset(api: tuple[KubeApiServer, Path], version: str) -> None:
    server, kc = api
    binary = None if version == "default" else str(SDK_BIN / f"kubectl.{version}")
    kubectl(kc, "set", "image", "deploy/vllm-llama-8b", "vllm=vllm/vllm-openai:v0.33.0", binary=binary)
    fleet = server.cluster.fleet
    assert fleet.rollout is not None and fleet.rollout.new.vllm_version == "0.33.0"
    before = rv(kc, "deploy/vllm-llama-8b")
    assert "server dry run" in kubectl(kc, "rollout", "undo", "deploy/vllm-llama-8b", "--dry-run=server",
                                       binary=binary)
    assert rv(kc, "deploy/vllm-llama-8b") == before
    kubectl(kc, "rollout", "undo", "deploy/vllm-llama-8b", binary=binary)
    assert fleet.rollout is None
    assert {p.revision.vllm_version for p in fleet.pods if p.state != "terminated"} == {"0.32.0"}
    revs = json.loads(kubectl(kc, "get", "rs", "-o", "json", binary=binary))["items"]
    numbers = {r["spec"]["template"]["spec"]["containers"][0]["image"]:
               r["metadata"]["annotations"]["deployment.kubernetes.io/revision"] for r in revs}
    assert numbers == {"vllm/vllm-openai:v0.32.0": "3", "vllm/vllm-openai:v0.33.0": "2"}


def test_every_served_object_validates_against_the_kubernetes_schemas(api: tuple[KubeApiServer, Path]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    server, kc = api
    kubectl(kc, "cordon", "gpu-node-00")
    kubectl(kc, "set", "image", "deploy/vllm-llama-8b", "vllm=vllm/vllm-openai:v0.33.0")
    c = server.cluster
    c.sync(force=True)
    kinds = set()
    for (key, _, _), obj in c.store.items():
        rt = next(r for r in RESOURCES if r.key == key)
        if rt.crd:
            continue
        kv.validate(obj, "1.33.0", strict=True)
        kinds.add(obj["kind"])
    assert {"Pod", "Node", "Deployment", "ReplicaSet", "ConfigMap", "Namespace", "Lease", "Event"} <= kinds
