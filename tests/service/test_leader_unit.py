"""Leader election and the fence, driven by an injected clock (no sleeping) against the simulator's Kubernetes API
over HTTP through lightkube — the same requests a real cluster would see."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_oncall.actions.guard import Policy
from llm_oncall.actions.kube import Kube
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, ActionTarget, Plan
from llm_oncall.service.config import LeaderElectionConfig
from llm_oncall.service.leader import RECORD, LeaderElector, LeaseFence
from llm_oncall.sim import Fleet, FleetConfig
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

NS = "llm"


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[KubeApiServer, Path]]:
    server = KubeApiServer(KubeCluster(Fleet(FleetConfig(pods=2), seed=1))).start()
    try:
        yield server, server.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        server.stop()


def elector(kc: Path, who: str, clock: Clock, wall: Clock, duration: float = 15, renew: float = 5) -> LeaderElector:
    return LeaderElector(Kube(kc, NS), "llm-oncall", NS, who, duration, renew, clock=clock, wall=wall)


def lease(server: KubeApiServer) -> dict:
    return server.cluster.store[("leases.coordination.k8s.io", NS, "llm-oncall")]


def action(kind: str = "scale_out", name: str = "vllm-llama-8b") -> tuple[Plan, Action]:
    a = Action(id=f"a-{kind}", kind=kind, target=ActionTarget(kind="Deployment", namespace=NS, name=name),  # type: ignore[arg-type]
               params={"_incident_key": "inc-1:kv", "replicas": 5, "from": 3})
    p = Plan(id="p-1", incident="kv-capacity", incident_key="inc-1:kv", diagnosis={}, diagnosed_at=0.0,
             created_at=0.0, namespace=NS, actions=[a])
    return p, a


def test_one_leader_renews_the_other_takes_over_only_after_the_lease_duration(api) -> None:
    server, kc = api
    clock, wall = Clock(), Clock(1.8e9)
    a, b = elector(kc, "a", clock, wall), elector(kc, "b", Clock(50.0), wall)
    assert a.tick() and a.is_leader()
    first = lease(server)["spec"]
    assert first["holderIdentity"] == "a" and first["leaseDurationSeconds"] == 15 and first["leaseTransitions"] == 0
    assert first["acquireTime"] == first["renewTime"] == "2027-01-15T08:00:00.000000Z"
    assert not b.tick() and not b.is_leader()
    for _ in range(10):  # a renews every 5 s: b never sees 15 s without a change
        clock.advance(5)
        wall.advance(5)
        b.clock.advance(5)  # type: ignore[attr-defined]
        assert a.tick() and not b.tick()
    assert lease(server)["spec"]["acquireTime"] == first["acquireTime"]  # renewing keeps the acquire time
    # a stops renewing (killed, partitioned): it stops acting on its own after duration - renew = 10 s …
    clock.advance(9.9)
    assert a.is_leader()
    clock.advance(0.2)
    assert not a.is_leader()
    # … while b waits the full 15 s since it last saw the record change
    b.clock.advance(14.9)  # type: ignore[attr-defined]
    wall.advance(14.9)
    assert not b.tick()
    b.clock.advance(0.2)  # type: ignore[attr-defined]
    assert b.tick() and b.is_leader()
    spec = lease(server)["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1 and spec["acquireTime"] == spec["renewTime"]
    assert not a.tick() and a.holder == "b"  # a comes back: a follower


def test_two_candidates_racing_for_an_expired_lease_one_wins_the_other_gets_a_409(api) -> None:
    server, kc = api
    clock, wall = Clock(), Clock(1.8e9)
    a, b = elector(kc, "a", clock, wall), elector(kc, "b", clock, wall)
    assert a.tick()
    stale = Kube(kc, NS).get("Lease", "llm-oncall")
    wall.advance(1)
    assert a.tick()  # a renews: the resourceVersion b is about to write with is stale
    b.lease = stale
    assert not b._write(stale, clock(), take=True)
    assert not b.is_leader() and lease(server)["spec"]["holderIdentity"] == "a"
    conflicts = [e for e in server.audit if e["verb"] == "update" and e["responseStatus"]["code"] == 409]
    assert len(conflicts) == 1


def test_the_fence_records_the_action_in_the_lease_and_a_new_leader_does_not_repeat_it(api) -> None:
    server, kc = api
    clock, wall = Clock(), Clock(1.8e9)
    policy = Policy(cooldown_s={"default": 600})
    a, b = elector(kc, "a", clock, wall), elector(kc, "b", clock, wall)
    ledger_b = Ledger(":memory:", clock=wall)
    fa, fb = LeaseFence(a, policy, Ledger(":memory:", clock=wall)), LeaseFence(b, policy, ledger_b)
    assert a.tick() and not b.tick()
    p, act = action()
    rv = lease(server)["metadata"]["resourceVersion"]
    assert fa.begin(p, act) is None  # a conditional write: leadership proved at this moment
    assert lease(server)["metadata"]["resourceVersion"] != rv
    act.status = "executed"
    fa.end(p, act)
    rec = json.loads(lease(server)["metadata"]["annotations"][RECORD])
    assert [(r["kind"], r["target"], r["by"], r["status"]) for r in rec] == [
        ("scale_out", "Deployment/llm/vllm-llama-8b", "a", "executed")]
    assert not b.tick()  # b sees the record change: its 15 s start again
    # a dies; b takes over after the lease duration, with an empty ledger of its own
    clock.advance(15.1)
    wall.advance(15.1)
    assert not a.is_leader()
    assert fa.begin(*action("scale_out", "other")) is not None  # a no longer executes anything
    assert b.tick() and b.is_leader()
    until = ledger_b.cooldown_until("scale_out", "Deployment/llm/vllm-llama-8b")
    assert until is not None and until > wall()  # the guard of b sees the cooldown
    p2, act2 = action()
    act2.params["_incident_key"] = "inc-7:kv"  # b's own incident: another idempotency key
    why = fb.begin(p2, act2)
    assert why is not None and "records scale_out" in why and "by a" in why
    assert fb.begin(*action("scale_out", "another-deployment")) is None  # other targets are fine


def test_a_leader_whose_lease_was_taken_cannot_pass_the_fence(api) -> None:
    _server, kc = api
    clock, wall = Clock(), Clock(1.8e9)
    a = elector(kc, "a", clock, wall)
    fence = LeaseFence(a, Policy())
    assert a.tick()
    kube = Kube(kc, NS)
    stolen = kube.get("Lease", "llm-oncall")
    stolen["spec"]["holderIdentity"] = "intruder"
    kube.replace("Lease", stolen)
    assert a.is_leader()  # it does not know yet …
    why = fence.begin(*action())
    assert why is not None and "not confirmed" in why  # … the conditional write says so: nothing is sent
    assert not a.is_leader()


def test_release_on_a_clean_stop_hands_over_at_the_next_try(api) -> None:
    server, kc = api
    clock, wall = Clock(), Clock(1.8e9)
    a, b = elector(kc, "a", clock, wall), elector(kc, "b", clock, wall)
    assert a.tick() and not b.tick()
    a.stop(release=True)
    assert lease(server)["spec"]["holderIdentity"] == ""
    assert b.tick()  # no waiting for the lease duration
    spec = lease(server)["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1 and spec["leaseDurationSeconds"] == 15


def test_an_unreachable_api_makes_the_leader_step_down_at_its_deadline(api) -> None:
    server, kc = api
    clock, wall = Clock(), Clock(1.8e9)
    a = elector(kc, "a", clock, wall)
    assert a.tick()
    server.faults.add(__import__("llm_oncall.sim.kubeapi.server", fromlist=["FaultRule"]).FaultRule(
        path="/leases/", code=503, count=100))
    clock.advance(5)
    assert a.tick()  # a failed renew: still within the deadline
    clock.advance(5.1)
    assert not a.tick() and not a.is_leader()


def test_config_defaults_and_limits() -> None:
    c = LeaderElectionConfig(enabled=True, duration_s=15)
    assert c.renew == 5.0
    with pytest.raises(ValueError, match="renew_s"):
        LeaderElectionConfig(enabled=True, duration_s=4, renew_s=2)
    with pytest.raises(ValueError, match="DNS-1123"):
        LeaderElectionConfig(lease_name="Bad_Name")


def test_leader_election_needs_the_clusters_api(tmp_path: Path) -> None:
    from llm_oncall.service.config import ConfigError, load

    cfg = tmp_path / "serve.yaml"
    cfg.write_text("source: {targets: ['http://127.0.0.1:9/metrics']}\nleader_election: {enabled: true}\n")
    with pytest.raises(ConfigError, match="leader_election needs the cluster's API"):
        load(cfg)
    cfg.write_text("source: {targets: ['http://127.0.0.1:9/metrics']}\nin_cluster: true\n"
                   "leader_election: {enabled: true, duration_s: 6, renew_s: 2, identity: pod-a}\n")
    le = load(cfg).leader_election
    assert (le.enabled, le.duration_s, le.renew, le.identity, le.lease_name) == (True, 6, 2.0, "pod-a", "llm-oncall")


def test_a_follower_looks_often_and_tries_again_exactly_when_the_lease_expires(api) -> None:
    _, kc = api
    clock, wall = Clock(), Clock(1.8e9)
    a, b = elector(kc, "a", clock, wall), elector(kc, "b", clock, wall)
    assert a.tick() and a.next_try_in() == 5
    assert not b.tick() and b.next_try_in() == 1.25
    clock.advance(14)
    assert b.next_try_in() == pytest.approx(1.01)
