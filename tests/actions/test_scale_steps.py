"""A scale-out the policy's caps bound below what a surge needs is taken in steps (as an HPA's scale-up policy bounds
each period, not the response): once every replica of the last step serves and the incident has not recovered, the
next step toward the replicas the arrivals ask for — or, while the queue stays, the replicas a pod's measured
successes say — bounded by the same caps, not held back by the first step's cooldown. Before, a fleet of 5 with a
×2.5 surge got 10 replicas and nothing more (docs/drills.md, generated fleets)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_oncall.actions import plan as planner
from llm_oncall.actions.guard import DRILL_POLICY
from llm_oncall.actions.kube import Kube
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, Plan
from llm_oncall.actions.run import Actuator
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.autoscaler import HpaConfig
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

NS, DEP = "llm", "vllm-llama-8b"
D = Diagnosis(incident="kv-capacity", confidence=0.9, summary="", t=0.0, severity="page")


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[Fleet, Kube, Actuator]]:
    cfg, _ = scenario("kv-capacity", 3, pods=4, hpa=HpaConfig(enabled=False))
    fleet = Fleet(cfg, seed=3)
    fleet.advance(60.0)
    server = KubeApiServer(KubeCluster(fleet)).start()
    kube = Kube(server.write_kubeconfig(tmp_path / "kubeconfig"), timeout_s=2.0)
    act = Actuator(kube, Ledger(tmp_path / "ledger.db", clock=lambda: fleet.now), DRILL_POLICY, mode="auto",
                   clock=lambda: fleet.now, sleep=lambda s: None)
    try:
        yield fleet, kube, act
    finally:
        kube.close()
        server.stop()


def _first_step(kube: Kube, act: Actuator, ratio: float) -> Plan:
    """The plan's scale-out sized by arrivals ×`ratio` on the fleet of 4, bounded by the caps and executed."""
    scope = planner.Scope(namespace=NS, workload=kube.get("Deployment", DEP, NS))
    want = planner.sized_replicas(4, ratio)
    a: Action = planner.scale_out(kube, scope, 4, want, "test")
    a.params["sized"] = want
    a.id, a.runbook_action, a.params["_incident_key"] = "a-first", "scale_out", "kv-capacity@300"
    p = Plan(id="p-1", incident="kv-capacity", incident_key="kv-capacity@300", diagnosis={}, diagnosed_at=0.0,
             created_at=0.0, namespace=NS, actions=[a])
    act._prepare(p, a)
    act.execute(p)
    assert a.status == "executed", a.result
    return p


def test_the_caps_bound_a_step_and_the_next_follows_once_it_serves(env: tuple[Fleet, Kube, Actuator]) -> None:
    _, kube, act = env
    p = _first_step(kube, act, 2.5)  # 4 × 2.5 × 1.15 → 12 wanted, ×2 of 4 → 8
    assert p.actions[0].params["replicas"] == 8 and p.actions[0].params["sized"] == 12
    # the step's replicas still loading: no next step yet
    assert act.next_scale_step(p, D, [], 2.5, serving=4.0, namespace=NS) is None
    nxt = act.next_scale_step(p, D, [], 2.5, serving=8.0, namespace=NS)
    assert nxt is not None and nxt.params["from"] == 8 and nxt.params["replicas"] == 12 and nxt.params["step"] == 2
    # the first step's cooldown does not hold the second back; the idempotency key is the step's own
    assert nxt.guard is not None and nxt.guard.allowed, nxt.guard
    assert nxt.idempotency_key != p.actions[0].idempotency_key
    act.execute(p, only={nxt.id})
    assert nxt.status == "executed" and int(kube.get("Deployment", DEP, NS)["spec"]["replicas"]) == 12
    # enough replicas for the arrivals: nothing more
    assert act.next_scale_step(p, D, [], 2.5, serving=12.0, namespace=NS) is None


def test_a_queue_that_stays_sizes_the_step_by_what_a_pod_serves(env: tuple[Fleet, Kube, Actuator]) -> None:
    _, kube, act = env
    p = _first_step(kube, act, 1.7)  # 4 × 1.7 × 1.15 → 8: within the caps
    assert p.actions[0].params["replicas"] == 8
    assert act.next_scale_step(p, D, [], 1.7, serving=8.0, namespace=NS) is None
    # every replica serves, the queue stays: 8 pods deliver 6/s each against 60/s of arrivals → 12 (+15 %)
    nxt = act.next_scale_step(p, D, [], 1.7, serving=8.0, namespace=NS, saturated=(60.0, 6.0))
    assert nxt is not None and nxt.params["replicas"] == 12, nxt.why


def test_no_step_past_the_replica_cap(env: tuple[Fleet, Kube, Actuator]) -> None:
    _, kube, act = env
    p = _first_step(kube, act, 2.5)
    nxt = act.next_scale_step(p, D, [], 6.0, serving=8.0, namespace=NS)  # 28 wanted
    assert nxt is not None and nxt.params["replicas"] == DRILL_POLICY.caps.scale_out_max_replicas
    act.execute(p, only={nxt.id})
    assert act.next_scale_step(p, D, [], 6.0, serving=16.0, namespace=NS) is None
