"""The one result type every evidence parser returns, plus text helpers the parsers share."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from llm_oncall.incident_ids import ALL

INCIDENT_IDS: frozenset[str] = frozenset(ALL)

# Long lines are cut before any regex sees them: it bounds the cost of every pattern on adversarial input
# (a tqdm bar rewritten thousands of times on one line, a minified blob) without losing the log prefix
# that carries the evidence.
MAX_LINE_CHARS = 8192

JsonValue = Any  # facts hold JSON-compatible values only (str, int, float, bool, None, lists, dicts)

SEVERITIES: tuple[str, ...] = ("info", "warning", "error", "critical")
"""Lowest first. How bad the evidence is for the node or the service, not the log level it was printed at."""
SEVERITY_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}

CATEGORIES: tuple[str, ...] = (
    "gpu-memory",  # ECC, row remap, page/resource retirement           → gpu-ecc
    "gpu-hardware",  # fallen off the bus, GSP, init failures, PCIe     → gpu-ecc
    "nvlink",  # NVLink / NVSwitch faults                                → engine-hang
    "hang",  # collective timeouts, stuck stacks, stalled engine        → engine-hang
    "cuda-graph",  # CUDA-graph capture failures                          → cuda-graph-crash
    "kv-pressure",  # KV cache full, preemptions, long queues            → kv-capacity
    "bad-output",  # garbage model output                                 → bad-model-rollout
    "other-failure",  # a real failure that is none of the incidents (OOM, dead peer, config error)
    "benign",  # healthy output and known harmless look-alikes
    "unknown",  # nothing recognised, or error lines in a format the catalogue does not know
)
"""What a finding says about a file, one step finer than the incident hint (gpu-memory vs gpu-hardware)."""

_CATEGORY_OF_HINT = {
    "gpu-ecc": "gpu-hardware",
    "engine-hang": "hang",
    "cuda-graph-crash": "cuda-graph",
    "kv-capacity": "kv-pressure",
    "bad-model-rollout": "bad-output",
}


@dataclass(frozen=True)
class Finding:
    """What one file (or one parser's view of it) shows.

    ``confidence`` is how sure the parser is of ``kind``/``incident_hint``; a benign finding can be confident.
    ``lines`` are 1-based line numbers of the evidence lines, so a report can quote them.
    ``severity`` (info < warning < error < critical) orders findings of one file: the file is classified by
    its most severe finding. ``category`` is the class of evidence (see CATEGORIES); both default from the
    hint and the benign flag when a parser does not set them. ``findings`` (on the file-level result only)
    lists every finding of the file, most severe first.
    """

    file: str
    kind: str
    benign: bool
    incident_hint: str | None
    confidence: float
    facts: dict[str, JsonValue] = field(default_factory=dict)
    lines: tuple[int, ...] = ()
    parser: str = ""
    severity: str = ""
    category: str = ""
    findings: tuple[Finding, ...] = ()

    def __post_init__(self) -> None:
        if self.incident_hint is not None and self.incident_hint not in INCIDENT_IDS:
            raise ValueError(f"unknown incident id {self.incident_hint!r}")
        # Clamp rather than reject: confidences are computed from counts and must never break a report.
        object.__setattr__(self, "confidence", round(min(1.0, max(0.0, float(self.confidence))), 3))
        if not self.severity:
            object.__setattr__(self, "severity", "info" if self.benign else "error")
        elif self.severity not in SEVERITY_RANK:
            raise ValueError(f"unknown severity {self.severity!r}")
        if not self.category:
            object.__setattr__(self, "category", default_category(self.kind, self.benign, self.incident_hint))
        elif self.category not in CATEGORIES:
            raise ValueError(f"unknown category {self.category!r}")

    def summary(self) -> dict[str, JsonValue]:
        """The short form a file-level result lists for each of its findings."""
        return {
            "kind": self.kind,
            "category": self.category,
            "benign": self.benign,
            "incident_hint": self.incident_hint,
            "severity": self.severity,
            "confidence": self.confidence,
            "lines": list(self.lines),
            "parser": self.parser,
            "facts": dict(self.facts),
        }

    def to_json(self) -> dict[str, JsonValue]:
        """The documented keys (docs/evidence.md: file, kind, benign, incident_hint, confidence, facts), then
        the rest."""
        short = self.summary()
        return {
            "file": self.file,
            **{k: short[k] for k in ("kind", "benign", "incident_hint", "confidence", "facts", "lines", "parser",
                                     "severity", "category")},
            "findings": [f.summary() for f in self.findings],
        }

    def replace(self, **changes: Any) -> Finding:
        return dataclasses.replace(self, **changes)

def default_category(kind: str, benign: bool, hint: str | None) -> str:
    if kind == "unknown":
        return "unknown"
    if benign:
        return "benign"
    if hint is None:
        return "other-failure"
    return _CATEGORY_OF_HINT.get(hint, "other-failure")


def unknown(file: str) -> Finding:
    return Finding(file=file, kind="unknown", benign=True, incident_hint=None, confidence=0.0)


def strength(f: Finding) -> tuple[int, int, int, float, int]:
    """Sort key for "strongest finding": a problem beats a benign reading; a finding another one explains
    (a capture error caused by a dead peer) steps back; then severity, confidence, evidence."""
    explained = bool(f.facts.get("explained_by"))
    return (0 if f.benign else 1, 0 if explained else 1, SEVERITY_RANK.get(f.severity, 0), f.confidence,
            len(f.lines))


def strongest(findings: Iterable[Finding]) -> Finding | None:
    best: Finding | None = None
    for f in findings:
        if best is None or strength(f) > strength(best):
            best = f
    return best


@lru_cache(maxsize=4)
def _split(text: str) -> tuple[str, ...]:
    return tuple(line[:MAX_LINE_CHARS] for line in text.splitlines())


def split_lines(text: str) -> tuple[str, ...]:
    """Lines of ``text``, each capped at MAX_LINE_CHARS; cached: every parser asks for the same text."""
    return _split(text)


CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
"""A run of Chinese, Japanese or Korean characters: kana, the ideographs (with extension A) and Hangul syllables."""
_INT = re.compile(r"[-+]?\d{1,19}")


def to_int(value: str | None) -> int | None:
    """An integer from a counter cell ("12", " 0 ", "N/A", "[N/A]"); None when there is no number."""
    if value is None:
        return None
    m = _INT.search(value)
    return int(m.group(0)) if m else None


def line_numbers(indices: Iterable[int], limit: int = 50) -> tuple[int, ...]:
    """1-based, sorted, unique, capped: a report quotes evidence lines, it does not reprint the file."""
    return tuple(sorted({i + 1 for i in indices}))[:limit]


def compact(facts: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """Drops None and empty containers so facts show what was found, not what was looked for."""
    out: dict[str, JsonValue] = {}
    for k, v in facts.items():
        if v is None or (isinstance(v, list | dict | tuple | set) and not v):
            continue
        out[k] = v
    return out
