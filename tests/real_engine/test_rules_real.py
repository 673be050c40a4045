"""Every exported expression evaluated against a real vLLM server (issue 15 item 6).

A real Prometheus scrapes the real vLLM CPU server under a little load with the exported recording and alerting
rules loaded: every recording rule, every dashboard panel and every `vllm:` selector inside every alert must
return series. (Upstream rule files query `vllm:num_preemptions` without `_total`: that matches nothing on a real
page, and this test is what catches it.) DCGM, gateway and kube-state selectors are not on a vLLM page; the
simulator test checks them (tests/rules/test_live_sim.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.rules.live import export_for_test, query, rule_files_config, wait_for_coverage
from tests.testkit import run_prometheus

from .vllm_env import VllmServer, start_load

pytestmark = pytest.mark.real_engine


def test_every_exported_expression_returns_series_on_real_vllm(vllm_server: VllmServer, tmp_path: Path) -> None:
    t0 = time.monotonic()
    rules = export_for_test(tmp_path / "rules")
    target = vllm_server.url.removeprefix("http://")
    config = rule_files_config(tmp_path / "rules") + (
        "scrape_configs:\n  - job_name: vllm\n    static_configs:\n"
        f"      - targets: ['{target}']\n        labels: {{namespace: llm, pod: vllm-0}}\n")
    for url in run_prometheus(tmp_path, config):
        # A little load, in waves, so the windows see requests finish, tokens flow and the cache get hits.
        load = start_load(vllm_server, requests=6, max_tokens=24)
        cov = None
        for _ in range(8):
            if len(load.results) >= load.requests:
                load = start_load(vllm_server, requests=6, max_tokens=24)
            cov = wait_for_coverage(url, rules, want=lambda name: name.startswith("vllm:"), timeout_s=20, poll_s=5)
            if cov.ok():
                break
        assert cov is not None
        hits = query(url, "pod:vllm_prefix_cache_hit:ratio")
        print(f"\nreal vLLM: {len(rules)} rules, {cov.checked_selectors} vllm: selectors checked in "
              f"{time.monotonic() - t0:.0f}s; firing/pending on the healthy server: {cov.firing}; "
              f"hit rate {hits[0]['value'][1] if hits else None}")
        assert cov.ok(), cov
        assert cov.checked_selectors >= 15
        deadline = time.monotonic() + 120
        while len(load.results) < load.requests and time.monotonic() < deadline:
            time.sleep(1)
    vllm_server.wait_idle()
