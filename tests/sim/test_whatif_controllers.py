"""The controllers the what-if drills put in the fleet beforehand (sim/faults.py parameters, drills/whatif.py):
each does what its long-term fix does, when it would, and nothing without its parameter."""

from __future__ import annotations

from typing import Any

from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.pods import READY, TERMINATED


def _fleet(incident: str, **params: Any) -> Fleet:
    cfg, fault = scenario(incident, 7, at=60.0, pods=4, params=params)
    return Fleet(cfg, seed=7, fault=fault)


def test_nccl_timeout_turns_the_hang_into_a_crash_and_a_reload() -> None:
    f = _fleet("engine-hang", nccl_timeout_s=60.0)
    f.advance(100.0)
    hung = [p for p in f.pods if p.hung]
    assert hung and all(p.restarts == 0 for p in hung)
    f.advance(125.0)
    group = [f.by_name[n] for n in f.ground_truth.pods]
    assert all(not p.hung and p.restarts == 1 and p.state != READY for p in group)  # reloading the model
    f.advance(125.0 + 1.2 * f.cfg.load_s + 5.0)
    assert all(p.state == READY for p in group)
    still = _fleet("engine-hang")
    still.advance(400.0)
    assert all(p.hung for p in (still.by_name[n] for n in still.ground_truth.pods))


def test_the_liveness_probe_restarts_the_hung_group_a_minute_after_the_freeze() -> None:
    f = _fleet("engine-hang", liveness_probe_s=60.0)
    f.advance(110.0)  # the freeze at 60 s; the probe's threshold not reached yet
    hung = [p for p in f.pods if p.hung]
    assert hung and all(p.restarts == 0 for p in hung)
    f.advance(125.0)
    group = [f.by_name[n] for n in f.ground_truth.pods]
    assert all(not p.hung and p.restarts == 1 and p.state != READY for p in group)  # reloading the model
    assert any("Liveness probe failed" in str(e.get("detail", "")) or "Liveness probe failed" in str(e)
               for e in f.events())
    f.advance(125.0 + 1.2 * f.cfg.load_s + 5.0)
    assert all(p.state == READY for p in group)


def test_the_canary_quality_gate_aborts_the_bad_canary() -> None:
    f = _fleet("bad-model-rollout", quality_gate_s=120.0)
    f.advance(120.0)
    canary = [f.by_name[n] for n in f.ground_truth.pods]
    assert canary and all(p.state != TERMINATED for p in canary)
    f.advance(200.0)
    assert all(p.state == TERMINATED for p in canary)
    assert f.weights[canary[0].revision.name] == 0.0
    assert any("quality gate" in e["detail"] for e in f.events())


def test_ecc_autocordon_drains_the_node_and_the_pod_reloads_elsewhere() -> None:
    f = _fleet("gpu-ecc", autocordon_s=30.0)
    f.advance(80.0)
    (bad,) = [f.by_name[n] for n in f.ground_truth.pods]
    assert bad.state == READY and not f.cordoned
    f.advance(100.0)
    assert bad.node in f.cordoned and bad.state == TERMINATED
    assert not any(bad.gpus[0] in p.gpus for p in f.pods if p.state != TERMINATED)
    assert sum(p.state != TERMINATED for p in f.pods) == 4  # only the failing GPU's pod moved


def test_a_staging_canary_keeps_the_crashing_upgrade_out_of_production() -> None:
    f = _fleet("cuda-graph-crash", staging_canary=True)
    f.advance(200.0)
    assert not any(e["kind"] == "rollout" for e in f.events())
    assert len({p.revision.name for p in f.pods if p.state != TERMINATED}) == 1


def test_a_config_canary_reverts_the_router_change() -> None:
    f = _fleet("prefix-cache-drop", config_canary_s=60.0)
    before = "sticky"
    f.advance(90.0)
    assert f.router.policy != before
    f.advance(140.0)
    assert f.router.policy == before
    assert sum(e["kind"] == "config_change" for e in f.events()) == 2


def test_a_retry_budget_keeps_the_lost_pod_from_becoming_a_storm() -> None:
    def attempts_per_demand(**params: Any) -> tuple[float, float]:
        cfg, fault = scenario("retry-storm", 7, params=params)
        f = Fleet(cfg, seed=7, fault=fault)
        f.advance(fault.at)
        received0 = sum(f.gateway.received.values())
        demand = received0 / fault.at
        worst, last = 0.0, received0
        for t in range(int(fault.at) + 60, int(fault.at) + 900, 60):
            f.advance(float(t))
            now = sum(f.gateway.received.values())
            worst = max(worst, (now - last) / 60.0 / demand)
            last = now
        return worst, demand

    storm, _ = attempts_per_demand()
    assert storm >= 10.0  # the client that retries at once: the lost pod becomes a fleet-wide storm
    budget, _ = attempts_per_demand(client_retry="backoff")
    assert budget <= 1.5  # backoff and a budget: the lost pod costs some timeouts, never a storm
