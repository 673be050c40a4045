"""Generated fleets of 4–6 pods recover on the users' rule where the fix can work (issue 24): a ×2.5 surge on 5 pods
whose KV pool preempts first needs more than the ×2 one scale-out step the caps allow, and gets it in a second step
once the first step's replicas serve; a slow pod, once drained, is judged against its peers."""

from __future__ import annotations

import pytest

from llm_oncall.drills.act import manual_baseline, run_act
from llm_oncall.drills.generator import generate_one


@pytest.mark.slow
def test_a_surge_beyond_one_capped_step_on_five_pods_recovers_in_steps() -> None:
    s = generate_one(11, 0)
    assert s.incident == "kv-capacity" and s.cfg.pods == 5 and s.shape == "preempt-first"
    r = run_act(s.incident, s.seed, cfg=s.cfg, fault=s.fault)
    steps = [a for a in r.actions if a["kind"] == "scale_out" and a["status"] == "executed"]
    # before: one step 5 → 10 (the ×2 cap) and the queue grew for the rest of the drill
    assert [a["dry_run"]["detail"]["replicas"] for a in steps] == [10, 16], r.actions
    assert r.recovered and r.seconds_to_recovery is not None, r.actions


@pytest.mark.slow
def test_a_drained_slow_pod_on_a_small_fleet_is_judged_recovered() -> None:
    s = generate_one(11, 18)
    assert s.incident == "pod-outlier" and s.cfg.pods == 5
    # the drain is a human's decision (the runbook says why): the simulated on-call human approves it
    ttr, _ = manual_baseline(s.incident, s.seed, cfg=s.cfg, fault=s.fault)
    assert ttr is not None  # before: no recovery signal in the runbook, so even an approved drain never recovered
