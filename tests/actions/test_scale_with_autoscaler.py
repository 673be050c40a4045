"""scale_out with an autoscaler on the workload, end to end through lightkube and the simulator's API: an HPA owns
the replicas, so the scale-out raises its minReplicas (capped by maxReplicas) and survives the HPA's syncs where a
replicas patch does not; the revert restores the HPA; a KEDA ScaledObject's HPA is reported, never written; a
cluster that will not say whether an HPA exists (403) gets no blind replicas patch."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llm_oncall.actions import execute
from llm_oncall.actions import plan as planner
from llm_oncall.actions.guard import DRILL_POLICY
from llm_oncall.actions.kube import Kube
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, Plan
from llm_oncall.actions.run import Actuator
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.autoscaler import HpaConfig
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster
from llm_oncall.sim.pods import TERMINATED

NS, DEP = "llm", "vllm-llama-8b"
SYNC_S = 15.0


def _env(tmp_path: Path, hpa: HpaConfig | None = None, **over: Any) -> tuple[Fleet, KubeApiServer, Kube]:
    """A healthy fleet of 8 (no fault: the HPA's own recommendation is its floor), with the HPA given."""
    cfg, _ = scenario("kv-capacity", 3, **over)
    if hpa is not None:
        cfg = dataclasses.replace(cfg, hpa=hpa)
    fleet = Fleet(cfg, seed=3)
    fleet.advance(120.0)
    server = KubeApiServer(KubeCluster(fleet)).start()
    return fleet, server, Kube(server.write_kubeconfig(tmp_path / "kubeconfig"), timeout_s=2.0)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[Fleet, KubeApiServer, Kube]]:
    fleet, server, kube = _env(tmp_path)
    try:
        yield fleet, server, kube
    finally:
        kube.close()
        server.stop()


def live(fleet: Fleet) -> int:
    return sum(1 for p in fleet.pods if p.state != TERMINATED)


def plan_of(a: Action) -> Plan:
    a.id = "a-scale"
    a.params["_incident_key"] = "kv-capacity@420"
    return Plan(id="p-1", incident="kv-capacity", incident_key="kv-capacity@420", diagnosis={}, diagnosed_at=0.0,
                created_at=0.0, namespace=NS, actions=[a])


def scale_out(kube: Kube, want: int) -> Action:
    scope = planner.Scope(namespace=NS, workload=kube.get("Deployment", DEP, NS))
    cur = int(scope.workload["spec"]["replicas"]) if scope.workload else 0
    return planner.scale_out(kube, scope, cur, want, f"test: {cur} → {want}")


def hpa_min(kube: Kube, name: str = DEP) -> int:
    return int(kube.get("HorizontalPodAutoscaler", name, NS)["spec"]["minReplicas"])


def test_a_replicas_patch_is_undone_by_the_next_hpa_sync(env: tuple[Fleet, KubeApiServer, Kube]) -> None:
    """The control: what the issue describes — behind the HPA's back, the scale-out does not last."""
    fleet, _, kube = env
    assert live(fleet) == 8 and hpa_min(kube) == 8
    kube.scale("Deployment", DEP, 12, NS)
    assert live(fleet) == 12
    fleet.advance(fleet.now + SYNC_S)
    assert live(fleet) == 8
    assert kube.get("Deployment", DEP, NS)["spec"]["replicas"] == 8


