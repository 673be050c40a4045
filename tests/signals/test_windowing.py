"""Windowed arithmetic: fleet merges, counter resets, staleness, DCGM pages, histogram_quantile."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_oncall.signals.series import Histogram, histogram_quantile, merge
from llm_oncall.signals.snapshot import PodSnapshot

from .pages import (
    DCGM_BLANK_INT64,
    TTFT_NEW,
    Engine,
    cumulative,
    dcgm_page,
    prom_quantile,
    store_of,
)

RATE_FIELDS = ("preemptions_per_s", "requests_per_s", "success_per_s", "errors_per_s", "aborts_per_s",
               "prompt_tokens_per_s", "generation_tokens_per_s", "engine_steps_per_s")


def _pod(snap_pods: tuple[PodSnapshot, ...], name: str) -> PodSnapshot:
    return next(p for p in snap_pods if p.name == name)


# -- fleet ------------------------------------------------------------------------------------

def _fleet_pages() -> dict[str, list[tuple[float, str | None]]]:
    out: dict[str, list[tuple[float, str | None]]] = {}
    plan = {  # pod: (TTFT observations, value), running, kv, preemptions, prefix hits/queries
        "fast-a": ((450, 0.03), 5, 0.40, 1, (90, 100)),
        "fast-b": ((450, 0.03), 6, 0.50, 2, (10, 1000)),
        "slow-c": ((100, 7.0), 9, 0.99, 30, (0, 0)),
    }
    for name, ((n, value), running, kv, preempt, (hits, queries)) in plan.items():
        e = Engine("vllm-0.32").set(running=running, waiting=1, kv=kv)
        e.observe("ttft", 60.0, 1000)  # old history, outside the window
        first = e.render()
        e.observe("ttft", value, n).preempt(preempt).prefix(hits, queries).finish("stop", 10)
        out[name] = [(0.0, first), (15.0, e.render())]
    return out


def test_fleet_p99_merges_buckets_instead_of_averaging_pod_p99s() -> None:
    snap = store_of(_fleet_pages()).snapshot(window_s=15)
    pods = {p.name: p for p in snap.pods}
    # 900 fast + 100 slow first tokens: rank 990 lies in (5.0, 7.5] where the 100 slow ones are
    expected = prom_quantile(0.99, cumulative([0.03] * 900 + [7.0] * 100, TTFT_NEW))
    assert expected == pytest.approx(5.0 + 2.5 * 90 / 100)
    assert snap.fleet.ttft_p99 == pytest.approx(expected)
    pod_p99s = [p.ttft_p99 for p in pods.values()]
    assert all(v is not None for v in pod_p99s)
    averaged = statistics.fmean(v for v in pod_p99s if v is not None)
    assert averaged < 2.6 < snap.fleet.ttft_p99  # the average hides that 10% of users wait 5-7.5 s
    assert pods["slow-c"].ttft_p99 == pytest.approx(5.0 + 2.5 * 99 / 100)
    assert pods["fast-a"].ttft_p99 == pytest.approx(0.02 + 0.02 * (0.99 * 450) / 450)


def test_fleet_sums_maxes_and_pools_prefix_ratios() -> None:
    f = store_of(_fleet_pages()).snapshot(window_s=15).fleet
    assert (f.pods_total, f.pods_up) == (3, 3)
    assert f.running == 20 and f.waiting == 3
    assert f.kv_usage_max == 0.99 and f.kv_usage_median == 0.5
    assert f.preemptions_per_s == pytest.approx(33 / 15)
    assert f.requests_per_s == pytest.approx(30 / 15)
    # Σhits / Σqueries = 100 / 1100, not the mean of the pod ratios (0.9 and 0.01)
    assert f.prefix_hit_rate == pytest.approx(100 / 1100)


# -- counter resets -----------------------------------------------------------------------------

def _restart_timeline(with_start_time: bool) -> list[tuple[float, str | None]]:
    def render(e: Engine) -> str:
        text = e.render()
        if not with_start_time:
            text = "\n".join(line for line in text.splitlines() if "process_start_time_seconds" not in line)
        return text

    old = Engine("vllm-0.32", start_time=1.7e9)
    old.preempt(100).finish("stop", 400).tokens(5e5, 2e5).observe("ttft", 8.0, 50).step(5000)
    pages: list[tuple[float, str | None]] = [(0.0, render(old))]
    old.preempt(3).finish("stop", 6).tokens(600, 300).observe("ttft", 0.05, 10).step(10)
    pages.append((15.0, render(old)))
    new = Engine("vllm-0.32", start_time=1.7e9 + 20)  # restarted: every counter starts over
    new.preempt(2).finish("stop", 4).tokens(400, 200).observe("ttft", 0.05, 5).step(5)
    pages.append((30.0, render(new)))
    new.preempt(2).finish("stop", 4).tokens(400, 200).observe("ttft", 0.05, 5).step(5)
    pages.append((45.0, render(new)))
    return pages


@pytest.mark.parametrize("with_start_time", [True, False], ids=["start-time", "counters-only"])
def test_counter_reset_inside_window(with_start_time: bool) -> None:
    p = store_of({"p": _restart_timeline(with_start_time)}).snapshot(window_s=45).pods[0]
    assert p.restarts == 1
    for field in RATE_FIELDS:
        value = getattr(p, field)
        assert value is None or value >= 0, field
    # 3 before the restart, 2 counted from zero after it, 2 more: 7 in 45 s
    assert p.preemptions_per_s == pytest.approx(7 / 45)
    assert p.requests_per_s == pytest.approx(14 / 45)
    assert p.generation_tokens_per_s == pytest.approx(700 / 45)
    assert p.engine_steps_per_s == pytest.approx(20 / 45)
    # the histogram reset too: 20 fast first tokens in the window, the 50 old slow ones are not in it
    expected = prom_quantile(0.99, cumulative([0.05] * 20, TTFT_NEW))
    assert p.ttft_p99 == pytest.approx(expected)


def test_reset_outside_window_is_not_a_restart() -> None:
    p = store_of({"p": _restart_timeline(True)}).snapshot(window_s=15).pods[0]
    assert p.restarts == 0
    assert p.preemptions_per_s == pytest.approx(2 / 15)


# -- staleness ------------------------------------------------------------------------------------

def test_down_target_is_unknown_not_zero() -> None:
    a = Engine("vllm-0.32").set(running=4, waiting=2, kv=0.3)
    b = Engine("vllm-0.32").set(running=8, waiting=9, kv=0.9)
    pages: dict[str, list[tuple[float, str | None]]] = {
        "up": [(0.0, a.render()), (15.0, a.preempt(3).render()), (30.0, a.render()), (45.0, a.render())],
        "failing": [(0.0, b.render()), (15.0, b.preempt(3).render()), (30.0, b.render()), (45.0, None)],
        # last seen 45 s ago: more than 2.5 scrape intervals, so stale
        "gone": [(0.0, b.render())],
    }
    snap = store_of(pages).snapshot(window_s=45)
    failing, gone, up = (_pod(snap.pods, n) for n in ("failing", "gone", "up"))
    assert up.up and up.preemptions_per_s == pytest.approx(3 / 45)
    assert not failing.up and failing.error is not None and "refused" in failing.error
    assert not gone.up and gone.error == "stale" and gone.age_s == 45.0
    for p in (failing, gone):
        for field in ("running", "waiting", "kv_usage", "preemptions_per_s", "requests_per_s", "ttft_p99"):
            assert getattr(p, field) is None, (p.name, field)
    f = snap.fleet
    assert (f.pods_total, f.pods_up) == (3, 1)
    assert f.running == 4 and f.kv_usage_max == 0.3  # the down pods are not counted as zeros


def test_all_pods_down_gives_unknown_fleet() -> None:
    snap = store_of({"a": [(0.0, None), (15.0, None)], "b": [(0.0, None), (15.0, None)]}).snapshot()
    f = snap.fleet
    assert (f.pods_total, f.pods_up) == (2, 0)
    assert f.running is None and f.waiting is None and f.kv_usage_max is None and f.preemptions_per_s is None
    assert f.ttft_p99 is None


def test_one_missed_scrape_is_not_stale() -> None:
    e = Engine("vllm-0.32").set(running=2)
    snap = store_of({"p": [(0.0, e.render()), (15.0, e.render())], "q": [(0.0, e.render()), (45.0, e.render())]}
                    ).snapshot(at=45.0)
    assert snap.pod("p") is not None and snap.pod("p").up and snap.pod("p").age_s == 30.0  # type: ignore[union-attr]


def test_recovered_target_is_up_again() -> None:
    e = Engine("vllm-0.32").set(running=1)
    snap = store_of({"p": [(0.0, e.render()), (15.0, None), (30.0, e.preempt(6).render())]}).snapshot(window_s=30)
    p = snap.pods[0]
    assert p.up and p.running == 1
    assert p.preemptions_per_s == pytest.approx(6 / 30)  # across the failed scrape


# -- DCGM ------------------------------------------------------------------------------------------

def _dcgm_store(host_label: str = "Hostname") -> list:  # type: ignore[type-arg]
    before = dcgm_page([
        {"util": 80, "xid": 0, "remap_unc": 0, "remap_fail": 0, "pod": "vllm-0"},
        {"util": DCGM_BLANK_INT64, "xid": 0, "sbe": 10, "dbe": 0, "remap_unc": 0, "remap_fail": 0, "crc": 5},
        {"util": 140737488355330.0, "xid": 0, "remap_unc": 0, "remap_fail": 2147483634},
    ], host_label=host_label)
    after = dcgm_page([
        {"util": 87, "xid": 48, "remap_unc": 1, "remap_fail": 0, "pod": "vllm-0"},
        {"util": DCGM_BLANK_INT64, "xid": 0, "sbe": 25, "dbe": 1, "remap_unc": 0, "remap_fail": 0, "crc": 5},
        {"util": 140737488355330.0, "xid": 0, "remap_unc": 0, "remap_fail": 2147483634},
    ], host_label=host_label)
    vllm = Engine("vllm-0.32").render()
    store = store_of({"node-1": [(0.0, before), (15.0, after)], "pod": [(0.0, vllm), (15.0, vllm)]},
                     kinds={"node-1": "dcgm"})
    return list(store.snapshot(window_s=15).gpus)


@pytest.mark.parametrize("host_label", ["Hostname", "hostname"])
def test_dcgm_gpus(host_label: str) -> None:
    g0, g1, g2 = _dcgm_store(host_label)
    assert [g.gpu for g in (g0, g1, g2)] == ["0", "1", "2"]
    assert all(g.node == "node-1" for g in (g0, g1, g2))
    assert g0.uuid == "GPU-0000" and g0.pod == "vllm-0"
    # XID is the last code seen, not a count
    assert g0.xid_last == 48 and g0.xid_changed
    assert g1.xid_last == 0 and not g1.xid_changed
    assert g0.util_percent == 87
    assert g0.remapped_rows_uncorrectable == 1
    # ECC fields are off by default: absent means unknown, never zero
    assert g0.ecc_sbe_volatile is None and g0.ecc_dbe_increase is None and g0.nvlink_crc_increase is None
    assert g1.ecc_sbe_volatile == 25 and g1.ecc_sbe_increase == 15
    assert g1.ecc_dbe_volatile == 1 and g1.ecc_dbe_increase == 1
    assert g1.nvlink_crc_increase == 0
    # sentinels (INT64 blank ≈9.22e18, FP64 not-supported ≈1.4e14, INT32 not-supported) are missing data
    assert g1.util_percent is None
    assert g2.util_percent is None
    assert g2.row_remap_failure is None
    assert g0.row_remap_failure == 0


# -- histogram_quantile ------------------------------------------------------------------------------

INF = math.inf


@pytest.mark.parametrize(("q", "expected"), [
    (0.5, 0.15),  # rank 20 in (0.1, 0.2]: 0.1 + 0.1 * 10/20
    (0.1, 0.04),  # rank 4 in the first bucket, interpolated from 0
    (0.75, 0.2),  # rank 30: the top of (0.1, 0.2]
    (0.9, 0.2),  # rank 36 is in +Inf: clamp at the highest finite bound
    (1.0, 0.2),
])
def test_histogram_quantile_hand_cases(q: float, expected: float) -> None:
    buckets = ((0.1, 10.0), (0.2, 30.0), (INF, 40.0))
    assert histogram_quantile(q, buckets) == pytest.approx(expected)
    assert prom_quantile(q, buckets) == pytest.approx(expected)


@pytest.mark.parametrize("buckets", [
    ((0.1, 10.0), (0.2, 30.0)),  # no +Inf bucket: Prometheus returns NaN
    ((INF, 40.0),),  # only +Inf: nothing to interpolate in
    ((0.1, 0.0), (INF, 0.0)),  # no observations
    (),
])
def test_histogram_quantile_unknown(buckets: tuple[tuple[float, float], ...]) -> None:
    assert histogram_quantile(0.99, buckets) is None
    assert math.isnan(prom_quantile(0.99, buckets))


def test_histogram_quantile_out_of_range_and_negative_bucket() -> None:
    buckets = ((0.1, 10.0), (INF, 10.0))
    assert histogram_quantile(-0.1, buckets) is None and histogram_quantile(1.5, buckets) is None
    assert histogram_quantile(0.5, ((-1.0, 5.0), (0.0, 5.0), (INF, 10.0))) == -1.0


def test_histogram_quantile_unsorted_input() -> None:
    assert histogram_quantile(0.5, ((INF, 40.0), (0.2, 30.0), (0.1, 10.0))) == pytest.approx(0.15)


# Judged by outcome only: Hypothesis' default 200 ms deadline per example and its too-slow health check time the
# example on the wall clock, which a busy 2-core CI machine can exceed with any test.
ANY_SPEED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

_bounds = st.lists(st.floats(min_value=0.001, max_value=1e4, allow_nan=False), min_size=1, max_size=25,
                   unique=True).map(sorted)


@ANY_SPEED
@given(_bounds, st.lists(st.integers(min_value=0, max_value=1000), min_size=26, max_size=26),
       st.floats(min_value=0.001, max_value=1.0))
def test_histogram_quantile_matches_prometheus(bounds: list[float], increments: list[int], q: float) -> None:
    running = 0.0
    buckets: list[tuple[float, float]] = []
    for le, inc in zip([*bounds, INF], increments, strict=False):
        running += inc
        buckets.append((le, running))
    ours = histogram_quantile(q, tuple(buckets))
    theirs = prom_quantile(q, buckets)
    if math.isnan(theirs):
        assert ours is None
    else:
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


@ANY_SPEED
@given(st.lists(st.lists(st.sampled_from([0.003, 0.05, 0.3, 0.9, 3.0, 30.0, 900.0]), max_size=40),
                min_size=1, max_size=5))
def test_merged_quantile_equals_quantile_of_all_observations(pods: list[list[float]]) -> None:
    hists = [Histogram(cumulative(obs, TTFT_NEW), float(len(obs)), sum(obs)) for obs in pods]
    merged = merge(hists)
    assert merged is not None
    everything = [o for obs in pods for o in obs]
    assert merged.count == len(everything)
    expected = prom_quantile(0.99, cumulative(everything, TTFT_NEW))
    got = merged.quantile(0.99)
    if math.isnan(expected):
        assert got is None
    else:
        assert got == pytest.approx(expected)
