"""The liveness rules, fed pages and times directly (no HTTP, no clock)."""

from __future__ import annotations

import pytest

from llm_oncall.probe.liveness import LivenessConfig, LivenessTracker, Verdict
from llm_oncall.signals.source import parse_for

from .helpers import vllm_page

CFG = LivenessConfig(stall_s=30.0, unreachable_grace_s=120.0)


def feed(tr: LivenessTracker, t: float, text: str | None) -> Verdict:
    return tr.observe(t, None if text is None else parse_for("vllm", text))


def test_idle_is_never_stalled() -> None:
    tr = LivenessTracker(CFG)
    for i in range(200):  # 1000 s of a flat heartbeat with nothing to do
        v = feed(tr, i * 5.0, vllm_page(0, 0, steps=500))
        assert v.status == "idle" and v.healthy and v.http_status == 200


def test_slow_but_advancing_is_never_stalled() -> None:
    tr = LivenessTracker(CFG)
    steps = 100.0
    for i in range(120):  # one step every 25 s (5 scrapes), 200 requests queued behind it
        t = i * 5.0
        if i % 5 == 0:
            steps += 1
        v = feed(tr, t, vllm_page(256, 200, steps=steps))
        assert v.status == "ok", (t, v)
        assert v.seconds_since_progress is not None and v.seconds_since_progress < 30.0


def test_frozen_with_running_requests_stalls_after_the_stall_time() -> None:
    tr = LivenessTracker(CFG)
    for i in range(10):
        feed(tr, i * 5.0, vllm_page(12, 3, steps=100.0 + i * 50))
    last_move = 45.0
    verdicts = {t: feed(tr, t, vllm_page(12, 40, steps=550.0)) for t in range(50, 100, 5)}
    for t, v in verdicts.items():
        flat = t - last_move
        assert v.seconds_since_progress == pytest.approx(flat)
        if flat < 30.0:
            assert v.status == "ok" and v.healthy
        else:
            assert v.status == "stalled" and not v.healthy and v.http_status == 503
    body = verdicts[95].to_json()
    for key in ("status", "running", "waiting", "seconds_since_progress", "stall_threshold_seconds",
                "last_scrape_age_seconds"):
        assert key in body
    assert body["running"] == 12 and body["waiting"] == 40 and body["stall_threshold_seconds"] == 30.0


def test_dead_engine_with_only_waiting_requests_is_stalled() -> None:
    tr = LivenessTracker(CFG)
    feed(tr, 0.0, vllm_page(4, 0, steps=10))
    for t in range(5, 65, 5):
        v = feed(tr, float(t), vllm_page(0, 25, steps=11))
    assert v.status == "stalled"


def test_stall_clock_starts_when_work_arrives_not_at_the_last_step() -> None:
    tr = LivenessTracker(CFG)
    for t in range(0, 600, 5):  # idle for ten minutes, heartbeat flat
        feed(tr, float(t), vllm_page(0, 0, steps=7))
    v = feed(tr, 600.0, vllm_page(1, 0, steps=7))  # a request arrives
    assert v.status == "ok" and v.seconds_since_progress == 0.0
    assert feed(tr, 625.0, vllm_page(1, 0, steps=7)).status == "ok"
    assert feed(tr, 630.0, vllm_page(1, 0, steps=7)).status == "stalled"


def test_unreachable_fails_only_after_its_grace() -> None:
    tr = LivenessTracker(CFG, start=0.0)
    feed(tr, 0.0, vllm_page(50, 100, steps=10))
    feed(tr, 5.0, vllm_page(50, 100, steps=20))
    for t in range(10, 125, 5):
        v = feed(tr, float(t), None)
        assert v.status == "unreachable" and v.healthy, t
    assert v.unreachable_seconds == pytest.approx(110.0)
    v = feed(tr, 130.0, None)
    assert v.status == "unreachable" and not v.healthy and v.http_status == 503
    # the grace also runs between scrapes
    assert tr.status(131.0).http_status == 503
    v = feed(tr, 135.0, vllm_page(50, 100, steps=30))
    assert v.status == "ok" and v.healthy


