"""`bench ingest`: our selective parser vs prometheus_client's, same pages, same run."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from llm_oncall.signals.source import parse_for

FLEET_PODS = 1000
FLEET_INTERVAL_S = 15.0


@dataclass(frozen=True, slots=True)
class IngestResult:
    pages: int
    bytes_per_page: float
    ours_pages_per_s: float
    prometheus_client_pages_per_s: float

    @property
    def ratio(self) -> float:
        return self.ours_pages_per_s / self.prometheus_client_pages_per_s

    @property
    def fleet_core_fraction(self) -> float:
        """Share of one core needed to parse 1,000 pods every 15 s."""
        return FLEET_PODS / FLEET_INTERVAL_S / self.ours_pages_per_s

    def to_json(self) -> dict[str, float]:
        return {
            "pages": self.pages,
            "bytes_per_page": self.bytes_per_page,
            "ours_pages_per_s": self.ours_pages_per_s,
            "prometheus_client_pages_per_s": self.prometheus_client_pages_per_s,
            "ratio": self.ratio,
            "fleet_1000_pods_15s_core_fraction": self.fleet_core_fraction,
        }


def bundled_pages() -> list[str]:
    root = resources.files("llm_oncall") / "data" / "pages"
    return [p.read_text(encoding="utf-8") for p in sorted(root.iterdir(), key=lambda p: p.name)
            if p.name.endswith(".prom")]


def read_pages(files: Sequence[Path]) -> list[str]:
    return [f.read_text(encoding="utf-8", errors="replace") for f in files]


def _throughput(fn: Callable[[str], object], pages: Sequence[str], seconds: float) -> float:
    done = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for page in pages:
            fn(page)
        done += len(pages)
        now = time.perf_counter()
        if now >= deadline:
            return done / (now - start)


def _reference(text: str) -> object:
    return list(text_string_to_metric_families(text))


def run(pages: Sequence[str], seconds: float = 2.0) -> IngestResult:
    if not pages:
        raise ValueError("no pages to parse")
    # Interleave the two so a noisy neighbour hurts both alike.
    ours: list[float] = []
    ref: list[float] = []
    for _ in range(2):
        ours.append(_throughput(lambda t: parse_for("vllm", t), pages, seconds / 4))
        ref.append(_throughput(_reference, pages, seconds / 4))
    return IngestResult(
        pages=len(pages),
        bytes_per_page=sum(len(p) for p in pages) / len(pages),
        ours_pages_per_s=max(ours),
        prometheus_client_pages_per_s=max(ref),
    )
