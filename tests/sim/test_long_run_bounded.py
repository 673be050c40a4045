"""A long-running fleet keeps bounded state: rollouts under an HPA finish, replaced pods leave, events are capped."""

from __future__ import annotations

from llm_oncall.drills.suite import soak_config
from llm_oncall.sim import Fleet, lifecycle
from llm_oncall.sim.fleet import EVENT_LOG_KEPT
from llm_oncall.sim.pods import READY, TERMINATED


def test_rolling_updates_under_hpa_finish_and_replaced_pods_leave() -> None:
    # Three routine deploys 10 minutes apart on the soak fleet (diurnal traffic, HPA between 3 and 8 pods).
    # Counting every pod a rollout ever created as surge made the HPA re-create old-revision pods without
    # end: the rollout never finished and the fleet grew by a pod a minute (20 ready pods after 20 minutes).
    cfg = soak_config(11, 0.0)
    fleet = Fleet(cfg, seed=11_000)
    for at in (60.0, 660.0, 1260.0):
        fleet.schedule(at, lambda t: lifecycle.start_rollout(fleet, fleet.new_revision(), t, kind="deploy"))
    peak_live = peak_kept = 0
    for end in range(60, 1861, 60):
        fleet.advance(float(end))
        peak_live = max(peak_live, sum(1 for p in fleet.pods if p.state != TERMINATED))
        peak_kept = max(peak_kept, len(fleet.pods))
    assert fleet.rollout is None
    revision = fleet.revisions[-1].name
    live = [p for p in fleet.pods if p.state != TERMINATED]
    assert live and all(p.revision.name == revision and p.state == READY for p in live)
    assert len(live) == fleet.desired_replicas
    assert peak_live <= cfg.hpa.max_replicas + 1  # replicas plus the one surge pod
    # Terminated pods leave once their in-flight requests are done: no growth with every replacement.
    assert fleet.pods_created >= 3 * len(live)
    assert peak_kept <= cfg.hpa.max_replicas + 2
    assert set(fleet.by_name) == {p.name for p in fleet.pods}
    assert fleet.event_counts["deploy"] == 3
    assert fleet.event_counts["scale"] < 20


def test_event_log_is_capped_and_read_incrementally() -> None:
    fleet = Fleet(soak_config(3, 0.0, pods=2), seed=3)
    seen = fleet.events_recorded
    got: list[dict[str, object]] = []
    total = EVENT_LOG_KEPT + 250
    for i in range(total):
        fleet.record_event(float(i), "scale", f"event {i}", replicas=i)
        if i % 97 == 0:
            got.extend(fleet.events_since(seen))
            seen = fleet.events_recorded
    got.extend(fleet.events_since(seen))
    assert [e["replicas"] for e in got] == list(range(total))  # every event once, in order
    assert len(fleet.event_log) == EVENT_LOG_KEPT
    assert fleet.events_recorded == total + 0 and fleet.event_counts["scale"] == total
    kept = fleet.events()
    assert len(kept) == EVENT_LOG_KEPT and kept[-1]["replicas"] == total - 1
    kept[-1]["kind"] = "changed"  # copies: readers cannot edit the log
    assert fleet.events()[-1]["kind"] == "scale"
    assert fleet.events_since(fleet.events_recorded) == []
