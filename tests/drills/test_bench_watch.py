"""`bench watch` is functional at a small size (its figures are measured by the command, never asserted here), and
its pages are the real vLLM page advanced in place."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.drills import bench_watch
from llm_oncall.drills.realpage import LOADED_PAGE, LivePage, bundled
from llm_oncall.signals.exposition import parse

REAL = Path(__file__).parents[1] / "real_engine" / "data" / "vllm-cpu-loaded.prom"
_SAMPLE = re.compile(r"^([^ #][^ ]*) (\S+)$")


def _shape(text: str) -> list[str]:
    """The page without its sample values: every line, name, label and bucket edge."""
    return [m.group(1) if (m := _SAMPLE.match(line)) else line for line in text.splitlines()]


def test_bench_watch_json_has_the_design_keys_and_every_size_side_by_side() -> None:
    out = CliRunner().invoke(app, ["bench", "watch", "--pods", "25", "--rounds", "2", "--warmup", "2", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert {"pods", "interval_s", "round_seconds", "core_share", "ingest_only_core_share", "rounds",
            "growth_last_over_first", "within_goal", "telemetry_log_core_share"} <= set(data)
    assert data["pods"] == 25 and data["rounds"] == 2 and data["interval_s"] == 15.0
    assert data["page"] == LOADED_PAGE
    assert [s["pods"] for s in data["scales"]] == [10, 25]
    for s in data["scales"]:
        assert s["round_seconds"] > 0 and s["core_share"] == s["round_seconds"] / 15.0
        assert len(s["round_cpu_seconds"]) == 2
        assert s["diagnosis"] == "healthy"  # a steady fleet at every size: the advancing real pages stay coherent


def test_bench_watch_prints_the_table() -> None:
    out = CliRunner().invoke(app, ["bench", "watch", "--pods", "12", "--rounds", "1", "--warmup", "1"])
    assert out.exit_code == 0, out.output
    assert "of one core at a 15 s interval" in out.output and "ingest alone" in out.output
    assert bench_watch.ladder(1000) == [10, 100, 1000] and bench_watch.ladder(5) == [5]


def test_the_bundled_page_is_the_real_engine_tiers_capture() -> None:
    assert bundled() == REAL.read_text()


def test_live_pages_keep_the_real_shape_and_advance_like_a_server() -> None:
    real = REAL.read_text()
    fleet = bench_watch.Fleet(3, seed=1)
    first = fleet.step()
    second = fleet.step()
    assert len({t.name for t, _ in first}) == 3
    for (_, a), (_, b) in zip(first, second, strict=True):
        assert _shape(a) == _shape(b) == _shape(real)
        pa, pb = parse(a), parse(b)
        assert pa.errors == pb.errors == 0
        ok = pb.get("vllm:request_success_total")
        before = {s.labels: s.value for s in pa.get("vllm:request_success_total")}
        assert all(s.value >= before[s.labels] for s in ok) and sum(s.value for s in ok) > sum(before.values())
        buckets = [s.value for s in pb.get("vllm:time_to_first_token_seconds_bucket")]
        assert buckets == sorted(buckets)  # cumulative buckets stay monotone
        assert buckets[-1] == pb.get("vllm:time_to_first_token_seconds_count")[0].value
        assert pb.get("vllm:num_preemptions_total")[0].value == pa.get("vllm:num_preemptions_total")[0].value
    # every pod its own traffic
    assert len({b for _, b in second}) == 3


def test_live_page_set_and_hold() -> None:
    page = LivePage(REAL.read_text())
    key = 'vllm:kv_cache_usage_perc{engine="0",model_name="tiny"}'
    page.set(key, 0.25)
    page.hold("vllm:generation_tokens_total")
    page.advance(1.0)
    p = parse(page.render())
    assert p.get("vllm:kv_cache_usage_perc")[0].value == 0.25
    assert p.get("vllm:generation_tokens_total")[0].value == 10833.0
    assert p.get("vllm:prompt_tokens_total")[0].value == 2 * 530.0
