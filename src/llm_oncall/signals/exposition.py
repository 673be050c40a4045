"""A fast, selective parser for the Prometheus text format and OpenMetrics.

Why not prometheus_client's parser: it builds a Metric object per family and a
Sample per line for every family on the page, and raises on the first bad line.
A vLLM page has ~600 lines of which the diagnosis needs about a third; a fleet
of 1,000 pods scraped every 15 s must parse in a fraction of a core, and one
malformed page must never take the scrape loop down.  So we skip unwanted
families on the sample name alone (before touching labels), never raise, and
count what we could not read.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Labels = tuple[tuple[str, str], ...]
"""Label pairs sorted by name: hashable, comparable, cheap to build."""


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: Labels
    value: float
    timestamp: float | None = None

    def label(self, key: str, default: str = "") -> str:
        for k, v in self.labels:
            if k == key:
                return v
        return default


@dataclass(slots=True)
class Page:
    """What one scrape of one target yielded."""

    samples: dict[str, list[Sample]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    errors: int = 0
    lines: int = 0
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    """What readers derived from this page (signals/series.py), computed once: a page is not changed after it
    was built, and a scrape's page is read by every window it falls in."""

    def get(self, name: str) -> list[Sample]:
        return self.samples.get(name, [])

    def names(self) -> Iterable[str]:
        return self.samples.keys()


_SUFFIXES = ("_bucket", "_count", "_sum", "_created", "_total", "_gsum", "_gcount")


def family_of(sample_name: str) -> str:
    for suffix in _SUFFIXES:
        if sample_name.endswith(suffix):
            return sample_name[: -len(suffix)]
    return sample_name


_SPECIAL_VALUES = {
    "+Inf": math.inf,
    "Inf": math.inf,
    "+inf": math.inf,
    "inf": math.inf,
    "-Inf": -math.inf,
    "-inf": -math.inf,
    "NaN": math.nan,
    "nan": math.nan,
}


def _parse_float(text: str) -> float:
    special = _SPECIAL_VALUES.get(text)
    if special is not None:
        return special
    # float() accepts "1_000" and " 1"; the exposition formats do not.
    if "_" in text or not text:
        raise ValueError(text)
    return float(text)


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    out: list[str] = []
    i = 0
    n = len(value)
    while i < n:
        ch = value[i]
        if ch == "\\" and i + 1 < n:
            nxt = value[i + 1]
            out.append("\n" if nxt == "n" else nxt)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_SIMPLE_LABELS = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\]*)"\s*(?:,|$)')
_LABEL_SETS: dict[str, Labels] = {}
"""Label text → its parsed label set: a fleet's pages repeat the same label sets page after page."""
_LABEL_SETS_KEPT = 1 << 16


def _parse_labels(text: str, start: int) -> tuple[Labels, int]:
    """Parse `{a="x",b="y"}` starting at the `{`; return labels and the index after `}`."""
    # Fast path: with no backslash on the line every quote opens or closes a value, so
    # the first `"}` ends the label set and a C-level regex can split it.  The quote count
    # proves every value was consumed; anything unusual takes the careful path.
    if "\\" not in text:
        close = text.find('"}', start)
        if close != -1:
            body = text[start + 1 : close + 1]
            known = _LABEL_SETS.get(body)
            if known is not None:
                return known, close + 2
            found = _SIMPLE_LABELS.findall(body)
            if found and body.count('"') == 2 * len(found):
                found.sort()
                labels = tuple(found)
                if len(_LABEL_SETS) >= _LABEL_SETS_KEPT:
                    _LABEL_SETS.clear()
                _LABEL_SETS[body] = labels
                return labels, close + 2
    return _parse_labels_slow(text, start)


