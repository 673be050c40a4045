"""A failure-report reader: whether a document reports that something malfunctioned, separately from which failure.

The catalogue reads messages it knows; a failure told in prose ("after ~1hr it throws", "the server gets stuck",
"显存不足", "se queda atascado") is read as nothing. This module reads a document sentence by sentence for the
wordings with which a person reports a malfunction (knowledge as data: ``catalog/failure_report.yaml``, with its
provenance) and for the marks of a document that only names failures (a change document, a how-to or reference
page, a thread whose problem is solved: described.py). Which failure it is, is the word-level prior's ranking of the
failure classes (prior.py); the two together are the fallback of ``prior.Fallback`` when ``reader`` is set
(docs/evidence.md, "Round 3r").

A line reports a failure when a ``report`` pattern matches it, no ``not_an_event`` pattern (a condition, a question,
a negation, advice) matches the line before the report's words, the line does not end in a question mark, and the
line is not inside a fence and not a log line (a log's own words are the catalogue's to read). A bug template's
report heading ("### Describe the bug", also one that asks: "### What happened?") counts as one line. The document
reports a failure when at least ``min_lines`` lines do and it carries none of the marks of a change document, a
how-to / reference page or a solved thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from llm_oncall.evidence import described, paste

LEXICON_PATH = Path(__file__).parent / "catalog" / "failure_report.yaml"
MAX_LINES = 5000
MAX_LINE_CHARS = 400


@dataclass(frozen=True)
class Lexicon:
    report: tuple[tuple[str, re.Pattern[str]], ...]  # (name, pattern)
    not_an_event: re.Pattern[str]
    source: str
    classes: tuple[tuple[str, re.Pattern[str]], ...] = ()  # (failure class, its cues)


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    doc = yaml.safe_load(LEXICON_PATH.read_text(encoding="utf-8"))
    report = tuple((str(k), re.compile(str(v).strip(), re.IGNORECASE | re.MULTILINE))
                   for k, v in sorted(doc["report"].items()))
    classes = tuple((str(k), re.compile(str(v).strip(), re.IGNORECASE))
                    for k, v in sorted((doc.get("classes") or {}).items()))
    return Lexicon(report, re.compile(str(doc["not_an_event"]).strip(), re.IGNORECASE), str(doc.get("source", "")),
                   classes)


@dataclass(frozen=True)
class Report:
    """What the reader found: the 0-based lines that report a failure (with the pattern that matched each) and the
    document's marks of a text that only names failures."""

    lines: tuple[int, ...]
    patterns: tuple[str, ...]
    change_document: bool
    guide: bool
    resolved: bool

    @property
    def names_only(self) -> bool:
        return self.change_document or self.guide or self.resolved

    def reports(self, min_lines: int, headings: bool = True) -> bool:
        """At least ``min_lines`` report lines and no mark of a text that only names failures; with ``headings``
        False a bug template's heading does not count alone (at least one sentence must report the failure)."""
        if self.names_only or len(self.lines) < min_lines:
            return False
        return headings or any(p != "report_heading" for p in self.patterns)


def asks(line: str) -> bool:
    """The line ends in a question mark (Latin or CJK): it asks, it does not report."""
    return line.rstrip().endswith(("?", "？"))


def line_reports(line: str, lex: Lexicon | None = None) -> str | None:
    """The name of the report pattern that reads ``line`` as a report of a malfunction, or None."""
    lex = lex or lexicon()
    s = line[:MAX_LINE_CHARS]
    for name, pat in lex.report:
        if name == "report_heading" and pat.search(s):  # its question mark asks the reporter ("### What happened?")
            return name
    if asks(s):
        return None
    for name, pat in lex.report:
        if name == "report_heading":
            continue
        m = pat.search(s)
        if m is None:
            continue
        if lex.not_an_event.search(s[:m.start()]) or lex.not_an_event.search(m.group(0)):
            continue
        return name
    return None


def _candidate(line: str) -> bool:
    """A line a person wrote: not a log line (a timestamp, a level, a bracketed prefix), not a command's aligned
    key-value row."""
    return (bool(line.strip()) and not paste._LOGLIKE.match(line) and not paste._LEVEL.search(line)
            and not paste.ALIGNED_ROW.match(line))


@lru_cache(maxsize=64)
def read(text: str) -> Report:
    p = paste.read(text)
    fenced = {i for b in p.blocks if b.kind == "fence" for i in range(b.start, b.end)}
    lex = lexicon()
    rows: list[int] = []
    names: list[str] = []
    for i, line in enumerate(p.lines):
        if i >= MAX_LINES:
            break
        if i in fenced or not _candidate(line):
            continue
        name = line_reports(line, lex)
        if name is not None:
            rows.append(i)
            names.append(name)
    return Report(tuple(rows), tuple(names), described.is_change_document(text), described.is_guide(text),
                  described.is_resolved(text))


@lru_cache(maxsize=64)
def cue_counts(text: str, rows: tuple[int, ...] = ()) -> tuple[tuple[str, int], ...]:
    """Per failure class, how many lines (``rows``, 0-based, or else every line outside a fence) name its cues;
    classes with none left out, most first (ties by name)."""
    p = paste.read(text)
    if rows:
        lines = [p.lines[i] for i in rows if 0 <= i < len(p.lines)]
    else:
        fenced = {i for b in p.blocks if b.kind == "fence" for i in range(b.start, b.end)}
        lines = [line for i, line in enumerate(p.lines[:MAX_LINES]) if i not in fenced]
    counts = []
    for cls, pat in lexicon().classes:
        n = sum(1 for line in lines if pat.search(line[:MAX_LINE_CHARS]))
        if n:
            counts.append((cls, n))
    return tuple(sorted(counts, key=lambda x: (-x[1], x[0])))


def cue_class(text: str, report: Report, ranking: tuple[str, ...]) -> str | None:
    """The failure class the report's lines name most, then the document's; ties are broken by ``ranking`` (the
    prior's order of the failure classes); None when no cue is named, or when cues tie and there is no ranking."""
    for rows in ((report.lines, ()) if report.lines else ((),)):
        counts = cue_counts(text, rows)
        if counts:
            top = counts[0][1]
            tied = [c for c, n in counts if n == top]
            if len(tied) > 1 and not ranking:
                return None
            order = {c: i for i, c in enumerate(ranking)}
            return min(tied, key=lambda c: (order.get(c, len(order)), c))
    return None
