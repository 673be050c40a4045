"""Recovery is judged on the users: the incident's own signal *and* TTFT p99, ITL p99 and errors within their
baseline-relative bounds or the SLO (actions/verify.py), one rule for mitigation, verification and drills."""

from __future__ import annotations

from typing import Any

from llm_oncall.actions import verify
from llm_oncall.actions.guard import DRILL_POLICY, Caps, step_limit
from llm_oncall.runbooks.loader import builtin

BASE = {"waiting_per_pod": 0.0}


def _obs(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"t": 600.0, "waiting_per_pod": 0.1, "symptom_ttft": False, "symptom_itl": False,
                           "symptom_errors": False, "ttft_p99": 0.06, "ttft_slo": None, "itl_p99": 0.02,
                           "itl_slo": None, "error_share": 0.0}
    out.update(kw)
    return out


def test_a_drained_queue_with_ttft_still_red_is_not_recovered() -> None:
    assert verify.recovered("kv-capacity", _obs(), BASE)
    red = _obs(symptom_ttft=True, ttft_p99=0.21)
    assert verify.signal_back("kv-capacity", red, BASE)
    assert not verify.recovered("kv-capacity", red, BASE)
    assert verify.slo_state(red, "kv-capacity") == {"symptom_ttft": False, "symptom_itl": True,
                                                     "symptom_errors": True}


def test_within_the_configured_slo_is_back_whatever_the_ratio() -> None:
    assert verify.recovered("kv-capacity", _obs(symptom_ttft=True, ttft_p99=0.21, ttft_slo=0.5), BASE)
    assert not verify.recovered("kv-capacity", _obs(symptom_ttft=True, ttft_p99=0.7, ttft_slo=0.5), BASE)


def test_no_user_facing_data_is_not_a_recovery() -> None:
    blind = _obs(symptom_ttft=None, symptom_itl=None, symptom_errors=None)
    assert not verify.slo_back(blind) and not verify.recovered("kv-capacity", blind, BASE)


def test_a_runbook_may_leave_a_symptom_out_with_a_reason() -> None:
    # long-context-starvation: the fleet's TTFT p99 is the long prompts' own prefill; its signal judges short TTFT
    assert verify.users("long-context-starvation") == ("itl", "errors")
    assert verify.users("kv-capacity") == ("ttft", "itl", "errors")
    assert verify.slo_back(_obs(symptom_ttft=True), "long-context-starvation")
    assert not verify.slo_back(_obs(symptom_errors=True), "long-context-starvation")


def test_signal_back_users_red_is_no_effect_never_harmful() -> None:
    before = _obs(waiting_per_pod=0.0, symptom_ttft=True)
    after = _obs(waiting_per_pod=0.08, symptom_ttft=True)  # noise around zero is not "worse"
    v = verify.judge("kv-capacity", before, after, BASE)
    assert v.verdict == "no_effect" and "ttft" in v.detail
    assert verify.judge("kv-capacity", before, _obs(), BASE).verdict == "helped"


def test_signal_brought_back_with_users_still_red_is_helped() -> None:
    """A queue drained by the action while TTFT p99 still trails over its quantile window: the fix did its part
    (a queue only half way back already counts as helped), and the postmortem must not ask for a better fix."""
    before = _obs(waiting_per_pod=305.5, symptom_ttft=True, ttft_p99=3.1)
    after = _obs(waiting_per_pod=0.1, symptom_ttft=True, ttft_p99=1.4)
    v = verify.judge("kv-capacity", before, after, BASE)
    assert v.verdict == "helped" and "not yet back (ttft)" in v.detail
    half = verify.judge("kv-capacity", before, _obs(waiting_per_pod=120.0, symptom_ttft=True), BASE)
    assert half.verdict == "helped"  # the rule it is consistent with


def test_a_scale_out_step_is_relative_to_the_fleet() -> None:
    caps = Caps()
    assert step_limit(caps, 2) == 4  # the absolute step for a small fleet
    assert step_limit(caps, 8) == 8  # ×2 of 8: enough for a doubling of arrivals
    assert step_limit(Caps(scale_out_max_factor=1.0), 40) == 4


def test_pod_outlier_is_judged_against_its_peers() -> None:
    # Before: no recovery signal in the runbook, so even a drained outlier never counted as recovered on any fleet.
    assert verify.recovered("pod-outlier", _obs(n_outliers=0.0), {})
    assert not verify.recovered("pod-outlier", _obs(n_outliers=1.0), {})
    assert verify.recovered("pod-outlier", _obs(), {})  # too few pods to compare: no outlier
    assert "pod-outlier" not in DRILL_POLICY.auto  # the drain is approved by a human (runbook: why)


def test_every_automatic_fix_can_be_verified() -> None:
    """An emergency step auto mode takes needs a recovery signal, or its incident can never be judged recovered."""
    for rb in builtin():
        if any(step.auto for step in rb.emergency):
            assert rb.recovery, rb.id
