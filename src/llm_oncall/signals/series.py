"""Per-target ring buffers and exact windowed arithmetic.

Rules, all of which naive monitors get wrong:
- counters are turned into increases over a window, never read as lifetime totals;
- a counter that goes down was reset (the process restarted): the new value is the
  increase since the reset, never a negative delta;
- histogram buckets are subtracted per bucket and merged by summing buckets across
  series and pods; quantiles come from the merged buckets (never averaged p99s);
- a target whose scrape failed is unknown (None), not zero.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.signals.catalog import DCGM_SENTINELS, Exporter, Kind, Signal, escape, is_router_series
from llm_oncall.signals.exposition import Labels, Page, Sample


@dataclass(frozen=True, slots=True)
class Scrape:
    t: float
    page: Page | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.page is not None


@dataclass(frozen=True, slots=True)
class Resolved:
    """The spelling of a signal a page actually uses, and its samples by suffix."""

    spelling: str
    samples: Mapping[str, list[Sample]]
    scale: float


def _memo_key(kind: str, sig: Signal, match: Mapping[str, str] | None) -> tuple[str, str, Any]:
    return (kind, sig.key, tuple(match.items()) if match else None)


def resolve(page: Page, sig: Signal) -> Resolved | None:
    key = ("resolve", sig.key, None)
    hit = page.memo.get(key)
    if hit is not None and hit[0] is sig:
        res: Resolved | None = hit[1]
        return res
    res = _resolve(page, sig)
    page.memo[key] = (sig, res)
    return res


def _resolve(page: Page, sig: Signal) -> Resolved | None:
    for spelling in sig.spellings:
        for base in (spelling.name, escape(spelling.name)):
            if sig.kind is Kind.HISTOGRAM:
                buckets = page.get(base + "_bucket")
                if buckets:
                    return Resolved(base, {
                        "_bucket": buckets, "_count": page.get(base + "_count"),
                        "_sum": page.get(base + "_sum"), "_created": page.get(base + "_created"),
                    }, spelling.scale)
            else:
                samples = page.get(base)
                if samples:
                    created: list[Sample] = []
                    if sig.kind is Kind.COUNTER and base.endswith("_total"):
                        created = page.get(base[: -len("_total")] + "_created")
                    return Resolved(base, {"": samples, "_created": created}, spelling.scale)
    return None


def _usable(samples: Iterable[Sample], sig: Signal, match: Mapping[str, str] | None) -> Iterator[Sample]:
    """The samples that carry a value for `sig`: not NaN, not a DCGM sentinel, not a router's, matching `match`."""
    dcgm = sig.exporter is Exporter.DCGM
    vllm = sig.exporter is Exporter.VLLM
    for sample in samples:
        value = sample.value
        if math.isnan(value) or (dcgm and value in DCGM_SENTINELS):
            continue
        if vllm and is_router_series(sample.labels):
            continue
        if match:
            labels = dict(sample.labels)
            if any(labels.get(key) != want for key, want in match.items()):
                continue
        yield sample


def vector(page: Page, sig: Signal, match: Mapping[str, str] | None = None) -> dict[Labels, float] | None:
    """Gauge or counter values by label set; None when the page lacks the signal entirely (read-only: the dict is
    the page's memo)."""
    key = _memo_key("vector", sig, match)
    hit = page.memo.get(key)
    if hit is not None and hit[0] is sig:
        vec: dict[Labels, float] | None = hit[1]
        return vec
    res = resolve(page, sig)
    vec = None if res is None else {s.labels: s.value * res.scale for s in _usable(res.samples[""], sig, match)}
    page.memo[key] = (sig, vec)
    return vec


def aggregate(values: Iterable[float], sig: Signal) -> float | None:
    vals = list(values)
    if not vals:
        return None
    if sig.agg.value == "sum":
        return sum(vals)
    if sig.agg.value == "max":
        return max(vals)
    return sum(vals) / len(vals)


def gauge(page: Page, sig: Signal, match: Mapping[str, str] | None = None) -> float | None:
    vec = vector(page, sig, match)
    return None if vec is None else aggregate(vec.values(), sig)


