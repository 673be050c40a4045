"""Sizing the long-context pool from the prompt-length histograms (vLLM's 1-2-5 token buckets)."""

from __future__ import annotations

import math

import pytest

from llm_oncall.actions.pools import HEADROOM, long_pool_size, long_share
from llm_oncall.signals.series import Histogram
from llm_oncall.signals.snapshot import FleetSnapshot, PodSnapshot, Snapshot

BOUNDS = (1000.0, 2000.0, 5000.0, 10000.0, 20000.0, 50000.0, 100000.0, math.inf)


def _hist(per_bucket: dict[float, tuple[int, float]]) -> Histogram:
    """{upper bound: (requests, tokens)} → a cumulative histogram."""
    cum, out = 0.0, []
    for le in BOUNDS:
        cum += per_bucket.get(le, (0, 0.0))[0]
        out.append((le, cum))
    return Histogram(tuple(out), cum, sum(t for _, t in per_bucket.values()))


def _snap(*hists: Histogram) -> Snapshot:
    pods = tuple(PodSnapshot(name=f"p{i}", labels={}, up=True, histograms={"prompt_len": h})
                 for i, h in enumerate(hists))
    return Snapshot(t=0.0, window_s=30.0, pods=pods, fleet=FleetSnapshot(pods_total=len(pods), pods_up=len(pods)))


def test_share_of_tokens_above_the_threshold() -> None:
    short = _hist({1000.0: (100, 80_000.0)})
    long = _hist({50000.0: (10, 327_000.0)})  # 20-50 k: log-uniform mean ≈ 32.7 k
    share = long_share([_snap(short, long)], 16384)
    assert share is not None
    assert share.requests == pytest.approx(10 / 110)
    assert share.tokens == pytest.approx(327_000 / 407_000, rel=0.02)
    assert share.window_requests == 110


def test_a_bucket_across_the_threshold_is_split_log_uniformly() -> None:
    h = _hist({1000.0: (90, 60_000.0), 20000.0: (10, 140_000.0)})
    share = long_share([_snap(h)], 16384)
    assert share is not None
    frac = math.log(20000 / 16384) / math.log(2)
    assert share.requests == pytest.approx(10 * frac / 100)


def test_pool_size_has_headroom_and_at_least_one_pod() -> None:
    h = _hist({1000.0: (100, 80_000.0), 50000.0: (10, 327_000.0)})
    share = long_share([_snap(h)], 16384)
    assert share is not None
    assert long_pool_size(8, share) == math.ceil(8 * share.tokens * HEADROOM)
    assert long_pool_size(8, None) == 2  # no histogram: a quarter of the pods
    tiny = long_share([_snap(_hist({1000.0: (1000, 800_000.0), 20000.0: (1, 17_000.0)}))], 16384)
    assert long_pool_size(8, tiny) == 1
    assert long_share([], 16384) is None
