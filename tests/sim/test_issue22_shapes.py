"""The simulator's shapes from real vLLM (issue 22): an engine frozen while idle, a rolling update that turns prefix
caching off, a flood whose clients give up. Each is checked on the rendered pages only (never the ground truth)."""

from __future__ import annotations

import dataclasses

from tests.sim.conftest import run_scenario

AT = 150.0


def test_idle_hang_freezes_the_gauges_at_zero_while_requests_end_at_the_http_server() -> None:
    tl = run_scenario("engine-hang", pods=1, tp=1, group_size=1, rate_per_pod=0.5, until=330.0, at=AT,
                      engine_core_gauges=True, abort_on_disconnect=True, params={"idle_wait_s": 120.0})
    hung = tl.fleet.ground_truth.pods
    assert len(hung) == 1
    pod = hung[0]
    onset = tl.fleet.ground_truth.onset
    assert onset is not None and AT <= onset < AT + 120.0
    late = [t for t in tl.times if t >= onset + 60.0]
    assert late, tl.times
    for t in late:
        page = tl.pods[tl.index(t)][pod]
        # The engine core froze between requests: its gauges read 0 for good ...
        assert page["vllm:num_requests_running"] == 0.0 and page["vllm:num_requests_waiting"] == 0.0, t
    # ... it finishes and admits nothing, while the HTTP server ends requests at their clients' timeout.
    assert tl.pod_delta(pod, "vllm:iteration_tokens_total_count", onset + 30.0, late[-1]) == 0.0
    assert tl.pod_delta(pod, "vllm:prompt_tokens_total", onset + 30.0, late[-1]) == 0.0
    assert tl.pod_delta(pod, "http_requests_total{handler=/v1/completions,method=POST,status=2xx}",
                        onset + 30.0, late[-1]) > 0


def test_busy_hang_without_core_gauges_is_unchanged() -> None:
    tl = run_scenario("engine-hang", pods=2, tp=1, group_size=1, until=240.0, at=AT)
    pod = tl.fleet.ground_truth.pods[0]
    assert tl.fleet.ground_truth.onset == AT
    assert tl.pods[-1][pod]["vllm:num_requests_running"] + tl.pods[-1][pod]["vllm:num_requests_waiting"] > 0


def test_config_restart_turns_prefix_caching_off_on_the_new_pods() -> None:
    tl = run_scenario("prefix-cache-drop", pods=3, until=480.0, at=AT, params={"variant": "config-restart"})
    last = tl.pods[-1]
    off = [n for n, page in last.items() if page and any(
        k.startswith("vllm:cache_config_info{") and "enable_prefix_caching=False" in k for k in page)]
    on = [n for n, page in last.items() if page and any(
        k.startswith("vllm:cache_config_info{") and "enable_prefix_caching=True" in k for k in page)]
    assert off, "the new revision's pods say prefix caching is off"
    first = tl.pods[tl.index(AT - 15.0)]
    assert all(any("enable_prefix_caching=True" in k for k in page) for page in first.values() if page)
    for n in off:
        # Caching off: vLLM looks nothing up, so its prefix counters stand still while it serves prompts.
        assert tl.pod_delta(n, "vllm:prefix_cache_queries_total", 420.0, 480.0) == 0.0
        assert tl.pod_delta(n, "vllm:prompt_tokens_total", 420.0, 480.0) > 0
    assert set(off).isdisjoint(on)


def test_flood_whose_clients_give_up_ends_at_the_http_server_and_is_aborted() -> None:
    from llm_oncall.sim.clients import DEFAULT_CLIENTS

    clients = tuple(dataclasses.replace(c, timeout_s=15.0) for c in DEFAULT_CLIENTS)
    tl = run_scenario("kv-capacity", pods=2, until=420.0, at=AT, params={"factor": 3.0}, gateway_metrics=False,
                      abort_on_disconnect=True, clients=clients)
    assert tl.gateway[-1] == {}, "no gateway page counts arrivals"
    http = "http_requests_total{handler=/v1/completions,method=POST,status=2xx}"
    abort = "vllm:request_success_total{engine=0,finished_reason=abort,model_name=meta-llama/Llama-3.1-8B-Instruct}"
    before_http = tl.fleet_delta(http, 60.0, AT) / (AT - 60.0)
    after_http = tl.fleet_delta(http, 330.0, 420.0) / 90.0
    assert tl.fleet_delta(abort, 60.0, AT) == 0.0
    assert tl.fleet_delta(abort, 330.0, 420.0) > 0, "queued requests whose clients left are aborted"
    assert after_http / before_http > 1.8, (before_http, after_http)
