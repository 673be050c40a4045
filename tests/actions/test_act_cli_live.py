"""`act plan` and `act apply` against a live `llm-oncall sim serve --kube-api` (a real subprocess with a fault),
checked from the outside with kubectl: the plan names real objects and changes nothing; apply changes exactly
the planned fields of the planned objects; and `sim serve --kube-api` itself serves kubectl.

Everything waits on conditions (the API answering, the kubeconfig written, the simulated clock — read from the
node Lease the kubelet renews — past the onset); the timeouts are only a safety net.
"""

from __future__ import annotations

import calendar
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tests.testkit import free_port, http_ok, kubectl, stop_process, wait_for

CLI = [sys.executable, "-m", "llm_oncall.cli"]
EPOCH = 1_767_225_600  # the simulator's t=0 (2026-01-01T00:00:00Z)
HEARTBEATS = ("Node", "Lease")
"""Objects the kubelet rewrites on its own (node status heartbeat, node Lease renewTime): their resourceVersion
moves without any client; their spec must not."""


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    url: str
    kubeconfig: Path
    targets: Path
    log: Path


@contextmanager
def sim_serve(tmp: Path, *args: str) -> Iterator[Served]:
    """`sim serve --kube-api 127.0.0.1:PORT --kubeconfig-out FILE ARGS…`, ready; always stopped afterwards."""
    port = free_port()
    kc, targets, log = tmp / "kubeconfig", tmp / "targets.json", tmp / "serve.log"
    with targets.open("wb") as out, log.open("wb") as err:
        proc = subprocess.Popen([*CLI, "sim", "serve", "--base-port", "0", "--kube-api", f"127.0.0.1:{port}",
                                 "--kubeconfig-out", str(kc), *args], stdout=out, stderr=err)
    url = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"sim serve exited with {proc.returncode}: {log.read_text()[-2000:]}")
            return kc.exists() and _json(targets) is not None and http_ok(f"{url}/version")

        wait_for(up, 60, "sim serve: the Kubernetes API, the kubeconfig and the target list")
        yield Served(proc, url, kc, targets, log)
    finally:
        stop_process(proc, grace_s=15)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def virtual_now(kc: Path, node: str = "gpu-node-00") -> float:
    """The simulated clock as a cluster shows it: the node Lease's renewTime (renewed every 10 s)."""
    renew = kubectl(kc, "get", "lease", "-n", "kube-node-lease", node, "-o", "jsonpath={.spec.renewTime}")
    return calendar.timegm(time.strptime(renew.split(".")[0], "%Y-%m-%dT%H:%M:%S")) - EPOCH


def cluster(kc: Path) -> dict[str, dict[str, Any]]:
    """Every object of every listable resource kubectl discovers, by kind/namespace/name."""
    resources = kubectl(kc, "api-resources", "--verbs=list", "-o", "name").split()
    items = json.loads(kubectl(kc, "get", ",".join(resources), "--all-namespaces", "-o", "json"))["items"]
    return {f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o for o in items}


def content(obj: dict[str, Any]) -> dict[str, Any]:
    """What a client can change: everything but status and server-kept metadata (labels/annotations kept)."""
    out = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    meta = obj["metadata"]
    out["metadata"] = {k: meta.get(k) for k in ("labels", "annotations", "ownerReferences", "uid")}
    if obj["kind"] == "Lease":
        out["spec"] = {k: v for k, v in obj["spec"].items() if k != "renewTime"}
    return out


