"""The exported rules in a real Prometheus scraping `sim serve`: every recording rule, every selector inside every
alert (vLLM, DCGM, gateway and kube-state names alike) and every dashboard panel returns series."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.testkit import run_prometheus

from llm_oncall.runbooks import promrules
from llm_oncall.sim import Fleet, FleetConfig
from llm_oncall.sim.serve import SimServer

from .live import export_for_test, rule_files_config, wait_for_coverage

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("prometheus")]

# Series a real exporter writes only while its incident is on: kube-state-metrics has a waiting-reason series
# only for a container that is waiting. (dcgm-exporter's ECC fields are off in its default CSV: the fleet here
# models a CSV that enables them.)
EVENT_ONLY = frozenset({'kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff"}'})


@pytest.fixture()
def prometheus_on_sim(tmp_path: Path) -> Iterator[tuple[str, list[promrules.Rule]]]:
    rules = export_for_test(tmp_path / "rules")
    fleet = Fleet(FleetConfig(pods=3, rate_per_pod=4.0, dcgm_custom_csv=True), seed=3)
    with SimServer(fleet, speed=2.0) as server:
        sd = tmp_path / "targets.json"
        sd.write_text(json.dumps(server.file_sd()), encoding="utf-8")
        config = rule_files_config(tmp_path / "rules") + (
            f"scrape_configs:\n  - job_name: sim\n    file_sd_configs:\n"
            f"      - files: ['{sd}']\n        refresh_interval: 1s\n")
        for url in run_prometheus(tmp_path, config):
            yield url, rules


def test_every_exported_expression_returns_series_on_the_simulator(
        prometheus_on_sim: tuple[str, list[promrules.Rule]]) -> None:
    url, rules = prometheus_on_sim
    t0 = time.monotonic()
    cov = wait_for_coverage(url, rules, want=lambda name: True, exempt=EVENT_ONLY, timeout_s=180)
    print(f"\ncoverage after {time.monotonic() - t0:.0f}s: {cov.checked_selectors} selectors checked, "
          f"firing on the healthy fleet: {cov.firing}")
    assert cov.ok(), cov
    assert cov.checked_selectors >= 70
