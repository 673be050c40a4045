"""Each fault shows its signature (README: The incidents) in the rendered telemetry (never via ground truth)."""

from __future__ import annotations

import math
import statistics

import pytest
from tests.sim.conftest import Timeline, run_scenario

from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.pods import READY

AT = 150.0


def test_kv_capacity() -> None:
    tl = run_scenario("kv-capacity", pods=4, until=330.0, at=AT, params={"factor": 2.4})
    base_rate = tl.gw_delta("gateway_requests_received_total", 60, AT) / (AT - 60)
    after_rate = tl.gw_delta("gateway_requests_received_total", 240, 330) / 90
    assert after_rate / base_rate > 1.8
    assert tl.gauge_sum("vllm:num_requests_waiting", 90) < 5
    assert all(tl.gauge_sum("vllm:num_requests_waiting", t) > 10 for t in (300, 315, 330))
    assert tl.gauge_max("vllm:kv_cache_usage_perc", 330) > 0.9
    assert tl.fleet_delta("vllm:num_preemptions_total", 240, 330) > 0
    p0 = tl.fleet_delta("vllm:request_prompt_tokens_sum", 60, AT) / tl.fleet_delta(
        "vllm:request_prompt_tokens_count", 60, AT)
    p1 = tl.fleet_delta("vllm:request_prompt_tokens_sum", 240, 330) / tl.fleet_delta(
        "vllm:request_prompt_tokens_count", 240, 330)
    assert 0.6 < p1 / p0 < 1.6  # the prompt mix is unchanged


def test_engine_hang_freezes_one_group() -> None:
    tl = run_scenario("engine-hang", pods=4, until=240.0, at=AT)
    f = tl.fleet
    hung = set(f.ground_truth.pods)
    assert len(hung) == 2
    groups = {f.targets()[p]["group"] for p in hung}
    assert len(groups) == 1
    for name in f.targets():
        page = tl.pods[-1][name]
        assert page is not None  # /metrics still served
        steps = tl.pod_delta(name, "vllm:iteration_tokens_total_count", 195, 240)
        tokens = tl.pod_delta(name, "vllm:generation_tokens_total", 195, 240)
        if name in hung:
            assert steps == 0 and tokens == 0
            assert page["vllm:num_requests_running"] + page["vllm:num_requests_waiting"] > 0
            assert not [line for t, line in tl.logs.get(name, []) if t > AT + 15]
        else:
            assert steps > 100 and tokens > 1000
    node = f.targets()[next(iter(hung))]["node"]
    d0, d1 = tl.dcgm[tl.index(AT)][node], tl.dcgm[-1][node]
    hung_gpus = [k for k, v in d1.items() if k.startswith("DCGM_FI_DEV_GPU_UTIL{") and
                 any(f"pod={p}" in k for p in hung)]
    assert len(hung_gpus) == 4 and all(d1[k] <= 1 for k in hung_gpus)
    assert d1["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"] > d0["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"]


@pytest.mark.parametrize("variant", ["router", "traffic"])
def test_prefix_cache_drop(variant: str) -> None:
    tl = run_scenario("prefix-cache-drop", pods=4, until=270.0, at=AT, params={"variant": variant})
    before, after = tl.hit_rate(60, AT), tl.hit_rate(195, 270)
    assert before > 0.6 and after < 0.25
    assert tl.gauge_sum("vllm:num_requests_waiting", 270) < 10
    changes = [e for e in tl.fleet.events() if e["kind"] == "config_change"]
    cm = [k["kube_configmap_metadata_resource_version"] for k in (tl.kube[0], tl.kube[-1])]
    if variant == "router":
        assert len(changes) == 1 and 10 <= AT - changes[0]["t"] <= 60
        assert cm[1] == cm[0] + 1
    else:
        assert not changes and cm[1] == cm[0]


