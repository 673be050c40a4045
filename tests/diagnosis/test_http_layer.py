"""What the engine's own counters cannot say, read on real vLLM 0.32 pages: the HTTP layer in front of it
(`http_requests_total` from prometheus-fastapi-instrumentator) and its configuration (`vllm:cache_config_info`).

- A flood whose clients give up: the engine finishes fewer requests while the HTTP server ends many more. That is
  a load surge, not a healthy fleet.
- An engine that hangs while idle: its gauges freeze at 0, but requests still reach (and leave, at the clients'
  timeout) the HTTP server while the engine admits none. Idle means no arrivals, not zero gauges.
- A restart that turns prefix caching off: a changed `cache_config_info` label is a change event to name, and the
  hit rate falls to nothing (vLLM does no lookups) rather than going missing.

Pages are the real server's (tests/real_engine/data/vllm-cpu-loaded.prom, tests/sim/data/vllm-0.32.0-cpu-idle.prom)
with chosen samples advanced (`RealPage`), so every name, label and bucket is vLLM's.
"""

from __future__ import annotations

from pathlib import Path

from tests.diagnosis.test_symptom_first import RealPage

from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.diagnosis.changes import config_changes
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.signals.source import Batch, Observation, Target, parse_for

INTERVAL = 5.0
TESTS = Path(__file__).parents[1]
LOADED = (TESTS / "real_engine" / "data" / "vllm-cpu-loaded.prom").read_text()
IDLE = (TESTS / "sim" / "data" / "vllm-0.32.0-cpu-idle.prom").read_text()
COMPLETIONS = 'handler="/v1/completions",method="POST",status="2xx"'


def _run(pages: list[dict[str, str]], interval: float = INTERVAL) -> tuple[Autopilot, list[Diagnosis]]:
    pilot = Autopilot(interval)
    out = []
    for i, by_pod in enumerate(pages):
        t = 1000.0 + interval * i
        obs = [Observation(Target(name, f"http://{name}:8000/metrics"), t, parse_for("vllm", text))
               for name, text in by_pod.items()]
        pilot.observe(Batch(obs))
        if i >= 1:
            out.append(pilot.step())
    return pilot, out


def _consistent(ds: list[Diagnosis]) -> None:
    """The runner-up never carries a higher confidence than the answer."""
    for d in ds:
        runner = d.to_json()["runner_up"]
        if runner is not None:
            assert runner["confidence"] <= round(d.confidence, 3), (d.incident, d.confidence, runner)


# --- 1. a flood where clients give up ---------------------------------------------------------------------------

def _flood(http_counted: bool, aborts_counted: bool, scrapes: int = 14, onset: int = 8) -> list[dict[str, str]]:
    page = RealPage(LOADED)
    out = []
    http = success = aborts = prompt = steps = 0.0
    for i in range(scrapes):
        flood = i >= onset
        # Before: 10 requests per scrape served. After: the engine finishes 4 per scrape while clients cut off 50
        # more (vLLM aborts each; the HTTP server ends each when its client goes).
        served = 4 if flood else 10
        gave_up = 50 if flood else 0
        success += served
        aborts += gave_up if aborts_counted else 0
        http += served + (gave_up if http_counted else 0)
        prompt += 48 * served
        steps += 300
        page.counters[("vllm:request_success_total", 'finished_reason="length"')] = success
        page.counters[("vllm:request_success_total", 'finished_reason="abort"')] = aborts
        page.counters[("http_requests_total", COMPLETIONS)] = http
        page.counters[("vllm:prompt_tokens_total", "engine")] = prompt
        page.counters[("vllm:iteration_tokens_total_count", "engine")] = steps
        page.counters[("vllm:num_requests_waiting", "engine")] = 12.0 if flood else 0.0
        page.counters[("vllm:num_requests_running", "engine")] = 4.0
        page.counters[("vllm:kv_cache_usage_perc", "engine")] = 0.5
        page.counters[("vllm:num_preemptions_total", "engine")] = 0.0
        page.observe("vllm:time_to_first_token_seconds", 0.3, served)
        page.observe("vllm:inter_token_latency_seconds", 0.03, 20 * served)
        out.append({"tiny": page.render()})
    return out


def test_flood_whose_clients_give_up_reads_arrivals_from_the_http_layer() -> None:
    pilot, ds = _run(_flood(http_counted=True, aborts_counted=False))
    feats = pilot.features[-1]
    ratio = feats.get("arrival_rate_ratio")
    assert isinstance(ratio, float) and ratio >= 4.0, ratio  # 54 ended at the HTTP server vs 10 before
    last = ds[-1]
    assert last.incident == "kv-capacity" and last.pages, last.summary
    # Driven by arrivals with the KV cache half full: a load surge, not "capacity exhausted".
    assert last.title.startswith("Load surge") and "exhausted" not in last.title, last.title
    _consistent(ds)


def test_flood_with_aborts_counted_by_the_engine_names_the_clients_giving_up() -> None:
    _, ds = _run(_flood(http_counted=True, aborts_counted=True))
    last = ds[-1]
    assert last.incident == "kv-capacity" and last.pages, last.summary
    assert any(e.signal == "abort_share" for e in last.evidence), [e.text for e in last.evidence]
    _consistent(ds)


