"""The one seam for telemetry: a `Source` yields batches of observations.

Direct scraping, Prometheus, a capture bundle and the simulator all implement it,
so everything downstream (series, Snapshot, diagnosis) is the same code for all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from llm_oncall.signals.catalog import WANTED_ALL, Exporter, wanted_names
from llm_oncall.signals.events import Event
from llm_oncall.signals.exposition import Page, parse

TARGET_KINDS = ("vllm", "dcgm", "kube", "gateway", "prober")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")

_WANTED = {
    "vllm": wanted_names(Exporter.VLLM),
    "dcgm": wanted_names(Exporter.DCGM),
    "kube": wanted_names(Exporter.KUBE),
}


def valid_name(name: str) -> bool:
    """Target names become directory names and may reach commands: keep them boring."""
    return bool(_NAME_RE.match(name)) and name not in (".", "..")


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    url: str | None = None
    kind: str = "vllm"
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not valid_name(self.name):
            raise ValueError(f"invalid target name {self.name!r}: use letters, digits, '.', '_' or '-'")
        if self.kind not in TARGET_KINDS:
            raise ValueError(f"invalid target kind {self.kind!r}; one of {', '.join(TARGET_KINDS)}")


@dataclass(frozen=True, slots=True)
class Observation:
    target: Target
    t: float
    page: Page | None
    error: str | None = None
    text: str | None = None
    """The raw page, kept only when a capture is being written."""


@dataclass(slots=True)
class Batch:
    observations: list[Observation] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    logs: dict[str, list[str]] = field(default_factory=dict)
    """New log lines by file or target name."""
    problems: list[str] = field(default_factory=list)
    """Non-fatal input problems (malformed files, skipped records) for the user."""


class Source(Protocol):
    """Anything that can produce telemetry batches.  `collect` may block for one round."""

    def collect(self) -> Batch: ...


def parse_for(kind: str, text: str) -> Page:
    """Parse a page keeping only what this kind of target needs (everything for small pages)."""
    wanted = _WANTED.get(kind)
    if kind == "vllm" and wanted is not None:
        return parse(text, wanted)
    if wanted is None:
        return parse(text, None)
    return parse(text, wanted | WANTED_ALL)