def test_scale_out_raises_the_hpa_floor_and_survives_three_syncs(env: tuple[Fleet, KubeApiServer, Kube]) -> None:
    fleet, server, kube = env
    a = scale_out(kube, 12)
    assert a.target.kind == "HorizontalPodAutoscaler" and a.target.name == DEP
    assert a.params["min_replicas"] == 8 and a.revert == {"replicas": 8, "minReplicas": 8}
    writes = server.cluster.writes
    dry = execute.run(kube, a, dry_run=True, sleep=lambda s: None)
    assert dry == {"minReplicas": 12, "from": 8, "maxReplicas": 16}
    assert server.cluster.writes == writes and hpa_min(kube) == 8  # the dry run changed nothing
    act = Actuator(kube, Ledger(":memory:", clock=lambda: fleet.now), DRILL_POLICY, mode="auto",
                   clock=lambda: fleet.now, sleep=lambda s: None)
    p = plan_of(a)
    a.dry_run = act._dry_run(a)
    act.execute(p)
    assert a.status == "executed", a.result
    assert hpa_min(kube) == 12
    fleet.advance(fleet.now + SYNC_S)  # the HPA's next sync brings the workload up to its new floor
    seen = []
    for _ in range(3):
        fleet.advance(fleet.now + SYNC_S)
        seen.append((live(fleet), kube.get("Deployment", DEP, NS)["spec"]["replicas"], hpa_min(kube)))
    assert seen == [(12, 12, 12)] * 3
    # idempotent: the same action again changes nothing
    assert execute.run(kube, a, dry_run=False, sleep=lambda s: None)["already"] == "minReplicas is 12 already"
    # the revert restores the HPA (the existing revert path, and the handler's own)
    assert act.revert(p, a) == "reverted"
    assert hpa_min(kube) == 8
    assert execute.revert(kube, a) == {"reverted": True, "minReplicas": 8, "already": True}


def test_the_revert_leaves_a_floor_someone_else_changed_since(env: tuple[Fleet, KubeApiServer, Kube]) -> None:
    _, _, kube = env
    a = scale_out(kube, 12)
    a.result = execute.run(kube, a, dry_run=False, sleep=lambda s: None)
    kube.patch("HorizontalPodAutoscaler", DEP, {"spec": {"minReplicas": 14}}, "merge", NS)  # a human, later
    out = execute.revert(kube, a)
    assert out["reverted"] is False and "14" in out["why"]
    assert hpa_min(kube) == 14


def test_the_floor_is_capped_by_max_replicas_and_an_hpa_at_its_max_is_blocked(
        env: tuple[Fleet, KubeApiServer, Kube]) -> None:
    fleet, _, kube = env
    kube.patch("HorizontalPodAutoscaler", DEP, {"spec": {"maxReplicas": 10}}, "merge", NS)
    a = scale_out(kube, 13)
    assert a.params["replicas"] == 10 and "capped by its maxReplicas 10" in a.why
    out = execute.run(kube, a, dry_run=False, sleep=lambda s: None)
    assert out == {"minReplicas": 10, "from": 8, "maxReplicas": 10} and hpa_min(kube) == 10
    fleet.advance(fleet.now + 2 * SYNC_S)
    assert live(fleet) == 10
    b = scale_out(kube, 14)  # now at its max: a higher floor adds nothing
    assert b.dry_run is not None and not b.dry_run.ok and "maxReplicas 10" in str(b.dry_run.detail)


def test_without_an_hpa_the_workload_is_scaled(tmp_path: Path) -> None:
    fleet, server, kube = _env(tmp_path, hpa=HpaConfig())
    try:
        assert kube.list("HorizontalPodAutoscaler", NS) == []
        a = scale_out(kube, 10)
        assert a.target.kind == "Deployment" and a.dry_run is None
        assert execute.run(kube, a, dry_run=False, sleep=lambda s: None) == {"replicas": 10}
        fleet.advance(fleet.now + 3 * SYNC_S)
        assert live(fleet) == 10  # nothing scales it back
    finally:
        kube.close()
        server.stop()


def test_a_keda_scaled_object_is_reported_and_its_hpa_never_written(tmp_path: Path) -> None:
    cfg, _ = scenario("kv-capacity", 3)
    fleet, server, kube = _env(tmp_path, hpa=dataclasses.replace(cfg.hpa, keda=True))
    try:
        hpa = kube.get("HorizontalPodAutoscaler", f"keda-hpa-{DEP}", NS)
        assert hpa["metadata"]["ownerReferences"][0]["kind"] == "ScaledObject"
        a = scale_out(kube, 12)
        assert a.target.kind == "ScaledObject" and a.target.name == DEP
        assert a.dry_run is not None and not a.dry_run.ok
        assert "KEDA" in str(a.dry_run.detail) and "minReplicaCount from 8 to 12" in str(a.dry_run.detail)
        writes = server.cluster.writes
        act = Actuator(kube, Ledger(":memory:", clock=lambda: fleet.now), DRILL_POLICY, mode="auto",
                       clock=lambda: fleet.now, sleep=lambda s: None)
        act.execute(plan_of(a))
        assert a.status == "blocked" and a.guard is not None and "KEDA" in a.guard.why
        with pytest.raises(execute.Blocked):  # the handler refuses on its own too
            execute.run(kube, a, dry_run=False, sleep=lambda s: None)
        assert server.cluster.writes == writes
        assert hpa_min(kube, f"keda-hpa-{DEP}") == 8
    finally:
        kube.close()
        server.stop()