def _parse_labels_slow(text: str, start: int) -> tuple[Labels, int]:
    pairs: list[tuple[str, str]] = []
    i = start + 1
    n = len(text)
    while True:
        while i < n and text[i] in " \t,":
            i += 1
        if i >= n:
            raise ValueError("unterminated label set")
        if text[i] == "}":
            i += 1
            break
        if text[i] == '"':
            # OpenMetrics 2 / UTF-8 names: a quoted metric name inside the braces.
            end = _find_quote_end(text, i + 1)
            i = end + 1
            continue
        eq = text.find("=", i)
        if eq < 0:
            raise ValueError("label without =")
        key = text[i:eq].strip()
        if key.startswith('"') and key.endswith('"') and len(key) >= 2:
            key = key[1:-1]
        j = eq + 1
        while j < n and text[j] == " ":
            j += 1
        if j >= n or text[j] != '"':
            raise ValueError("label value not quoted")
        end = _find_quote_end(text, j + 1)
        pairs.append((key, _unescape(text[j + 1 : end])))
        i = end + 1
    pairs.sort()
    return tuple(pairs), i


def _find_quote_end(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            return i
        i += 1
    raise ValueError("unterminated quoted string")


@functools.lru_cache(maxsize=4096)
def _may_hold_wanted(family: str, wanted: frozenset[str]) -> bool:
    return any(name.startswith(family) for name in wanted)


def _skippable(chunk: str, family: str) -> bool:
    """True when every line of a `# HELP family` block is a comment or a `family…` sample."""
    nl = chunk.find("\n")
    if nl == -1:
        return True
    body = chunk[nl:].rstrip("\n")
    return body.count("\n") == body.count("\n" + family) + body.count("\n#")


def parse(text: str, wanted: frozenset[str] | None = None) -> Page:
    """Parse an exposition page, keeping only sample names in `wanted` (all when None).

    Never raises: unreadable lines are counted in `Page.errors`.
    """
    page = Page()
    if wanted is None or "\n# HELP " not in text:
        _parse_lines(text.split("\n"), wanted, page)
        return page
    # Exporters write one `# HELP` block per family: a block of a family we do not want is
    # skipped whole, after C-speed counting proves it holds nothing but that family.
    chunks = text.split("\n# HELP ")
    _parse_lines(chunks[0].split("\n"), wanted, page)
    for chunk in chunks[1:]:
        end = len(chunk)
        for sep in (" ", "\n"):
            i = chunk.find(sep)
            if i != -1 and i < end:
                end = i
        family = chunk[:end]
        if not _may_hold_wanted(family, wanted) and _skippable(chunk, family):
            page.lines += chunk.count("\n") + 1
            continue
        _parse_lines(("# HELP " + chunk).split("\n"), wanted, page)
    return page


def _parse_lines(lines: list[str], wanted: frozenset[str] | None, page: Page) -> None:
    samples = page.samples
    types = page.types
    errors = 0
    count = 0
    for line in lines:
        count += 1
        if not line:
            continue
        first = line[0]
        if first in " \t" or line[-1] in " \t\r":
            line = line.strip()
            if not line:
                continue
            first = line[0]
        if first == "#":
            if line.startswith("# TYPE "):
                parts = line.split(None, 3)
                if len(parts) == 4:
                    types[parts[2]] = parts[3].strip()
            continue
        try:
            brace = line.find("{")
            space = line.find(" ")
            if brace != -1 and (space == -1 or brace < space):
                name = line[:brace]
                if wanted is not None and name not in wanted:
                    continue
                labels, after = _parse_labels(line, brace)
                rest = line[after:].split()
            else:
                if space == -1:
                    raise ValueError("no value")
                name = line[:space]
                if wanted is not None and name not in wanted:
                    continue
                labels = ()
                rest = line[space + 1 :].split()
            if not name:
                raise ValueError("no name")
            if not rest:
                raise ValueError("no value")
            value = _parse_float(rest[0])
            timestamp: float | None = None
            # OpenMetrics exemplars follow a '#'; the timestamp, if any, precedes it.
            if len(rest) > 1 and rest[1] != "#":
                timestamp = _parse_float(rest[1])
        except (ValueError, IndexError):
            errors += 1
            continue
        bucket = samples.get(name)
        if bucket is None:
            samples[name] = [Sample(name, labels, value, timestamp)]
        else:
            bucket.append(Sample(name, labels, value, timestamp))
    page.errors += errors
    page.lines += count