def test_unreachable_from_the_start_counts_from_start() -> None:
    tr = LivenessTracker(LivenessConfig(30.0, 60.0), start=100.0)
    assert tr.status(100.0).status == "starting"
    assert feed(tr, 150.0, None).healthy
    assert not feed(tr, 161.0, None).healthy


def test_a_stall_proven_before_the_target_stopped_answering_stays_a_stall() -> None:
    tr = LivenessTracker(CFG)
    for t in range(0, 40, 5):
        v = feed(tr, float(t), vllm_page(8, 8, steps=5))
    assert v.status == "stalled"
    v = feed(tr, 40.0, None)
    assert v.status == "stalled" and not v.healthy


def test_counter_reset_rebaselines() -> None:
    tr = LivenessTracker(CFG)
    for t in range(0, 30, 5):
        feed(tr, float(t), vllm_page(8, 0, steps=10_000 + t * 100))
    # engine restarted: counters back near zero, new process start time, then slow warm-up
    v = feed(tr, 30.0, vllm_page(8, 2, steps=3, start=1_767_300_000.0))
    assert v.status == "ok" and v.seconds_since_progress == 0.0 and v.restarts_seen == 1
    assert feed(tr, 55.0, vllm_page(8, 2, steps=3, start=1_767_300_000.0)).status == "ok"
    assert feed(tr, 60.0, vllm_page(8, 2, steps=3, start=1_767_300_000.0)).status == "stalled"


def test_restart_with_equal_counter_value_rebaselines() -> None:
    tr = LivenessTracker(CFG)
    for t in range(0, 35, 5):
        feed(tr, float(t), vllm_page(8, 0, steps=0))
    assert tr.status(30.0).status == "stalled"
    v = feed(tr, 35.0, vllm_page(8, 0, steps=0, start=1_767_300_000.0))
    assert v.status == "ok" and v.restarts_seen == 1


def test_generated_tokens_fallback_and_escaped_names() -> None:
    for escaped in (False, True):
        tr = LivenessTracker(CFG)
        feed(tr, 0.0, vllm_page(3, 0, generated=100.0, escaped=escaped))
        v = feed(tr, 5.0, vllm_page(3, 0, generated=180.0, escaped=escaped))
        assert v.status == "ok" and v.progress_value == 180.0
        assert v.progress_metric == ("vllm_" if escaped else "vllm:") + "generation_tokens_total"
        for t in range(10, 45, 5):
            v = feed(tr, float(t), vllm_page(3, 0, generated=180.0, escaped=escaped))
        assert v.status == "stalled" and v.running == 3
    tr = LivenessTracker(CFG)
    v = feed(tr, 0.0, vllm_page(3, 0, steps=5, generated=9, escaped=True))
    assert v.progress_metric == "vllm_iteration_tokens_total_count"


def test_malformed_or_foreign_pages_never_crash() -> None:
    tr = LivenessTracker(CFG)
    for text in ("", "garbage {{{ \x00", "vllm:num_requests_running{ 3\n", "node_load1 0.5\n",
                 "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running NaN\n", "\n" * 1000):
        v = feed(tr, 0.0, text)
        assert v.status in ("unreachable", "ok", "idle")
        assert v.healthy
    v = feed(tr, 5.0, "garbage")
    assert v.status == "unreachable"


def test_page_without_progress_counter_is_not_judged() -> None:
    tr = LivenessTracker(CFG)
    for t in range(0, 100, 5):
        v = feed(tr, float(t), vllm_page(5, 5))
    assert v.status == "ok" and v.healthy and v.progress_value is None


def test_config_is_validated() -> None:
    with pytest.raises(ValueError):
        LivenessConfig(stall_s=0.0)
