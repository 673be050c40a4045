"""Every exported expression evaluated against a real vLLM server (issue 15 item 6).

A real Prometheus scrapes the real vLLM CPU server under a little load (twice: as is, and with its names escaped
to `vllm_`) with the exported recording and alerting
rules loaded: every recording rule, every dashboard panel and every `vllm:` or recorded selector inside every rule
and alert must return series. (Upstream rule files query `vllm:num_preemptions` without `_total`: that matches
nothing on a real page, and this test is what catches it.) DCGM, gateway and kube-state selectors are not on a
vLLM page; the simulator test checks them (tests/rules/test_live_sim.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.rules.live import export_for_test, query, recorded_or, rule_files_config, wait_for_coverage
from tests.testkit import run_prometheus, wait_for

from llm_oncall.runbooks import promrules

from .vllm_env import VllmServer, start_load

pytestmark = pytest.mark.real_engine
ESCAPED = "llm-escaped"

LIVE = ("pod:vllm_requests:rate", "pod:vllm_ttft_seconds:p99", "pod:vllm_itl_seconds:p99",
        "pod:vllm_generation_tokens:rate", "pod:vllm_engine_steps:increase", "namespace:vllm_request_arrivals:rate")


@pytest.fixture()
def prometheus_on_vllm(vllm_server: VllmServer, tmp_path: Path) -> Iterator[tuple[str, list[promrules.Rule]]]:
    rules = export_for_test(tmp_path / "rules")
    target = vllm_server.url.removeprefix("http://")
    # The same server twice: as scraped, and with every `vllm:` name escaped to `vllm_` (what Prometheus stores when
    # a scrape escapes names), under another namespace, so the `vllm_` side of every rule is evaluated too.
    config = rule_files_config(tmp_path / "rules") + (
        "scrape_configs:\n  - job_name: vllm\n    static_configs:\n"
        f"      - targets: ['{target}']\n        labels: {{namespace: llm, pod: vllm-0}}\n"
        "  - job_name: vllm-escaped\n    static_configs:\n"
        f"      - targets: ['{target}']\n        labels: {{namespace: {ESCAPED}, pod: vllm-0}}\n"
        "    metric_relabel_configs:\n      - source_labels: [__name__]\n        regex: 'vllm:(.*)'\n"
        "        target_label: __name__\n        replacement: 'vllm_$1'\n")
    for url in run_prometheus(tmp_path, config):
        yield url, rules
    vllm_server.wait_idle()


def test_every_exported_expression_returns_series_on_real_vllm(
        vllm_server: VllmServer, prometheus_on_vllm: tuple[str, list[promrules.Rule]]) -> None:
    url, rules = prometheus_on_vllm
    t0 = time.monotonic()
    # A little load, in waves, so the windows see requests finish, tokens flow and the cache get looked up.
    load = start_load(vllm_server, requests=6, max_tokens=24)
    cov = None
    for _ in range(8):
        if len(load.results) >= load.requests:
            load = start_load(vllm_server, requests=6, max_tokens=24)
        cov = wait_for_coverage(url, rules, want=recorded_or("vllm:", rules), timeout_s=20, poll_s=5)
        if cov.ok():
            break
    assert cov is not None
    print(f"\nreal vLLM: {len(rules)} rules, {cov.checked_selectors} selectors (vllm: and recorded) checked in "
          f"{time.monotonic() - t0:.0f}s; firing/pending on the healthy server: {cov.firing}")
    assert cov.ok(), cov
    assert cov.checked_selectors >= 60
    assert query(url, f'count(vllm_num_requests_waiting{{namespace="{ESCAPED}"}})')  # the escaped copy is there
    # Every recording rule answers for both spellings (the escaped namespace has no `vllm:` name at all).
    one_spelling = [r.name for r in rules if r.kind == "record"
                    and {s["metric"].get("namespace") for s in query(url, f"count by (namespace) ({r.name})")}
                    != {"llm", ESCAPED}]
    assert one_spelling == [], one_spelling

    # Not just series: under load the golden signals computed from the real page carry numbers.
    load = start_load(vllm_server, requests=6, max_tokens=24)
    wait_for(lambda: all(query(url, f"{q} > 0") for q in LIVE), 120, f"{LIVE} > 0 under load")
    values = {q: round(float(query(url, q)[0]["value"][1]), 4) for q in LIVE}
    print(f"under load after {time.monotonic() - t0:.0f}s: {values}")
    wait_for(lambda: len(load.results) >= load.requests, 120, "the load to finish")
