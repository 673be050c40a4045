"""`drill --suite N --act --jobs J`: the number of worker processes changes the time, never the results."""

from __future__ import annotations

from typing import Any

from llm_oncall.drills import suite_act


def _comparable(r: suite_act.ActResult) -> dict[str, Any]:
    out = r.to_json()
    out.pop("incident_id", None)  # the incident id's suffix is random by design (drills/act.py)
    return out


def test_one_worker_and_two_give_the_same_results_in_scenario_order() -> None:
    # Two small generated fleets of seed 11 (gpu-ecc on 3 pods, bad-model-rollout on 4): quick, and of different
    # sizes, so the bigger one is started first on two workers while the results stay in scenario order.
    chosen = [s for s in suite_act.incident_scenarios(16, 11) if s.index in (7, 15)]
    assert [s.incident for s in chosen] == ["gpu-ecc", "bad-model-rollout"]
    seen: list[str] = []
    serial = suite_act.run(16, 11, workers=1, scenarios=chosen)
    parallel = suite_act.run(16, 11, workers=2, scenarios=chosen, progress=lambda r: seen.append(r.drill.incident))
    assert sorted(seen) == sorted(s.incident for s in chosen)
    assert [r.drill.incident for r in parallel] == [s.incident for s in chosen]
    assert [_comparable(r) for r in parallel] == [_comparable(r) for r in serial]
    assert suite_act.report(parallel, 16, 11) == suite_act.report(serial, 16, 11)
