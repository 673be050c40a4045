"""deploy/base (rendered by `kubectl kustomize`): every manifest validates against the real Kubernetes schemas
(kubernetes-validate, strict), the example config loads, the objects refer to each other consistently, and the
RBAC rules are exactly what the code needs.

The needed (apiGroup, resource, verb) set is derived, not listed: the action executors run in the drills (`drill
--act`: every incident, plus kv-capacity on a LeaderWorkerSet fleet) against the simulator's Kubernetes API, each
executed action is reverted (the revert's calls count too), and a leader election takes, renews, fences and
releases its Lease; the API's audit log says which verbs on which resources in which namespace were used. The
rules must equal that set, per scope: the fleet's namespace (a Role), cluster-scoped (a ClusterRole), llm-oncall's
own namespace (the Lease Role).

CRDs (ServiceMonitor, AlertmanagerConfig, PrometheusRule — the last in test_kustomize.py): kubernetes-validate
ships no schema for them. What it can check is checked — their ObjectMeta, the LabelSelector and SecretKeySelector
they embed — and their own fields are checked against what prometheus-operator documents, by hand (the assertions
below), not by a schema.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_oncall.actions import plan as planner
from llm_oncall.actions.guard import DRILL_POLICY
from llm_oncall.actions.kube import Kube
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Plan
from llm_oncall.actions.run import Actuator
from llm_oncall.incident_ids import FAULTS
from llm_oncall.service.config import load
from llm_oncall.service.leader import LeaderElector, LeaseFence
from llm_oncall.sim import Fleet, FleetConfig
from llm_oncall.sim.autoscaler import HpaConfig
from llm_oncall.sim.faults import GPU_ECC_VARIANTS
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

kv = pytest.importorskip("kubernetes_validate")
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S = "1.33.0"
FLEET_NS, OWN_NS = "llm", "llm-oncall"
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig"),
        ("monitoring.coreos.com/v1", "PrometheusRule")}
Perm = tuple[str, str, str]


class _Loader(yaml.SafeLoader):
    """YAML as kustomize (Go, YAML 1.2) means it: a bare `=` is a string, not PyYAML's 1.1 `value` tag."""


_Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


