"""Real vLLM, seen through what the engine's own counters cannot say: an engine that hangs while idle (the HTTP
layer), and a restart that changes the engine's configuration (`vllm:cache_config_info`).

The engine core is frozen (SIGSTOP) while nothing runs, so its gauges stay at 0 — it looks idle. Clients then send
requests with a short timeout: each reaches the API server (alive), is never admitted by the frozen engine, and ends
when its client gives up (vLLM cancels the handler; prometheus-fastapi-instrumentator counts the request in
`http_requests_total`). The diagnosis must call that a hang, judged over windows: the heartbeat flat for two
intervals, requests ending at the HTTP server, none finished or admitted by the engine.

The same target (name and port) restarted with `--no-enable-prefix-caching`: the changed label is a change event the
diagnosis names, and the hit rate falls to nothing (vLLM looks nothing up), not to missing data.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from tests.testkit import free_port

from .test_incidents import INTERVAL, SHORT_PROMPT, Client, Live, report, running_load, trace, warm_up
from .vllm_env import STEPS, VllmServer

pytestmark = pytest.mark.real_engine

HTTP_DONE = "http_requests_total"


def test_engine_hung_while_idle_is_a_hang(vllm_server: VllmServer) -> None:
    clients = [Client(SHORT_PROMPT, 16, pause_s=0.3)] * 2
    warm_up(vllm_server, clients)
    live = Live(vllm_server)
    # A baseline of light traffic, then idle: no arrivals, gauges 0, no page.
    with running_load(vllm_server, clients, max_requests=60):
        for _ in range(5):
            live.tick()
    vllm_server.wait_idle()
    for _ in range(3):
        live.tick()
    assert not any(d.pages for d in live.diagnoses), trace(live.ticks)
    before = len(live.ticks)
    t_freeze = t_diag = None
    try:
        vllm_server.freeze("engine")
        t_freeze = time.monotonic()
        # Idle and frozen, no arrivals yet: still nothing to page on.
        for _ in range(2):
            live.tick()
        assert not any(d.pages for d in live.diagnoses), trace(live.ticks)
        # Requests arrive; each ends at its client's timeout (3 s), unserved.
        with running_load(vllm_server, [Client(SHORT_PROMPT, 16, pause_s=0.2)] * 3, max_requests=200,
                          timeout_s=3.0) as load:
            for _ in range(10):
                tick = live.tick()
                if tick.incident == "engine-hang" and live.diagnoses[-1].pages:
                    t_diag = tick.t
                    break
            assert vllm_server.health_status() == 200
            gave_up = len(load.errors)
    finally:
        vllm_server.thaw()
    frozen_ticks = live.ticks[before:]
    report("engine-hang while idle", interval_s=INTERVAL, client_timeouts=gave_up,
           freeze_to_diagnosis_s=(t_diag - t_freeze) if t_diag and t_freeze else None,
           http_done=[x.m.get(HTTP_DONE) for x in frozen_ticks],
           running=[x.features.get("running") for x in frozen_ticks])
    assert t_diag is not None, trace(live.ticks)
    d = live.diagnoses[-1]
    assert d.scope_pods == ("tiny",), d.summary
    # The gauges really were frozen at 0: what named the hang is the HTTP layer, not a held request.
    assert all((x.features.get("running") or 0) == 0 and (x.features.get("waiting") or 0) == 0
               for x in frozen_ticks if x.features), trace(frozen_ticks)
    assert frozen_ticks[-1].m[STEPS] == frozen_ticks[0].m[STEPS], trace(frozen_ticks)
    vllm_server.wait_idle()


# --------------------------------------------------------------------------------------------------------------
# a restart that changes the configuration: the same pod (target) comes back with --no-enable-prefix-caching

SHARED_PROMPT = " ".join(["the water is long and people find the way"] * 18)  # ≈ 160 tokens: 5 full blocks


def test_restart_without_prefix_caching_is_a_named_config_change(
        start_vllm_server: Callable[..., VllmServer]) -> None:
    port = free_port()
    clients = [Client(SHARED_PROMPT, 8, pause_s=0.1)] * 2
    first = start_vllm_server(port=port)
    warm_up(first, clients)
    live = Live(first)
    with running_load(first, clients, max_requests=2000):
        for _ in range(10):
            live.tick()
    base_hit = [x.features.get("hit_rate") for x in live.ticks if x.features]
    assert not any(d.pages for d in live.diagnoses), trace(live.ticks)
    first.stop()
    # The same target (name and port) comes back with another engine configuration.
    second = start_vllm_server(port=port, extra_args=["--no-enable-prefix-caching"])
    assert 'enable_prefix_caching="False"' in second.metrics_text()
    before = len(live.ticks)
    t_back = time.monotonic()
    t_diag = None
    with running_load(second, clients, max_requests=2000):
        for _ in range(10):
            tick = live.tick()
            d = live.diagnoses[-1]
            if d.pages and d.incident == "prefix-cache-drop":
                t_diag = tick.t
                break
    after = live.ticks[before:]
    report("restart without prefix caching", baseline_hit=base_hit[-3:],
           hit_after=[x.features.get("hit_rate") for x in after if x.features],
           config_change_recent=[x.features.get("config_change_recent") for x in after if x.features],
           back_to_diagnosis_s=(t_diag - t_back) if t_diag else None, incidents=[x.incident for x in after],
           root_cause=live.diagnoses[-1].root_cause)
    assert t_diag is not None, trace(live.ticks)
    d = live.diagnoses[-1]
    assert d.root_cause is not None and "enable_prefix_caching True → False" in d.root_cause, d.root_cause
    assert any(x.features.get("hit_rate") == 0.0 for x in after if x.features), "a hit rate of nothing, not missing"