def test_no_blind_replicas_patch_when_the_hpas_cannot_be_listed(env: tuple[Fleet, KubeApiServer, Kube]) -> None:
    _, server, kube = env
    assert httpx.post(f"{server.url}/_sim/faults", json={"method": "GET", "path": "/horizontalpodautoscalers$",
                                                         "code": 403}).status_code == 200
    a = scale_out(kube, 12)
    assert a.target.kind == "Deployment" and a.dry_run is not None and not a.dry_run.ok
    assert "missing RBAC: verbs=[list]" in str(a.dry_run.detail) and "horizontalpodautoscalers" in str(
        a.dry_run.detail)


def test_the_kv_capacity_drill_scales_through_its_hpa_and_the_revert_restores_it(tmp_path: Path) -> None:
    from llm_oncall.drills import act as dact

    servers: list[KubeApiServer] = []

    class Kept(KubeApiServer):
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            servers.append(self)

        def stop(self) -> None:  # kept up for the revert below
            pass

    mp = pytest.MonkeyPatch()
    mp.setattr(dact, "KubeApiServer", Kept)
    try:
        r = dact.run_act("kv-capacity", 1)
    finally:
        mp.undo()
    server = servers[-1]
    try:
        assert r.correct and r.recovered and r.seconds_to_resolution is not None, r.to_json()
        scale = next(a for a in r.actions if a["kind"] == "scale_out")
        assert scale["status"] == "executed" and scale["target"] == f"HorizontalPodAutoscaler/{NS}/{DEP}"
        kube = Kube(server.write_kubeconfig(tmp_path / "kubeconfig"))
        floor = scale["result"]["minReplicas"]
        assert floor > 8
        # the HPA kept the workload at the raised floor through its syncs until the incident resolved
        assert kube.get("Deployment", DEP, NS)["spec"]["replicas"] >= floor
        # resolved within the drill: the floor went back to the autoscaler (the hand-back is the revert), and a
        # second revert finds nothing left to undo
        assert hpa_min(kube) == 8
        p = Plan.from_json(r.plan)
        a = next(x for x in p.actions if x.kind == "scale_out")
        assert Actuator(kube, Ledger(), DRILL_POLICY, mode="auto").revert(p, a) == "reverted"
        assert hpa_min(kube) == 8
        kube.close()
    finally:
        KubeApiServer.stop(server)


def test_a_page_after_the_floor_is_handed_back_is_not_the_scale_outs_effect() -> None:
    """While the raised floor holds, an `unknown` page is the scale-out's expected effect (cold caches on the new
    pods); once the floor went back to the autoscaler, the scale-out's effects ended with it and a page is news."""
    from llm_oncall.drills import act as dact

    seen: dict[str, int] = {"held": 0, "handed_back": 0}

    def watch(store: Any, responder: Any) -> None:
        d = responder.pilot.last
        if d is None:
            return
        unknown = dataclasses.replace(d, incident="unknown")
        now = responder.clock()
        for c in [*(responder.cases or {}).values(), *responder.resolved]:
            scale = next((a for a in (c.plan.actions if c.plan else []) if a.kind == "scale_out"
                          and a.status == "executed"), None)
            if scale is None or c.acted_at is None:
                continue
            own = responder._own_effect(unknown, now)
            if scale.id in c.reverted:
                seen["handed_back"] += 1
                assert own is None or own[1].id != scale.id, "a handed-back scale-out still explains a page"
            else:
                seen["held"] += 1
                assert own is not None

    r = dact.run_act("kv-capacity", 1, approver=watch, watch_s=900.0)
    assert r.recovered and r.seconds_to_resolution is not None, r.to_json()
    assert seen["held"] > 0 and seen["handed_back"] > 0, seen
