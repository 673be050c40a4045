"""Histograms with vLLM's exact bucket layouts, kept as plain lists so observing is one bisect."""

from __future__ import annotations

from bisect import bisect_left

# vLLM 0.8.4+ defaults (vllm/v1/metrics/buckets.py); `le` is rendered as a float string.
TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
ITL_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
    5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)
REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)
ITERATION_TOKENS_BUCKETS: tuple[float, ...] = (
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
)
PARAMS_N_BUCKETS: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 20.0)
NUM_PREEMPTIONS_BUCKETS: tuple[float, ...] = (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0)
HTTP_HIGHR_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5,
    5.0, 7.5, 10.0, 30.0, 60.0,
)
HTTP_FEW_BUCKETS: tuple[float, ...] = (0.1, 0.5, 1.0)
# V0 (0.6.x) layouts: narrower, from before the 0.8.4 widening.
V0_TTFT_BUCKETS: tuple[float, ...] = TTFT_BUCKETS[:16]
V0_ITL_BUCKETS: tuple[float, ...] = ITL_BUCKETS[:13]
V0_REQUEST_LATENCY_BUCKETS: tuple[float, ...] = REQUEST_LATENCY_BUCKETS[:15]
V0_ITERATION_TOKENS_BUCKETS: tuple[float, ...] = (
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8096.0,
)


def request_tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """1-2-5 series up to max_model_len, as vLLM builds it for the token histograms."""
    out: list[float] = []
    mantissa = (1, 2, 5)
    exponent = 0
    while True:
        for m in mantissa:
            v = m * 10**exponent
            if v > max_model_len:
                return tuple(out)
            out.append(float(v))
        exponent += 1


class Histogram:
    """Non-cumulative bucket counts; the renderer cumulates once per scrape, not per observation."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def observe_many(self, value: float, weight: int) -> None:
        if weight <= 0:
            return
        self.counts[bisect_left(self.bounds, value)] += weight
        self.sum += value * weight
        self.count += weight

    def cumulative(self) -> list[int]:
        out: list[int] = []
        acc = 0
        for c in self.counts:
            acc += c
            out.append(acc)
        return out
