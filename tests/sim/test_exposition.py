"""The simulated /metrics page against a real vLLM 0.32.0 page: names, types, label names, buckets."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from llm_oncall.sim import Fleet, FleetConfig

REFERENCE = Path(__file__).parent / "data" / "vllm-0.32.0-cpu-idle.prom"
# request_tokens-family buckets are a 1-2-5 series up to max_model_len: the reference server ran a tiny model
# (top bucket 1000), the simulated one an 8B with max_model_len 131072 (top bucket 100000).
MAX_MODEL_LEN_BUCKETS = {
    "vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:request_max_num_generation_tokens",
    "vllm:request_params_max_tokens", "vllm:request_prefill_kv_computed_tokens",
}
# Statuses appear once a request with that status was served; the idle reference page never returned a 5xx.
EXTRA_LABEL_VALUES_OK = {"http_requests"}


def _families(text: str) -> dict[str, tuple[str, set[frozenset[str]], dict[str, list[str]]]]:
    out: dict[str, tuple[str, set[frozenset[str]], dict[str, list[str]]]] = {}
    for fam in text_string_to_metric_families(text):
        labelsets: set[frozenset[str]] = set()
        buckets: dict[str, list[str]] = {}
        for s in fam.samples:
            labelsets.add(frozenset(k for k in s.labels if k != "le"))
            if s.name.endswith("_bucket"):
                buckets.setdefault(s.name, []).append(s.labels["le"])
        out[fam.name] = (fam.type, labelsets, buckets)
    return out


def _page() -> str:
    fleet = Fleet(FleetConfig(pods=1, rate_per_pod=5.0), seed=3)
    fleet.advance(60.0)
    page = fleet.render_metrics(next(iter(fleet.targets())))
    assert page is not None
    return page


def test_vllm_families_match_reference() -> None:
    ref = _families(REFERENCE.read_text())
    ours = _families(_page())
    ref_names = {n for n in ref if n.startswith("vllm:") or n.startswith("http_") or n.startswith("process_")}
    our_names = {n for n in ours if n.startswith("vllm:") or n.startswith("http_") or n.startswith("process_")}
    assert ref_names == our_names, (sorted(ref_names - our_names), sorted(our_names - ref_names))
    for name in sorted(ref_names):
        rtype, rlabels, rbuckets = ref[name]
        otype, olabels, obuckets = ours[name]
        assert rtype == otype, name
        assert rlabels == olabels, (name, rlabels, olabels)
        for sample, les in rbuckets.items():
            if name in MAX_MODEL_LEN_BUCKETS:
                assert obuckets[sample][: len(les) - 1] == les[:-1], name
                assert obuckets[sample][-1] == "+Inf"
            else:
                assert obuckets[sample] == les, (name, les, obuckets[sample])


def test_label_order_and_float_le_like_vllm() -> None:
    page = _page()
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="' in page
    assert 'vllm:request_success_total{engine="0",finished_reason="abort",model_name="' in page
    assert "vllm:cache_config_info{_block_size_resolved=" in page
    assert 'block_size="16"' in page and 'num_gpu_blocks="27000"' in page


def test_v0_flavor_uses_legacy_names_without_engine_label() -> None:
    fleet = Fleet(FleetConfig(pods=1, rate_per_pod=5.0, metrics_flavor="v0"), seed=3)
    fleet.advance(30.0)
    page = fleet.render_metrics(next(iter(fleet.targets())))
    assert page is not None
    fams = _families(page)
    for name in ("vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_hit_rate",
                 "vllm:time_per_output_token_seconds", "vllm:num_requests_swapped"):
        assert name in fams, name
    assert "vllm:kv_cache_usage_perc" not in fams
    assert 'engine="' not in page
    assert "_created" not in page


def test_counters_reset_and_start_time_changes_on_restart() -> None:
    fleet = Fleet(FleetConfig(pods=2, rate_per_pod=5.0), seed=3)
    fleet.advance(60.0)
    name = next(iter(fleet.targets()))
    before = fleet.render_metrics(name)
    assert before is not None
    fleet.restart_pods([name])
    assert fleet.render_metrics(name) is None  # down / loading: the scrape fails
    fleet.advance(60.0 + 1.2 * fleet.cfg.load_s + 5.0)  # the model load (≈ 90 s, ×0.9–1.2)
    after = fleet.render_metrics(name)
    assert after is not None

    def value(page: str, sample: str) -> float:
        for fam in text_string_to_metric_families(page):
            for s in fam.samples:
                if s.name == sample:
                    return float(s.value)
        raise KeyError(sample)

    assert value(after, "process_start_time_seconds") > value(before, "process_start_time_seconds")
    assert value(after, "vllm:generation_tokens_total") < value(before, "vllm:generation_tokens_total")
    assert any(e["kind"] == "restart" for e in fleet.events())