def _increase(prev: Mapping[Labels, float], cur: Mapping[Labels, float]) -> float:
    total = 0.0
    for labels, value in cur.items():
        before = prev.get(labels)
        if before is None:
            # A label set that appears mid-window started at zero (vLLM pre-creates most
            # series; the rest are created lazily on their first increment).
            total += value if prev else 0.0
        elif value >= before:
            total += value - before
        else:
            total += value  # counter reset: it restarted from zero
    return total


@dataclass(frozen=True, slots=True)
class Histogram:
    """Bucket increases (cumulative, by upper bound) of one or more merged series."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    total: float

    def quantile(self, q: float) -> float | None:
        return histogram_quantile(q, self.buckets)

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count > 0 else None


def merge(histograms: Iterable[Histogram]) -> Histogram | None:
    acc: dict[float, float] = {}
    count = 0.0
    total = 0.0
    seen = False
    for h in histograms:
        seen = True
        for le, v in h.buckets:
            acc[le] = acc.get(le, 0.0) + v
        count += h.count
        total += h.total
    if not seen:
        return None
    return Histogram(tuple(sorted(acc.items())), count, total)


def histogram_quantile(q: float, buckets: tuple[tuple[float, float], ...]) -> float | None:
    """Prometheus' histogram_quantile over cumulative (le, count) pairs."""
    if not buckets or not 0.0 <= q <= 1.0:
        return None
    ordered = sorted(buckets)
    if ordered[-1][0] != math.inf:
        return None
    total = ordered[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for i, (le, count) in enumerate(ordered):
        if count >= rank:
            if le == math.inf:
                # Clamp at the top finite bucket, as Prometheus does.
                return ordered[i - 1][0] if i > 0 else None
            if i == 0 and le <= 0:
                return le
            width = le - prev_le
            inside = count - prev_count
            if inside <= 0:
                return le
            return prev_le + width * (rank - prev_count) / inside
        prev_le, prev_count = le, count
    return ordered[-2][0] if len(ordered) > 1 else None


def _hist_state(page: Page, sig: Signal, match: Mapping[str, str] | None
                ) -> dict[Labels, tuple[dict[float, float], float, float]] | None:
    """Buckets, count and sum by series (read-only: the page's memo; a page is the later end of one pair and
    the earlier end of the next, in every window it falls in)."""
    key = _memo_key("hist", sig, match)
    hit = page.memo.get(key)
    if hit is not None and hit[0] is sig:
        state: dict[Labels, tuple[dict[float, float], float, float]] | None = hit[1]
        return state
    state = _hist_state_of(page, sig, match)
    page.memo[key] = (sig, state)
    return state


def _hist_state_of(page: Page, sig: Signal, match: Mapping[str, str] | None
                   ) -> dict[Labels, tuple[dict[float, float], float, float]] | None:
    res = resolve(page, sig)
    if res is None:
        return None
    out: dict[Labels, tuple[dict[float, float], float, float]] = {}
    for s in _usable(res.samples["_bucket"], sig, match):
        le_text = ""
        rest: list[tuple[str, str]] = []
        for k, v in s.labels:
            if k == "le":
                le_text = v
            else:
                rest.append((k, v))
        try:
            le = float(le_text)
        except ValueError:
            continue
        key = tuple(rest)
        entry = out.get(key)
        if entry is None:
            entry = ({}, 0.0, 0.0)
            out[key] = entry
        entry[0][le] = s.value
    counts = {s.labels: s.value for s in res.samples["_count"]}
    sums = {s.labels: s.value for s in res.samples["_sum"]}
    for key, (buckets, _, _) in list(out.items()):
        count = counts.get(key, buckets.get(math.inf, 0.0))
        out[key] = (buckets, count, sums.get(key, 0.0))
    return out


_PAGE_ID = "page-id"
"""A page's memo holds a mark of its own (a bare object): a later page's memo names its predecessor by that mark
(never by the page, so no chain of pages is kept alive, and never by id, which a freed page's successor may
reuse)."""


def histogram_increase(prev: Page, cur: Page, sig: Signal,
                       match: Mapping[str, str] | None = None) -> Histogram | None:
    """Bucket increases from `prev` to `cur` (computed once per pair: a pair falls in consecutive windows)."""
    mark = prev.memo.get(_PAGE_ID)
    if mark is None:
        mark = prev.memo[_PAGE_ID] = object()
    key = _memo_key("increase", sig, match)
    hit = cur.memo.get(key)
    if hit is not None and hit[0] is mark and hit[1] is sig:
        known: Histogram | None = hit[2]
        return known
    h = _histogram_increase(prev, cur, sig, match)
    cur.memo[key] = (mark, sig, h)
    return h


def _histogram_increase(prev: Page, cur: Page, sig: Signal, match: Mapping[str, str] | None) -> Histogram | None:
    before = _hist_state(prev, sig, match)
    after = _hist_state(cur, sig, match)
    if after is None or before is None:
        return None
    acc: dict[float, float] = {}
    count = 0.0
    total = 0.0
    for key, (buckets, c, s) in after.items():
        old = before.get(key)
        base: dict[float, float]
        if old is None or c < old[1]:
            # A new series, or a reset (the process restarted): it counted from zero.
            base, old_c, old_s = {}, 0.0, 0.0
        else:
            base, old_c, old_s = old
        for le, v in buckets.items():
            acc[le] = acc.get(le, 0.0) + max(0.0, v - base.get(le, 0.0))
        count += max(0.0, c - old_c)
        total += max(0.0, s - old_s)
    return Histogram(tuple(sorted(acc.items())), count, total)


MEMO_SCRAPES = 4
"""The newest scrapes of a target whose pages keep their memo (a live window spans two or three scrapes)."""


@dataclass
class TargetSeries:
    """The recent scrapes of one target, newest last."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    capacity: int = 240
    scrapes: deque[Scrape] = field(default_factory=deque)

    def add(self, scrape: Scrape) -> bool:
        """Append a newer scrape; one at or before the newest is dropped (a source that re-reads
        an overlapping window, e.g. Prometheus range queries, repeats what we already have)."""
        if self.scrapes and scrape.t <= self.scrapes[-1].t:
            return False
        self.scrapes.append(scrape)
        while len(self.scrapes) > self.capacity:
            self.scrapes.popleft()
        if len(self.scrapes) > MEMO_SCRAPES:
            # Past the live windows: what readers derived from that page is memory only (recomputed if asked).
            old = self.scrapes[-MEMO_SCRAPES - 1].page
            if old is not None:
                old.memo.clear()
        return True

    def ok_in_window(self, start: float, end: float) -> list[Scrape]:
        """Successful scrapes with start <= t <= end, plus the last one before start as anchor."""
        anchor: Scrape | None = None
        inside: list[Scrape] = []
        for s in self.scrapes:
            if s.page is None:
                continue
            if s.t < start:
                anchor = s
            elif s.t <= end:
                inside.append(s)
        if anchor is not None and (not inside or inside[0].t > start):
            inside.insert(0, anchor)
        return inside

    def latest(self, end: float | None = None) -> Scrape | None:
        for s in reversed(self.scrapes):
            if end is None or s.t <= end:
                return s
        return None

    def latest_ok(self, end: float | None = None) -> Scrape | None:
        for s in reversed(self.scrapes):
            if s.page is not None and (end is None or s.t <= end):
                return s
        return None


def pairs(scrapes: list[Scrape]) -> Iterator[tuple[Page, Page]]:
    for a, b in itertools.pairwise(scrapes):
        assert a.page is not None and b.page is not None
        yield a.page, b.page


def counter_increase(scrapes: list[Scrape], sig: Signal, match: Mapping[str, str] | None = None,
                     keep: Callable[[Labels], bool] | None = None) -> float | None:
    """Increase of a counter across consecutive successful scrapes, resets handled; over the label sets `keep`
    accepts when given (e.g. some HTTP handlers, not their 4xx)."""
    if len(scrapes) < 2:
        return None
    total = 0.0
    seen = False
    prev_vec: dict[Labels, float] | None = None
    for s in scrapes:
        assert s.page is not None
        vec = vector(s.page, sig, match)
        if vec is None:
            continue
        if keep is not None:
            vec = {labels: v for labels, v in vec.items() if keep(labels)}
        if prev_vec is not None:
            total += _increase(prev_vec, vec)
            seen = True
        prev_vec = vec
    return total if seen else None


def window_histogram(scrapes: list[Scrape], sig: Signal, match: Mapping[str, str] | None = None
                     ) -> Histogram | None:
    parts = [h for a, b in pairs(scrapes) if (h := histogram_increase(a, b, sig, match)) is not None]
    return merge(parts)
