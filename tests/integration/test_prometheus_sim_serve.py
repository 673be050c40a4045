"""A real Prometheus scrapes `sim serve` through its file_sd list, and the fleet is queryable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.testkit import run_prometheus, wait_for

from llm_oncall.signals.prometheus import PrometheusSource
from llm_oncall.signals.store import Store
from llm_oncall.sim import Fleet, FleetConfig
from llm_oncall.sim.serve import SimServer

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("prometheus")]


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[SimServer, str]]:
    fleet = Fleet(FleetConfig(pods=3, rate_per_pod=4.0), seed=3)
    with SimServer(fleet, speed=5.0) as server:
        sd = tmp_path / "targets.json"
        sd.write_text(json.dumps(server.file_sd()), encoding="utf-8")
        config = (f"scrape_configs:\n  - job_name: sim\n    file_sd_configs:\n"
                  f"      - files: ['{sd}']\n        refresh_interval: 1s\n")
        yield from ((server, url) for url in run_prometheus(tmp_path, config))


def test_prometheus_scrapes_sim_serve(served: tuple[SimServer, str]) -> None:
    server, url = served

    def waiting_series() -> int:
        try:  # a slow answer is "not yet", not a failure
            body = httpx.get(f"{url}/api/v1/query", params={"query": "vllm:num_requests_waiting"},
                             timeout=10).json()
        except (httpx.HTTPError, ValueError):
            return 0
        return len(body.get("data", {}).get("result", []))

    wait_for(lambda: waiting_series() >= 3, 120, "three pods' vllm:num_requests_waiting in Prometheus")
    wait_for(lambda: len(server.pod_urls()) >= 3, 30, "pod endpoints")
    # Enough history for windowed rates, then the Prometheus source sees the same fleet.
    source = PrometheusSource(url, 'job="sim"', window_s=8.0, step_s=1.0)
    store = Store(interval_s=1.0)

    def three_pods_with_rates() -> bool:
        store.add(source.collect())
        if store.latest_time() is None:
            return False
        return sum(1 for p in store.snapshot().pods if p.up and p.generation_tokens_per_s) >= 3

    wait_for(three_pods_with_rates, 120, "rates for three pods through Prometheus")
    snap = store.snapshot()
    assert {p.name for p in snap.pods if p.up} >= set(server.pod_urls())
