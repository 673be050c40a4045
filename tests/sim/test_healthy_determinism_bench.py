"""A healthy fleet under ramps, deploys, spikes and HPA shows no incident signature; runs are reproducible."""

from __future__ import annotations

import pytest
from tests.sim.conftest import Timeline

from llm_oncall.sim import FAULTS, Fleet, FleetConfig, scenario
from llm_oncall.sim.bench import run


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_healthy_confounders_show_no_signature(seed: int) -> None:
    cfg, fault = scenario("healthy", seed, pods=3)
    assert fault is None
    tl = Timeline(Fleet(cfg, seed=seed)).run(390.0, interval=30.0)
    f = tl.fleet
    assert f.ground_truth.incident == "healthy"
    for i in range(2, len(tl.times)):
        t = tl.times[i]
        assert tl.gauge_sum("vllm:num_requests_waiting", t) < 10 * len(f.targets())
        assert tl.gauge_max("vllm:kv_cache_usage_perc", t) < 0.9
        for name, page in tl.pods[i].items():
            prev = tl.pods[i - 1].get(name)
            if page is None or prev is None:
                continue
            busy = page["vllm:num_requests_running"] > 0
            if busy and page["process_start_time_seconds"] == prev["process_start_time_seconds"]:
                assert page["vllm:iteration_tokens_total_count"] > prev["vllm:iteration_tokens_total_count"]
    assert tl.hit_rate(120, 390) > 0.5
    errors = sum(v for k, v in tl.gateway[-1].items()
                 if k.startswith("gateway_requests_total{") and "code=5" in k)
    assert errors <= 0.01 * tl.gateway[-1]["gateway_requests_total"]
    g = tl.gateway[-1]
    down = sum(v for k, v in g.items() if k.startswith("gateway_feedback_total{rating=down"))
    up = sum(v for k, v in g.items() if k.startswith("gateway_feedback_total{rating=up"))
    assert down / (down + up) < 0.05


def _fingerprint(seed: int) -> list[str]:
    cfg, fault = scenario("gpu-ecc", seed, pods=3, at=40.0)
    f = Fleet(cfg, seed=seed, fault=fault)
    out: list[str] = []
    for t in (30.0, 60.0, 90.0):
        f.advance(t)
        out.extend(f.render_metrics(p) or "" for p in f.targets())
        out.extend(f.render_dcgm(n) for n in f.nodes())
        out.append(f.render_gateway())
        out.append(f.render_kube_state())
        out.extend("\n".join(f.new_log_lines(p)) for p in f.targets())
    out.append(repr(f.events()))
    out.append(repr(f.ground_truth))
    return out


def test_same_seed_same_telemetry() -> None:
    assert _fingerprint(5) == _fingerprint(5)
    assert _fingerprint(5) != _fingerprint(6)


def test_scenarios_cover_every_incident() -> None:
    assert len(FAULTS) == 9 and "pod-outlier" in FAULTS
    for incident in FAULTS:
        cfg, fault = scenario(incident, 0)
        assert fault is not None and fault.kind == incident and 240 <= fault.at <= 360
        assert isinstance(cfg, FleetConfig)


def test_bench_reports_speed() -> None:
    # What the benchmark reports, not how fast this machine is right now (speed targets live in the benchmarks).
    result = run(pods=2, rate_per_pod=5.0, sim_seconds=30.0)
    assert result["simulated_requests"] > 0 and result["sim_seconds"] == 30.0
    assert result["wall_seconds"] >= 0 and result["render_seconds"] >= 0
    assert result["sim_seconds_per_wall_second"] > 0 and result["requests_per_s"] > 0
