"""Server-side printing: `kubectl get` asks for `application/json;as=Table;g=meta.k8s.io;v=v1` and prints the
columns the server sends, as from a real cluster (pkg/printers/internalversion)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.testkit import kubectl

from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster
from llm_oncall.sim.kubeapi.tables import human_duration, wants_table

KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
                  "g=meta.k8s.io,application/json")


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[KubeApiServer, Path]]:
    # a rollout to a build whose CUDA-graph capture fails: ready pods, a crash-looping one, two ReplicaSets
    cfg, fault = scenario("cuda-graph-crash", 7, pods=4, at=60.0)
    fleet = Fleet(cfg, seed=7, fault=fault)
    server = KubeApiServer(KubeCluster(fleet)).start()
    server.cluster.sync()
    fleet.advance(420.0)
    try:
        yield server, server.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        server.stop()


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_pods_print_ready_status_restarts_age(api: tuple[KubeApiServer, Path]) -> None:
    server, kc = api
    rows = _rows(kubectl(kc, "get", "pods"))
    assert rows[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    by_name = {r[0]: r for r in rows[1:]}
    assert sorted(by_name) == sorted(server.cluster.fleet.targets())
    statuses = {r[2] for r in rows[1:]}
    assert "Running" in statuses and statuses <= {"Running", "CrashLoopBackOff"}
    crashing = [r for r in rows[1:] if r[2] == "CrashLoopBackOff" or r[1] == "0/1"]
    assert crashing and all(int(r[3]) > 0 and r[4].startswith("(") and r[5] == "ago)" for r in crashing)  # 4 (98s ago)
    assert all(r[1] == "1/1" and r[3] == "0" for r in rows[1:] if r not in crashing)
    wide = _rows(kubectl(kc, "get", "pods", "-o", "wide"))
    assert " ".join(wide[0]).startswith("NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES")
    assert all("gpu-node-00" in r for r in wide[1:])


def test_nodes_and_workloads_print_like_a_cluster(api: tuple[KubeApiServer, Path]) -> None:
    _, kc = api
    nodes = _rows(kubectl(kc, "get", "nodes"))
    assert nodes == [["NAME", "STATUS", "ROLES", "AGE", "VERSION"], ["gpu-node-00", "Ready", "<none>", nodes[1][3],
                                                                      nodes[1][4]]]
    assert nodes[1][4].startswith("v1.")
    kubectl(kc, "cordon", "gpu-node-00")
    assert _rows(kubectl(kc, "get", "nodes"))[1][1] == "Ready,SchedulingDisabled"
    assert _rows(kubectl(kc, "get", "nodes", "-o", "wide"))[0][5:] == [
        "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    deploy = _rows(kubectl(kc, "get", "deployments"))
    assert deploy[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert deploy[1][:4] == ["vllm-llama-8b", "4/4", "1", "4"]
    rs = _rows(kubectl(kc, "get", "rs", "-o", "wide"))
    assert rs[0] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert len(rs) == 3 and all(r[7].startswith("app=vllm-llama-8b,pod-template-hash=") for r in rs[1:])
    assert _rows(kubectl(kc, "get", "cm"))[0] == ["NAME", "DATA", "AGE"]
    assert _rows(kubectl(kc, "get", "lease", "-A"))[0] == ["NAMESPACE", "NAME", "HOLDER", "AGE"]
    events = _rows(kubectl(kc, "get", "events"))
    assert events[0] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    route = _rows(kubectl(kc, "get", "httproutes"))
    assert route[0] == ["NAME", "AGE"] and not route[1][1].startswith("20")  # an age, not a timestamp


def test_table_on_the_wire(api: tuple[KubeApiServer, Path]) -> None:
    server, _ = api
    url = f"{server.url}/api/v1/namespaces/llm/pods"
    resp = httpx.get(url, headers={"Accept": KUBECTL_ACCEPT})
    assert resp.headers["content-type"] == "application/json;as=Table;v=v1;g=meta.k8s.io"
    table = resp.json()
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Ready", "Status", "Restarts", "Age"]
    row = table["rows"][0]
    assert len(row["cells"]) == len(table["columnDefinitions"])  # the server prints wide
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["namespace"] == "llm"
    assert "rows" in httpx.get(url + "?includeObject=None", headers={"Accept": KUBECTL_ACCEPT}).json()
    assert "object" not in httpx.get(url + "?includeObject=None", headers={"Accept": KUBECTL_ACCEPT}).json()[
        "rows"][0]
    full = httpx.get(url + "?includeObject=Object", headers={"Accept": KUBECTL_ACCEPT}).json()["rows"][0]["object"]
    assert full["kind"] == "Pod" and "spec" in full
    one = httpx.get(f"{url}/{row['cells'][0]}", headers={"Accept": KUBECTL_ACCEPT}).json()
    assert one["kind"] == "Table" and len(one["rows"]) == 1
    plain = httpx.get(url, headers={"Accept": "application/json"}).json()
    assert plain["kind"] == "PodList"
    assert json.loads(kubectl(api[1], "get", "pods", "-o", "json"))["kind"] == "List"


def test_helpers() -> None:
    assert wants_table(KUBECTL_ACCEPT) == "v1"
    assert wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io") == "v1beta1"
    assert wants_table("application/json") is None
    assert [human_duration(s) for s in (-5, 0, 59, 119, 120, 125, 599, 600, 3 * 3600 - 1, 3 * 3600, 7 * 3600 + 60,
                                        30 * 3600, 49 * 3600, 9 * 86400, 800 * 86400)] == [
        "<invalid>", "0s", "59s", "119s", "2m", "2m5s", "9m59s", "10m", "179m", "3h", "7h1m", "30h", "2d1h", "9d",
        "2y70d"]