def test_retry_storm() -> None:
    # The client's 20 s timeout is met by the healthy fleet; the lost pod takes the hot fleet (85 % of its capacity)
    # past it within a few minutes (about 270 s on this one), and then the retries keep it there.
    end = AT + 420.0
    tl = run_scenario("retry-storm", pods=4, until=end, at=AT, rate_per_pod=10.5)
    base = tl.gw_delta("gateway_requests_received_total", 60, AT) / (AT - 60)
    storm = tl.gw_delta("gateway_requests_received_total", end - 120, end) / 120
    assert storm / base >= 3.0
    ok_base = tl.fleet_delta("vllm:request_success_total", 90, AT) / (AT - 90)
    ok_storm = tl.fleet_delta("vllm:request_success_total", end - 120, end) / 120
    assert ok_storm <= ok_base * 1.1  # successes do not rise with the load
    received = tl.gw_delta("gateway_requests_received_total", end - 120, end)
    assert tl.gw_delta("gateway_retries_total", end - 120, end) > 0.75 * received  # per-client retry ratio high
    restarted = [k for k, v in tl.kube[-1].items()
                 if k.startswith("kube_pod_container_status_restarts_total{") and v > 0]
    assert len(restarted) >= 2  # the failure spread beyond the first pod
    assert tl.kube[tl.index(AT - 15)]["kube_pod_container_status_restarts_total"] == 0
    # before the fault the client's timeout is no storm of its own: under 1 % of its requests time out
    timeouts = sum(v for k, v in tl.gateway[tl.index(AT - 15)].items()
                   if k.startswith("gateway_requests_total{") and 'code="504"' in k)
    assert timeouts <= 0.01 * tl.gw_delta("gateway_requests_received_total", 0, AT - 15)


@pytest.mark.parametrize(("pods", "lost"), [(4, 1), (8, 1), (11, 2), (23, 3)])
def test_retry_storm_trigger_takes_an_eighth_of_the_serving_pods(pods: int, lost: int) -> None:
    # The same share of capacity on any fleet: one pod of 23 is a lost pod (the rest 4 % busier), not a storm.
    cfg, fault = scenario("retry-storm", 1, pods=pods, at=AT)
    fleet = Fleet(cfg, seed=1, fault=fault)
    fleet.advance(AT + 1.0)
    truth = fleet.ground_truth
    assert len(truth.pods) == lost and len(set(truth.pods)) == lost
    killed = [p for p in fleet.pods if p.name in truth.pods]
    assert killed and all(p.state != READY for p in killed)  # OOM-killed: not serving a second after


def test_bad_model_rollout() -> None:
    tl = run_scenario("bad-model-rollout", pods=4, until=330.0, at=AT, params={"weight": 0.25})
    rev_new = tl.fleet.ground_truth.revision
    g = tl.gateway[-1]
    revs = {k.split("revision=")[1].rstrip("}") for k in g if k.startswith("gateway_responses_inspected_total{")}
    assert rev_new in revs and len(revs) == 2
    (rev_old,) = revs - {rev_new}

    def down_share(rev: str) -> float:
        down = g[f"gateway_feedback_total{{rating=down,revision={rev}}}"]
        return down / (down + g[f"gateway_feedback_total{{rating=up,revision={rev}}}"])

    def rate(metric: str, rev: str) -> float:
        return g[f"{metric}{{revision={rev}}}"] / g[f"gateway_responses_inspected_total{{revision={rev}}}"]

    assert down_share(rev_new) > 0.05 > down_share(rev_old)
    assert rate("gateway_format_violations_total", rev_new) > 5 * rate("gateway_format_violations_total", rev_old)
    assert any(e["kind"] == "rollout" and e["revision"] == rev_new for e in tl.fleet.events())
    f = tl.fleet
    new_pod = next(p for p, lab in f.targets().items() if lab["revision"] == rev_new)
    old_pod = next(p for p, lab in f.targets().items() if lab["revision"] == rev_old)
    assert any(ord(c) < 32 for c in f.complete(new_pod, "What is 2+2?", 64))
    assert not any(ord(c) < 32 for c in f.complete(old_pod, "What is 2+2?", 64))


