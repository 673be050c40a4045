"""coordination.k8s.io/v1 Leases on the simulator's Kubernetes API as a kube-apiserver answers them: create, get,
list, conditional update (409 on a stale resourceVersion, 422 without one), validation, the canonical MicroTime
form, the audit log — through lightkube and kubectl, objects checked against the real schemas."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.sim.test_kube_api import kubectl

from llm_oncall.sim import Fleet, FleetConfig
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

NS = "llm"
BASE = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[KubeApiServer, Path]]:
    server = KubeApiServer(KubeCluster(Fleet(FleetConfig(pods=2), seed=1))).start()
    try:
        yield server, server.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        server.stop()


def lease(name: str = "llm-oncall", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-12-01T10:00:00.5Z",
                     "acquireTime": "2026-12-01T10:00:00Z", "leaseTransitions": 0, **spec}}


def test_create_get_list_and_conditional_update(api: tuple[KubeApiServer, Path]) -> None:
    server, _ = api
    c = httpx.Client(base_url=server.url)
    r = c.post(BASE, json=lease())
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["spec"]["renewTime"] == "2026-12-01T10:00:00.500000Z"  # MicroTime as the apiserver stores it
    assert made["spec"]["acquireTime"] == "2026-12-01T10:00:00.000000Z"
    assert c.post(BASE, json=lease()).json()["reason"] == "AlreadyExists"
    got = c.get(f"{BASE}/llm-oncall").json()
    assert got["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    names = [i["metadata"]["name"] for i in c.get(BASE).json()["items"]]
    assert names == ["llm-oncall"]
    all_ns = [i["metadata"]["namespace"] for i in c.get("/apis/coordination.k8s.io/v1/leases").json()["items"]]
    assert "kube-node-lease" in all_ns and NS in all_ns
    got["spec"]["holderIdentity"] = "b"
    r = c.put(f"{BASE}/llm-oncall", json=got)
    assert r.status_code == 200 and r.json()["metadata"]["resourceVersion"] != got["metadata"]["resourceVersion"]
    r = c.put(f"{BASE}/llm-oncall", json=got)  # the same resourceVersion again: stale
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    del got["metadata"]["resourceVersion"]
    r = c.put(f"{BASE}/llm-oncall", json=got)
    assert r.status_code == 422 and "must be specified for an update" in r.json()["message"]
    assert c.put(f"{BASE}/nobody", json=lease("nobody") | {"metadata": {"name": "nobody",
                                                                          "resourceVersion": "1"}}).status_code == 404
    verbs = [(e["verb"], e["responseStatus"]["code"]) for e in server.audit
             if (e.get("objectRef") or {}).get("resource") == "leases"]
    assert verbs == [("create", 201), ("create", 409), ("get", 200), ("list", 200), ("list", 200),
                     ("update", 200), ("update", 409), ("update", 422), ("update", 404)]
    audit = c.get("/_sim/audit").json()
    assert audit["apiVersion"] == "audit.k8s.io/v1" and len(audit["items"]) == len(server.audit)


@pytest.mark.parametrize(("spec", "code", "why"), [
    ({"leaseDurationSeconds": 0}, 422, "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"),
    ({"leaseTransitions": -1}, 422, "must be greater than or equal to 0"),
    ({"renewTime": "yesterday"}, 400, 'parsing time "yesterday"'),
    ({"leaseDurationSeconds": "15"}, 400, "cannot unmarshal str"),
    ({"preferredHolder": "b"}, 422, "may only be specified if `strategy` is defined"),
    ({"strategy": "Newest"}, 422, "Unsupported value"),
])
def test_invalid_leases_are_refused_as_the_apiserver_does(api: tuple[KubeApiServer, Path], spec: dict[str, Any],
                                                          code: int, why: str) -> None:
    server, _ = api
    r = httpx.post(f"{server.url}{BASE}", json=lease(**spec))
    assert r.status_code == code and why in r.json()["message"], r.text
    assert ("leases.coordination.k8s.io", NS, "llm-oncall") not in server.cluster.store


def test_leases_validate_against_the_schemas_and_kubectl_shows_the_holder(api: tuple[KubeApiServer, Path]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    server, kc = api
    assert httpx.post(f"{server.url}{BASE}", json=lease()).status_code == 201
    obj = server.cluster.store[("leases.coordination.k8s.io", NS, "llm-oncall")]
    kv.validate(obj, "1.33.0", strict=True)
    rows = kubectl(kc, "get", "lease", "llm-oncall", "-o", "json")
    assert json.loads(rows)["spec"]["holderIdentity"] == "a"
    assert "llm-oncall" in kubectl(kc, "get", "leases") and " a " in kubectl(kc, "get", "leases")