def leaves(obj: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Flattened dict paths → values (lists are values: patches replace them whole)."""
    if isinstance(obj, dict):
        out: dict[tuple[str, ...], Any] = {}
        for k, v in obj.items():
            out.update(leaves(v, (*path, str(k))))
        return out or {path: {}}
    return {path: obj}


def changed(before: dict[str, Any], after: dict[str, Any]) -> set[tuple[str, ...]]:
    b, a = leaves(content(before)), leaves(content(after))
    return {p for p in b.keys() | a.keys() if b.get(p) != a.get(p)}


def plan_live(served: Served, tmp: Path) -> tuple[dict[str, Any], Path, Path]:
    db, out = tmp / "oncall.db", tmp / "plan.json"
    run = subprocess.run([*CLI, "act", "plan", "--targets-file", str(served.targets), "--kubeconfig",
                          str(served.kubeconfig), "--interval", "1", "--samples", "6", "--db", str(db), "--out",
                          str(out), "--json"], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout), db, out


HANG = ("--pods", "4", "--fault", "engine-hang", "--at", "60", "--speed", "20", "--seed", "3")
"""Tensor-parallel groups of 2 as a LeaderWorkerSet; nothing in the cluster moves on its own but heartbeats."""


def _hung(served: Served) -> None:
    wait_for(lambda: virtual_now(served.kubeconfig) >= 90, 60, "the simulated clock past the hang's onset")


def test_act_plan_names_real_objects_and_changes_nothing(tmp_path: Path) -> None:
    with sim_serve(tmp_path, *HANG) as served:
        _hung(served)
        before = cluster(served.kubeconfig)
        plan, _, _ = plan_live(served, tmp_path)
        after = cluster(served.kubeconfig)
    assert plan["incident"] == "engine-hang"
    kinds = {a["kind"] for a in plan["actions"]}
    assert {"restart_group", "taint_node"} <= kinds
    for a in plan["actions"]:
        t = a["target"]
        assert f"{t['kind']}/{t['namespace']}/{t['name']}" in before, a  # a real object, by its real name
        assert a["dry_run"]["ok"], a["dry_run"]
        assert a["guard"]["allowed"] is False  # propose mode
    for pod in plan["diagnosis"]["scope"]["pods"]:
        assert f"Pod/llm/{pod}" in before
    # nothing changed: the same objects, the same resourceVersions (but the kubelet's heartbeats), the same specs
    assert before.keys() == after.keys()
    for key, obj in before.items():
        if obj["kind"] not in HEARTBEATS:
            assert after[key]["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"], key
        assert content(after[key]) == content(obj), key


def test_act_apply_changes_exactly_what_the_plan_said(tmp_path: Path) -> None:
    with sim_serve(tmp_path, *HANG) as served:
        _hung(served)
        plan, db, plan_file = plan_live(served, tmp_path)
        taint = next(a for a in plan["actions"] if a["kind"] == "taint_node")
        before = cluster(served.kubeconfig)
        run = subprocess.run([*CLI, "act", "apply", "--plan", str(plan_file), "--approve", taint["id"],
                              "--kubeconfig", str(served.kubeconfig), "--db", str(db), "--max-age", "600",
                              "--json"], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
        after = cluster(served.kubeconfig)
    result = json.loads(run.stdout)
    assert [(a["id"], a["status"]) for a in result["actions"]] == [(taint["id"], "executed")]
    node = f"Node//{taint['target']['name']}"
    assert before.keys() == after.keys()  # nothing created or deleted (the unapproved group restart did not run)
    moved = {key: changed(obj, after[key]) for key, obj in before.items() if changed(obj, after[key])}
    assert moved == {node: {("spec", "taints")}}
    old, new = before[node]["spec"].get("taints") or [], after[node]["spec"]["taints"]
    assert new == [*old, taint["params"]["taint"]]


def test_sim_serve_kube_api_serves_kubectl(tmp_path: Path) -> None:
    with sim_serve(tmp_path, "--pods", "3", "--seed", "5") as served:
        kc = yaml.safe_load(served.kubeconfig.read_text(encoding="utf-8"))
        assert kc["current-context"] == "llm-oncall-sim"
        assert kc["clusters"][0]["cluster"]["server"] == served.url
        assert kc["contexts"][0]["context"]["namespace"] == "llm"
        targets = json.loads(served.targets.read_text(encoding="utf-8"))
        pods = sorted(g["labels"]["pod"] for g in targets if g["labels"]["kind"] == "vllm")
        assert sorted(kubectl(served.kubeconfig, "get", "pods", "-o", "name").split()) == [f"pod/{p}"
                                                                                          for p in pods]
        assert kubectl(served.kubeconfig, "get", "nodes", "-o", "name").split() == ["node/gpu-node-00"]
        deploy = json.loads(kubectl(served.kubeconfig, "get", "deployments", "-o", "json"))["items"]
        assert [(d["metadata"]["name"], d["spec"]["replicas"]) for d in deploy] == [("vllm-llama-8b", 3)]
        assert "vllm-llama-8b" in kubectl(served.kubeconfig, "get", "deployments")
        assert f"Kubernetes API on {served.url}" in served.log.read_text(encoding="utf-8")
        served.proc.terminate()
        assert served.proc.wait(timeout=15) == 0
