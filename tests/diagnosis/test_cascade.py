"""A cascade is named by its cause: one pod OOM-killed under clients that retry without a budget, arrivals
multiply on the survivors, and then a survivor stops stepping. Both signatures hold at the end; the storm came
first, so the incident is `retry-storm` with the killed pod as its trigger, not the hang it caused."""

from __future__ import annotations

import dataclasses
import random

import pytest

from llm_oncall.cli.diagnose import story_json
from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.diagnosis.hypotheses import weigh
from llm_oncall.respond.simsource import SimSource
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim import faults as sim_faults
from llm_oncall.sim.pods import READY

pytestmark = pytest.mark.xdist_group("sim-incidents")


def test_retry_storm_then_a_stalled_survivor_is_a_retry_storm() -> None:
    # A client that times out before even a healthy answer (4 s on the whole request): its flood never ends, so the
    # survivor's stall comes on top of a storm that is still going (the default storm's client is met by a healthy
    # fleet and its storm forms minutes later).
    cfg, fault = scenario("retry-storm", 7, params={"timeout_s": 4.0})
    assert fault is not None
    # Survivors that queue instead of being OOM-killed (a larger host memory): the frozen one stays up.
    fleet = Fleet(dataclasses.replace(cfg, oom_queue_limit=None), seed=7, fault=fault)
    # The second fault of the cascade: a survivor still serving 20 s into the storm stops stepping.

    def freeze_a_survivor(t: float) -> None:
        serving = [p for p in fleet.pods if p.state == READY and p.engine.running]
        sim_faults.engine_hang(fleet, t, {"group": serving[0].group}, random.Random(3))

    fleet.schedule(fault.at + 20.0, freeze_a_survivor)
    source = SimSource(fleet, 15.0)
    pilot = Autopilot(15.0)
    hang = pilot.registry.get("engine-hang")
    assert hang is not None
    named: list[str] = []
    pilot_story: list[Diagnosis] = []
    both: list[tuple[float, str, tuple[str, ...]]] = []  # steps where the hang's signature holds as well
    while fleet.now < fault.at + 240.0:
        pilot.observe(source.collect())
        d = pilot.step()
        if fleet.now >= fault.at and d.pages:
            named.append(d.incident)
        feats = pilot.features[-1]
        if (feats.get("n_stalled") or 0) >= 1 and weigh(hang, feats).candidate:
            both.append((fleet.now, d.incident, d.scope_pods))
            if d.incident == "retry-storm":
                caused = d.to_json().get("consequences", [])
                assert [c["incident"] for c in caused] == ["engine-hang"], caused  # the stall, as a consequence
                assert caused[0]["pods"], "the survivor that stopped stepping is named"
        pilot_story.append(d)
    assert both, "the survivor's hang became visible while the storm went on"
    assert named and set(named) == {"retry-storm"}, named
    for t, incident, scope in both:
        assert incident == "retry-storm", (t, incident)
        assert scope, "the pod the storm started from is the scope"
    # The replay timeline (diagnose --replay --json) shows the stall as a consequence of the storm, not a new incident.
    told = story_json(pilot_story)
    storm = [e for e in told["timeline"] if e["incident"] == "retry-storm"]
    assert any(e.get("consequences") == ["engine-hang"] for e in storm), told["timeline"]
    assert "engine-hang" not in {e["incident"] for e in told["timeline"]}, told["timeline"]