def render(path: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize PATH` (the machine's kubectl, with its built-in kustomize)."""
    exe = shutil.which("kubectl")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is missing on a CI machine")
        pytest.skip("kubectl is not installed")
    out = subprocess.run([exe, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.load_all(out.stdout, Loader=_Loader) if d]


def manifests(path: Path = DEPLOY / "base") -> list[tuple[str, dict[str, Any]]]:
    """The rendered objects, each with a name saying what it is."""
    return [(f"{d['kind']}/{d['metadata']['name']}", d) for d in render(path)]


def _validate_part(obj: Any, schema_file: str) -> None:
    """One embedded core type against kubernetes-validate's strict schema for it."""
    import jsonschema
    from kubernetes_validate.utils import schema_contents
    from referencing import Registry, Resource

    d = f"kubernetes-json-schema/v{K8S}-local-strict"
    schema = schema_contents(f"{d}/{schema_file}", K8S)
    registry = Resource.from_contents(schema_contents(f"{d}/_definitions.json", K8S)) @ (
        Resource.from_contents(schema) @ Registry())
    jsonschema.validators.Draft202012Validator(schema, registry=registry).validate(obj)


def test_every_manifest_validates_against_the_kubernetes_schemas() -> None:
    docs = manifests()
    kinds = {d["kind"] for _, d in docs}
    assert {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ConfigMap",
            "Deployment", "Service", "PodDisruptionBudget", "Secret", "ServiceMonitor", "AlertmanagerConfig",
            "PrometheusRule"} <= kinds
    for name, d in docs:
        if (d["apiVersion"], d["kind"]) in CRDS:
            _validate_part(d["metadata"], "objectmeta-meta-v1.json")
            continue
        try:
            kv.validate(d, K8S, strict=True)
        except kv.ValidationError as exc:
            raise AssertionError(f"{name}: {d['kind']} {d['metadata']['name']}: {exc}") from None


def test_the_custom_resources_embed_valid_core_types_and_point_at_the_service() -> None:
    docs = {d["kind"]: d for _, d in manifests()}
    sm, amc = docs["ServiceMonitor"]["spec"], docs["AlertmanagerConfig"]["spec"]
    _validate_part(sm["selector"], "labelselector-meta-v1.json")
    assert set(sm) <= {"selector", "namespaceSelector", "endpoints", "jobLabel"}
    metrics = next(d for _, d in manifests() if d["kind"] == "Service" and d["metadata"]["name"].endswith("metrics"))
    assert sm["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
    assert metrics["spec"]["publishNotReadyAddresses"] is True  # the follower is not ready, and is scraped too
    assert [e["port"] for e in sm["endpoints"]] == [p["name"] for p in metrics["spec"]["ports"]]
    hook = amc["receivers"][0]["webhookConfigs"][0]
    _validate_part(hook["httpConfig"]["authorization"]["credentials"], "secretkeyselector-v1.json")
    assert amc["route"]["receiver"] == amc["receivers"][0]["name"]
    assert hook["url"] == "http://llm-oncall.llm-oncall.svc:8080/api/v1/alerts" and hook["sendResolved"] is True
    secret = docs["Secret"]
    assert hook["httpConfig"]["authorization"]["credentials"] == {"name": secret["metadata"]["name"], "key": "token"}


def test_the_example_config_loads_and_the_objects_fit_together(tmp_path: Path) -> None:
    docs = manifests()
    by = {(d["kind"], d["metadata"]["name"]): d for _, d in docs}
    cm = by[("ConfigMap", "llm-oncall-config")]
    (tmp_path / "serve.yaml").write_text(cm["data"]["serve.yaml"])
    cfg = load(tmp_path / "serve.yaml")
    le = cfg.leader_election
    assert le.enabled and cfg.in_cluster and le.namespace == OWN_NS and cfg.namespace == FLEET_NS
    secret = by[("Secret", "llm-oncall-webhook")]
    assert secret["stringData"]["token"] in cfg.auth.webhook
    dep = by[("Deployment", "llm-oncall")]
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 2 and pod["serviceAccountName"] == "llm-oncall"
    c = pod["containers"][0]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz" and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["args"][-1] == "/etc/llm-oncall/serve.yaml" and str(cfg.db).startswith("/var/lib/llm-oncall/")
    assert {v["name"]: v for v in pod["volumes"]}["data"] == {"name": "data", "emptyDir": {}}  # its own disk
    assert cfg.host_port[1] == c["ports"][0]["containerPort"]
    for (kind, _), b in by.items():
        if kind not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = b["roleRef"]
        role = by[(ref["kind"], ref["name"])]
        assert role["metadata"].get("namespace") == b["metadata"].get("namespace")
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "llm-oncall", "namespace": OWN_NS}]
    assert ("ServiceAccount", "llm-oncall") in by and ("Namespace", OWN_NS) in by


# ---- RBAC: derived from the code -------------------------------------------------------------------------
def _perms(server: KubeApiServer) -> dict[str, set[Perm]]:
    out: dict[str, set[Perm]] = defaultdict(set)
    for e in server.audit:
        ref = e.get("objectRef")
        assert ref is not None, f"a non-resource request: {e['requestURI']}"
        res = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        out[ref.get("namespace", "")].add((ref["apiGroup"], res, e["verb"]))
    return out


def _drill_perms() -> dict[str, set[Perm]]:
    from llm_oncall.drills import act as dact

    servers: list[KubeApiServer] = []

    class Recorded(KubeApiServer):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            servers.append(self)

        def stop(self) -> None:  # kept up for the reverts; stopped below
            pass

    real_scenario = dact.scenario
    # kv-capacity's fleet has an HPA (scale-out raises its floor); without one, the workload's /scale is patched:
    # on a Deployment and on a LeaderWorkerSet, each with and without an HPA
    # the retry storm on a fleet hot enough for its first burst to page at this seed (at 10 req/s per pod the storm
    # forms after the drill's window here)
    runs: list[tuple[str, dict[str, Any]]] = [(i, {"rate_per_pod": 10.5} if i == "retry-storm" else {})
                                              for i in FAULTS] + [
        ("kv-capacity", {"group_size": 2}), ("kv-capacity", {"hpa": HpaConfig()}),
        ("kv-capacity", {"group_size": 2, "hpa": HpaConfig()})]
    # every rung of the GPU repair ladder (the default gpu-ecc fault is the GPU-reset rung)
    runs += [("gpu-ecc", {"params": {"variant": v}}) for v in GPU_ECC_VARIANTS if v != "dbe"]
    need: dict[str, set[Perm]] = defaultdict(set)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(dact, "KubeApiServer", Recorded)
        for incident, over in runs:
            mp.setattr(dact, "scenario", lambda inc, seed, _o=over, **k: real_scenario(inc, seed, **{**k, **_o}))
            result = dact.run_act(incident, 1)
            server = servers[-1]
            try:
                plan = Plan.from_json(result.plan)
                executed = [a for a in plan.actions if a.status == "executed"]
                assert executed or incident == "pod-outlier", f"{incident}: nothing executed"
                with tempfile.TemporaryDirectory() as tmp:
                    kube = Kube(server.write_kubeconfig(Path(tmp) / "kubeconfig"))
                    act = Actuator(kube, Ledger(), DRILL_POLICY, mode="auto", sleep=lambda s: None)
                    for a in executed:
                        act.revert(plan, a)
                    # the planner's last resort when a diagnosis names no pod and no deployment label: the
                    # namespace's only Deployment (a Prometheus source whose scope is the whole fleet)
                    if incident == "kv-capacity" and not over:
                        assert planner._workload(kube, planner.Scope(namespace=FLEET_NS), {}) is not None
                    kube.close()
                for ns, perms in _perms(server).items():
                    need[ns] |= perms
            finally:
                KubeApiServer.stop(server)
    finally:
        mp.undo()
    return need


def _lease_perms() -> dict[str, set[Perm]]:
    clock = [0.0]
    server = KubeApiServer(KubeCluster(Fleet(FleetConfig(pods=1), seed=1))).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kc = server.write_kubeconfig(Path(tmp) / "kubeconfig")
            a = LeaderElector(Kube(kc, OWN_NS), "llm-oncall", OWN_NS, "a", 15, 5, clock=lambda: clock[0])
            b = LeaderElector(Kube(kc, OWN_NS), "llm-oncall", OWN_NS, "b", 15, 5, clock=lambda: clock[0])
            fence = LeaseFence(a, DRILL_POLICY)
            from tests.service.test_leader_unit import action

            assert a.tick() and not b.tick()  # create, get, update
            p, act = action()
            assert fence.begin(p, act) is None
            act.status = "executed"
            fence.end(p, act)
            a.release()
            assert b.tick()
        return _perms(server)
    finally:
        server.stop()


def _rules(kind: str, namespace: str | None) -> set[Perm]:
    out: set[Perm] = set()
    for _, d in manifests():
        if d["kind"] != kind or d["metadata"].get("namespace") != namespace:
            continue
        for r in d["rules"]:
            out |= {(g, res, v) for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}
    return out


def test_rbac_rules_are_exactly_what_the_executors_and_the_lease_use() -> None:
    need = _drill_perms()
    lease = _lease_perms()
    assert set(lease) == {OWN_NS} and set(need) == {FLEET_NS, "", "default"}
    want = {"fleet Role": need[FLEET_NS], "nodes ClusterRole": need[""], "Lease Role": lease[OWN_NS],
            "node Events Role": need["default"]}
    have = {"fleet Role": _rules("Role", FLEET_NS), "nodes ClusterRole": _rules("ClusterRole", None),
            "Lease Role": _rules("Role", OWN_NS), "node Events Role": _rules("Role", "default")}
    for what in want:
        missing, extra = sorted(want[what] - have[what]), sorted(have[what] - want[what])
        assert not missing and not extra, f"{what}: missing {missing}, not used {extra}"
    print("\nRBAC derived from the executors:", {k: sorted(v) for k, v in want.items()})
