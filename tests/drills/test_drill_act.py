"""`drill --act`: for every incident the autopilot acts on the first *named* page after onset (the scorer's answer,
never an `unknown` detection), executes its runbook's first emergency action on the simulator's Kubernetes API
through lightkube, and the fleet recovers."""

from __future__ import annotations

import pytest

from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.drills import act
from llm_oncall.drills.runner import DRILL_INCIDENTS, answers
from llm_oncall.runbooks.loader import builtin

FIRST_STEP = {rb.id: rb.emergency[0].action for rb in builtin() if rb.emergency}


def _d(incident: str, severity: str = "page") -> Diagnosis:
    return Diagnosis(incident=incident, confidence=0.7, summary="", t=0.0, severity=severity)


def test_only_a_named_page_after_onset_is_an_answer() -> None:
    assert answers(_d("kv-capacity"), 320.0, 300.0)
    assert not answers(_d("unknown"), 320.0, 300.0)  # a detection: the runbook is named a scrape or two later
    assert not answers(_d("kv-capacity"), 280.0, 300.0)  # before onset: a false page
    assert not answers(_d("kv-capacity", "warn"), 320.0, 300.0)
    assert not answers(_d("kv-capacity"), 320.0, None)  # a healthy run has no answer


@pytest.mark.slow
@pytest.mark.parametrize("incident", DRILL_INCIDENTS)
def test_every_incident_recovers_after_its_first_emergency_action(incident: str) -> None:
    r = act.run_act(incident, seed=7)
    assert r.drill.correct, (r.drill.diagnosed, r.drill.diagnosis.get("summary"))
    assert r.drill.onset is not None and r.drill.seconds_to_diagnosis is not None
    # the plan is made from the answer the drill is scored on, at the scrape it came in
    assert r.acted_at == pytest.approx(r.drill.onset + r.drill.seconds_to_diagnosis)
    assert r.plan["incident"] == incident
    first = [a for a in r.actions if a["runbook_action"] == FIRST_STEP[incident]]
    assert first and all(a["status"] == "executed" for a in first), r.actions
    assert r.recovered and r.seconds_to_recovery is not None, [a.get("verification") for a in r.actions]
    assert r.seconds_to_slo is not None and r.seconds_to_slo <= r.seconds_to_recovery
    assert not any(a.get("verification", {}) and a["verification"]["verdict"] == "harmful" for a in r.actions)


@pytest.mark.slow
def test_the_long_context_pool_is_dedicated_and_every_pod_labelled() -> None:
    r = act.run_act("long-context-starvation", seed=7)
    scale, route = r.actions
    assert scale["kind"] == "scale_out" and route["kind"] == "gateway_route_long_prompts"
    params = next(a for a in r.plan["actions"] if a["kind"] == "gateway_route_long_prompts")["params"]
    n_long = len(params["long_pool"])
    assert 1 <= n_long < len(params["long_pool"]) + len(params["short_pool"])
    # the pool is new capacity: the workload grows by its size, and the new replicas are labelled short
    assert scale["result"]["replicas"] == len(params["long_pool"]) + len(params["short_pool"]) + n_long
    assert len(route["result"]["labelled"]) == scale["result"]["replicas"]
