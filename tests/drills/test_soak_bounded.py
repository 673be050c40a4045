"""The soak loop (SimSource → Autopilot) keeps bounded state, and forgetting old events changes no diagnosis."""

from __future__ import annotations

import pytest

from llm_oncall.diagnosis import autopilot as autopilot_module
from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.drills.runner import INTERVAL_S
from llm_oncall.drills.suite import soak_config
from llm_oncall.respond.simsource import SimSource
from llm_oncall.sim import Fleet, lifecycle
from llm_oncall.sim.pods import TERMINATED

pytestmark = pytest.mark.slow


def test_soak_state_is_bounded_and_event_pruning_is_invisible(monkeypatch: pytest.MonkeyPatch) -> None:
    # Keep events exactly as long as the longest look-back of the diagnosis (rollouts, 30 minutes), so the
    # 40-minute run forgets some; a shadow autopilot that never forgets events must diagnose the same.
    monkeypatch.setattr(autopilot_module, "LIVE_EVENTS_KEPT_S", 1800.0)
    fleet = Fleet(soak_config(11, 0.0, pods=3), seed=11_000)
    for at in (60.0, 660.0, 1260.0, 1860.0):  # a routine deploy every 10 minutes replaces every pod
        fleet.schedule(at, lambda t: lifecycle.start_rollout(fleet, fleet.new_revision(), t, kind="deploy"))
    fleet.schedule(200.0, lambda t: lifecycle.crash(fleet, fleet.pods[0], t, "OOMKilled", oom=True))
    source = SimSource(fleet, INTERVAL_S)
    pilot = Autopilot(interval_s=INTERVAL_S)
    shadow = Autopilot(interval_s=INTERVAL_S, registry=pilot.registry)
    shadow.store.prune_events = lambda before: 0  # type: ignore[method-assign]
    steps = 0
    while fleet.now < 2400.0 - 1e-9:
        batch = source.collect()
        pilot.observe(batch)
        shadow.observe(batch)
        d, s = pilot.step(), shadow.step()
        assert (d.incident, d.pages, d.summary) == (s.incident, s.pages, s.summary), fleet.now
        assert pilot.features[-1].values == shadow.features[-1].values, fleet.now
        steps += 1
    assert steps >= 160
    t = fleet.now
    assert len(shadow.store.events) > len(pilot.store.events)  # pruning happened
    assert all(e.t >= t - 1800.0 or e.kind == "restart" for e in pilot.store.events)
    assert fleet.rollout is None and fleet.event_counts["deploy"] == 4
    assert fleet.pods_created >= 12  # every pod was replaced at least three times ...
    assert len(fleet.pods) <= soak_config(11, 0.0, pods=3).hpa.max_replicas + 2  # ... and the old ones left
    assert all(p.state != TERMINATED or p.engine.running for p in fleet.pods)
    assert len(pilot.store.series) <= len(fleet.targets()) + 3 + 2 * 80  # (80 intervals of discovery churn)
    assert set(pilot._log_tail) <= {f"{n}/logs.txt" for n in pilot.store.series} | {
        f"{n}/kern.log" for n in fleet.nodes()}
