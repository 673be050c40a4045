"""The long-context pool of `route_by_length`, sized from the prompt-length histograms the engines export.

Prompts above the threshold are prefill-bound: their share of the fleet's prompt tokens is the share of the
fleet's work they bring. The pool takes that share of the pods (with headroom) and, being dedicated, is new
capacity: the workload grows by its size, so the short pool keeps the pods it had before the shift.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from llm_oncall.signals.series import Histogram, merge
from llm_oncall.signals.snapshot import Snapshot

HEADROOM = 1.2


@dataclass(frozen=True)
class LongShare:
    tokens: float
    """Share of prompt tokens in prompts above the threshold (0–1)."""
    requests: float
    """Share of requests above the threshold."""
    window_requests: float
    """Requests the estimate rests on."""


def long_share(snapshots: Sequence[Snapshot], threshold: int) -> LongShare | None:
    """From the latest window's `vllm:request_prompt_tokens` histograms of all pods; None without data.

    A bucket that straddles the threshold is split as if lengths were log-uniform inside it (the token
    histograms are 1-2-5 per decade), and so is each bucket's token mean."""
    snap = snapshots[-1] if snapshots else None
    if snap is None:
        return None
    h = merge(p.histograms["prompt_len"] for p in snap.pods if "prompt_len" in p.histograms)
    if h is None or h.count <= 0 or h.total <= 0:
        return None
    req, tok = _above(h, float(threshold))
    return LongShare(tokens=min(1.0, tok / h.total), requests=min(1.0, req / h.count), window_requests=h.count)


def _above(h: Histogram, t: float) -> tuple[float, float]:
    requests = tokens = 0.0
    prev_le, prev_cum = 0.0, 0.0
    for le, cum in sorted(h.buckets):
        n = cum - prev_cum
        lo, hi = prev_le, (le if math.isfinite(le) else max(2.0 * prev_le, t))
        prev_le, prev_cum = le, cum
        if n <= 0 or hi <= t:
            continue
        a = max(lo, t)
        if lo > 0 and hi > lo:
            frac = math.log(hi / a) / math.log(hi / lo)
            mean = (hi - a) / math.log(hi / a) if hi > a else a
        else:
            frac = (hi - a) / (hi - lo) if hi > lo else 1.0
            mean = (hi + a) / 2
        requests += n * frac
        tokens += n * frac * mean
    return requests, tokens


def long_pool_size(pods: int, share: LongShare | None) -> int:
    """Pods for the long pool: the long prompts' token share of the fleet, with headroom; at least one."""
    if share is None or pods <= 0:
        return max(1, math.ceil(pods * 0.25))
    return max(1, math.ceil(pods * share.tokens * HEADROOM))
