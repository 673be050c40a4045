"""The manual baseline: the same seeded incident, the same loop, a simulated on-call human deciding later."""

from __future__ import annotations

from llm_oncall.drills import act
from llm_oncall.drills.manual import Human
from llm_oncall.runbooks.loader import load_registry


def test_the_humans_delay_is_seeded_and_counts_each_triage_step() -> None:
    h = Human()
    assert h.delay_s("gpu-ecc", 7) == h.delay_s("gpu-ecc", 7)
    assert h.delay_s("gpu-ecc", 7) != h.delay_s("gpu-ecc", 8)
    rb = load_registry().get("engine-hang")
    assert rb is not None
    steps = sum(h.command_s if c.command else h.query_s for c in rb.triage)
    instant = Human(ack_median_s=0.0, ack_sigma=0.0)
    assert instant.delay_s("engine-hang", 7) == steps + h.decide_s
    slow = Human(ack_median_s=600.0, ack_sigma=0.0)
    assert slow.delay_s("engine-hang", 7) == 600.0 + steps + h.decide_s


def test_gpu_ecc_worked_by_hand_recovers_later_through_the_same_actions() -> None:
    r = act.run_job(act.Job("gpu-ecc", 7, manual=True))
    assert r.recovered and r.seconds_to_recovery is not None
    assert r.manual_seconds_to_recovery is not None and r.manual_decision_s is not None
    # the human acts after acknowledging and triaging: later by about that delay, never sooner
    assert r.manual_seconds_to_recovery >= r.seconds_to_recovery + 0.5 * r.manual_decision_s
    assert r.to_json()["manual_seconds_to_recovery"] == r.manual_seconds_to_recovery