def test_without_the_http_layer_the_same_flood_is_not_read_as_arrivals() -> None:
    # The control: the HTTP counter stays with the engine's. What made the difference above is the HTTP layer.
    pilot, _ = _run(_flood(http_counted=False, aborts_counted=False))
    ratio = pilot.features[-1].get("arrival_rate_ratio")
    assert isinstance(ratio, float) and ratio < 1.4, ratio


# --- 2. an engine that hangs while idle ------------------------------------------------------------------------

def _idle_hang(arrivals_after: int, scrapes: int = 14, onset: int = 8) -> list[dict[str, str]]:
    page = RealPage(IDLE)  # the real idle page: running, waiting and KV read 0
    out = []
    http = success = prompt = steps = 0.0
    for i in range(scrapes):
        hung = i >= onset
        if not hung:
            success += 3
            prompt += 150
            steps += 120
            http += 3
        else:
            http += arrivals_after  # requests that end only at their clients' timeout
        page.counters[("vllm:request_success_total", 'finished_reason="length"')] = 138.0 + success
        page.counters[("vllm:prompt_tokens_total", "engine")] = 28890.0 + prompt
        page.counters[("vllm:iteration_tokens_total_count", "engine")] = 10191.0 + steps
        page.counters[("http_requests_total", COMPLETIONS)] = 138.0 + http
        if not hung:
            page.observe("vllm:time_to_first_token_seconds", 0.2, 3)
            page.observe("vllm:inter_token_latency_seconds", 0.02, 60)
        out.append({"tiny": page.render()})
    return out


def test_engine_hung_while_idle_is_seen_in_the_http_layer() -> None:
    _, ds = _run(_idle_hang(arrivals_after=3))
    hung = [d for d in ds[-5:] if d.incident == "engine-hang" and d.pages]
    assert len(hung) >= 4, [(d.incident, d.summary) for d in ds[-5:]]
    assert hung[-1].scope_pods == ("tiny",)
    _consistent(ds)


def test_an_idle_engine_with_no_arrivals_is_healthy() -> None:
    # The control: the same frozen gauges and flat counters, but nothing reaches the HTTP server either.
    _, ds = _run(_idle_hang(arrivals_after=0))
    assert not any(d.pages for d in ds), [(d.incident, d.summary) for d in ds if d.pages]


# --- 3. a restart that changes the engine's configuration ------------------------------------------------------

def _restart(prefix_off: bool, scrapes: int = 16, restart_at: int = 9) -> list[dict[str, str]]:
    base_text = LOADED
    out = []
    page = RealPage(base_text)
    queries = hits = prompt = success = steps = 0.0
    for i in range(scrapes):
        if i == restart_at:
            # The pod comes back: a new process, counters from zero, and (maybe) a new cache configuration.
            text = base_text.replace("process_start_time_seconds 1.79601566213e+09",
                                     "process_start_time_seconds 1.79601666213e+09")
            if prefix_off:
                text = text.replace('enable_prefix_caching="True"', 'enable_prefix_caching="False"')
            page = RealPage(text)
            queries = hits = prompt = success = steps = 0.0
        after = i >= restart_at
        n = 12
        success += n
        prompt += 500 * n
        steps += 400
        if not (after and prefix_off):
            queries += 500 * n
            hits += (0.7 if not after else 0.6) * 500 * n
        page.counters[("vllm:request_success_total", 'finished_reason="length"')] = success
        page.counters[("vllm:prompt_tokens_total", "engine")] = prompt
        page.counters[("vllm:prefix_cache_queries_total", "engine")] = queries
        page.counters[("vllm:prefix_cache_hits_total", "engine")] = hits
        page.counters[("vllm:iteration_tokens_total_count", "engine")] = steps
        page.counters[("vllm:num_requests_waiting", "engine")] = 0.0
        page.counters[("vllm:num_requests_running", "engine")] = 3.0
        page.counters[("vllm:kv_cache_usage_perc", "engine")] = 0.4
        page.counters[("vllm:num_preemptions_total", "engine")] = 0.0
        page.observe("vllm:time_to_first_token_seconds", 0.2 * (2.0 if after and prefix_off else 1.0), n)
        page.observe("vllm:inter_token_latency_seconds", 0.02, 30 * n)
        out.append({"tiny": page.render()})
    return out


def test_restart_that_turns_prefix_caching_off_is_a_named_config_change() -> None:
    pilot, ds = _run(_restart(prefix_off=True))
    changes = config_changes(list(pilot.snapshots))
    assert [(c.pod, c.changed) for c in changes] == [("tiny", (("enable_prefix_caching", "True", "False"),))]
    feats = pilot.features[-1]
    assert feats.get("hit_rate") == 0.0, "no lookups with caching off: a hit rate of nothing, not missing data"
    drop = [d for d in ds if d.incident == "prefix-cache-drop" and d.pages]
    assert drop, [(d.incident, d.summary) for d in ds[-6:]]
    assert drop[0].root_cause is not None and "enable_prefix_caching True → False" in drop[0].root_cause, \
        drop[0].root_cause
    _consistent(ds)


def test_restart_with_the_same_configuration_is_no_change() -> None:
    pilot, ds = _run(_restart(prefix_off=False))
    assert config_changes(list(pilot.snapshots)) == []
    assert pilot.features[-1].get("config_change_recent") is False
    assert not any(d.incident == "prefix-cache-drop" for d in ds), [d.summary for d in ds if d.pages]
