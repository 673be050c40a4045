"""Without an event feed, a config change is still named: derived from kube-state-metrics series."""

from __future__ import annotations

import pytest

from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.respond.simsource import SimSource
from llm_oncall.sim import Fleet, scenario

pytestmark = pytest.mark.xdist_group("sim-kube")


def test_prefix_cache_drop_names_the_configmap_change_from_kube_state_metrics() -> None:
    cfg, fault = scenario("prefix-cache-drop", 4)
    assert fault is not None
    fleet = Fleet(cfg, seed=4, fault=fault)
    source = SimSource(fleet, 15.0, cluster_events=False)
    pilot = Autopilot(15.0)
    diagnosis = None
    while fleet.now < fault.at + 300:
        pilot.observe(source.collect())
        diagnosis = pilot.step()
        if diagnosis.pages:
            break
    assert diagnosis is not None and diagnosis.incident == "prefix-cache-drop", diagnosis
    assert diagnosis.root_cause is not None
    assert "ConfigMap router-config changed" in diagnosis.root_cause
    assert any(e.kind == "config_change" and e.attrs.get("source") == "kube_configmap_metadata_resource_version"
               for e in pilot.snapshots[-1].events)