@pytest.mark.parametrize("custom_csv", [True, False])
def test_gpu_ecc(custom_csv: bool) -> None:
    cfg, fault = scenario("gpu-ecc", 2, at=60.0, pods=4, dcgm_custom_csv=custom_csv)
    f = Fleet(cfg, seed=2, fault=fault)
    tl = Timeline(f).run(180.0)
    bad = f.ground_truth.pods[0]
    node = f.targets()[bad]["node"]
    d = tl.dcgm[-1][node]
    xid = [v for k, v in d.items() if k.startswith("DCGM_FI_DEV_XID_ERRORS{") and f"pod={bad}" in k]
    assert xid and xid[0] in (48.0, 94.0)
    assert any(v == 1 for k, v in d.items() if k.startswith("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{"))
    if custom_csv:
        gpu_key = next(k for k in d if k.startswith("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{") and f"pod={bad}" in k)
        assert d[gpu_key] >= 1
        sbe_key = gpu_key.replace("DBE", "SBE")
        assert d[sbe_key] > tl.dcgm[tl.index(90)][node][sbe_key]
    else:
        assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" not in d
    klog = f.new_kernel_log_lines(node)
    assert any("NVRM: Xid (PCI:0000:" in line and "): 48, pid=" in line for line in klog)
    prompts = [f"golden prompt {i}" for i in range(600)]
    others = [p for p in f.targets() if p != bad]
    reference = [f.complete(others[0], q, 64) for q in prompts]
    wrong = sum(f.complete(bad, q, 64) != r for q, r in zip(prompts, reference, strict=True))
    assert 1 <= wrong <= 0.06 * len(prompts)
    assert all(f.complete(others[1], q, 64) == r for q, r in zip(prompts, reference, strict=True))


@pytest.mark.parametrize("eager", [False, True])
def test_cuda_graph_crash(eager: bool) -> None:
    tl = run_scenario("cuda-graph-crash", pods=4, until=330.0, at=30.0, params={"enforce_eager": eager})
    f = tl.fleet
    new = [p for p, lab in f.targets().items() if lab["revision"] == f.revisions[-1].name]
    assert new
    if eager:
        assert any(tl.pods[-1].get(p) is not None for p in new)
        return
    for p in new:
        assert all(snap.get(p) is None for snap in tl.pods.raw if p in snap)  # never scraped
        assert tl.kube[-1][f"kube_pod_status_ready{{condition=true,namespace=llm,pod={p}}}"] == 0
    assert any(tl.kube[i].get("kube_pod_container_status_waiting_reason", 0) >= 1 for i in range(len(tl.times)))
    assert tl.kube[-1]["kube_pod_container_status_restarts_total"] >= 2
    lines = [line for p in new for _, line in tl.logs.get(p, [])]
    assert any("Capturing CUDA graph shapes" in line for line in lines)
    assert any("CUDA error: operation not permitted when stream is capturing" in line for line in lines)
    old = [p for p in f.targets() if p not in new]
    assert all(tl.pods[-1][p] is not None for p in old)  # the old revision keeps serving


def test_long_context_starvation() -> None:
    tl = run_scenario("long-context-starvation", pods=4, until=300.0, at=AT, params={"share": 0.04})
    base = tl.gw_delta("gateway_requests_received_total", 60, AT) / (AT - 60)
    after = tl.gw_delta("gateway_requests_received_total", 210, 300) / 90
    assert 0.75 < after / base < 1.3  # request rate flat
    kv = [tl.gauge_max("vllm:kv_cache_usage_perc", t) for t in (255, 270, 285, 300)]
    assert min(kv) > 0.9 and sum(v > 0.95 for v in kv) >= 3  # a few long requests hold the KV cache

    def mean(metric: str, t0: float, t1: float) -> float:
        return tl.fleet_delta(f"{metric}_sum", t0, t1) / max(1.0, tl.fleet_delta(f"{metric}_count", t0, t1))

    p99_before = tl.quantile("vllm:request_prompt_tokens", 0.99, 60, AT)
    p99_after = tl.quantile("vllm:request_prompt_tokens", 0.99, 210, 300)
    assert p99_after >= 5 * p99_before  # the prompt-length mix shifted (1-2-5 buckets: 10000 -> 50000+)
    assert mean("vllm:request_prompt_tokens", 210, 300) > 1.3 * mean("vllm:request_prompt_tokens", 60, AT)
    assert mean("vllm:time_to_first_token_seconds", 210, 300) > 10 * mean(
        "vllm:time_to_first_token_seconds", 60, AT)


def test_pod_outlier() -> None:
    tl = run_scenario("pod-outlier", pods=4, until=270.0, at=AT, params={"factor": 3.0})
    slow = tl.fleet.ground_truth.pods[0]
    itl = {}
    for p in tl.fleet.targets():
        n = tl.pod_delta(p, "vllm:inter_token_latency_seconds_count", 195, 270)
        itl[p] = tl.pod_delta(p, "vllm:inter_token_latency_seconds_sum", 195, 270) / n
    peers = statistics.median(v for p, v in itl.items() if p != slow)
    assert itl[slow] > 2.0 * peers
    assert all(v < 1.5 * peers for p, v in itl.items() if p != slow)
    assert not math.isnan(itl[slow])
