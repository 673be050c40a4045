"""Runs the signature catalogue over a text: matched lines → findings, one per kind, with line numbers.

Per signature: needles decide cheaply whether the text can match at all, then each line is tried. Context
(``requires``/``unless``) is checked against the other signatures' raw matches; ``explains`` marks a
finding of another kind near the explaining one with ``facts.explained_by`` so the classifier ranks the
cause above its consequence. Lines carrying an Xid go to the Xid catalogue (one finding per code).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from llm_oncall.evidence import catalog, xid
from llm_oncall.evidence.catalog import Compiled, Near
from llm_oncall.evidence.model import SEVERITY_RANK, Finding, JsonValue, compact, line_numbers, split_lines

MAX_FACT_VALUES = 10
QUOTE_CHARS = 240


@dataclass(frozen=True)
class Hit:
    sig: Compiled
    line: int  # 0-based
    groups: dict[str, str]
    text: str


def _number(value: str) -> int | float | str:
    v = value.strip().replace(",", "")
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return value


# Per-line results, reused across calls: the diagnosis re-classifies a sliding log tail every scrape, so most
# lines were seen before. Keyed by the signature set and the line; cleared when full.
_LINE_CACHE: dict[tuple[int, str], tuple[tuple[int, tuple[tuple[str, str], ...]], ...]] = {}
_LINE_CACHE_MAX = 100_000


def _matches(sigs: Sequence[Compiled], line: str) -> tuple[tuple[int, tuple[tuple[str, str], ...]], ...]:
    """(signature index, named groups) for every signature matching ``line``."""
    key = (id(sigs), line)
    got = _LINE_CACHE.get(key)
    if got is None:
        lower = line.lower()
        out = []
        for k, c in enumerate(sigs):
            m = c.match(line, lower)
            if m is not None:
                out.append((k, tuple((g, v) for g, v in m.groupdict().items() if v is not None)))
        got = tuple(out)
        if len(_LINE_CACHE) >= _LINE_CACHE_MAX:
            _LINE_CACHE.clear()
        _LINE_CACHE[key] = got
    return got


MIN_WRAP_WIDTH = 60


def _wrap_width(lines: Sequence[str]) -> int | None:
    """The width a terminal hard-wrapped this text at, if it looks wrapped: the longest line length shared by
    at least two lines that are at least MIN_WRAP_WIDTH long."""
    counts: dict[int, int] = {}
    for line in lines:
        n = len(line.rstrip("\n"))
        if n >= MIN_WRAP_WIDTH:
            counts[n] = counts.get(n, 0) + 1
    widths = [n for n, k in counts.items() if k >= 2]
    return max(widths) if widths else None


def scan(text: str, sigs: Sequence[Compiled]) -> list[Hit]:
    """Every line every signature matches (context signatures included), in line order.

    A text a terminal hard-wrapped ("...ProcessGroupNCCL'" / "s watchdog got stuck for 480 seconds") is also
    matched across each break: a line of the wrap width joined with the next, for the signatures that match
    neither line alone."""
    if not text:
        return []
    lines = split_lines(text)
    hits: list[Hit] = []
    per_line = [_matches(sigs, line) for line in lines]
    for i, found in enumerate(per_line):
        for k, groups in found:
            hits.append(Hit(sigs[k], i, dict(groups), lines[i]))
    width = _wrap_width(lines)
    if width is not None:
        for i in range(len(lines) - 1):
            if len(lines[i]) < width - 1:
                continue
            alone = {k for k, _ in per_line[i]} | {k for k, _ in per_line[i + 1]}
            for k, groups in _matches(sigs, lines[i] + lines[i + 1]):
                if k not in alone:
                    hits.append(Hit(sigs[k], i, dict(groups), lines[i]))
    return hits


def _near(i: int, near: Near, at: dict[str, list[int]]) -> bool:
    lo = i - near.within if near.where in ("before", "around") else i
    hi = i + near.within if near.where in ("after", "around") else i
    for ref in near.any_of:
        rows = at.get(ref, [])
        k = bisect.bisect_left(rows, lo)
        while k < len(rows) and rows[k] <= hi:
            j = rows[k]
            if near.where == "before" and near.unless_between and _between(j, i, near.unless_between, at):
                k += 1
                continue
            return True
    return False


def _between(j: int, i: int, refs: Sequence[str], at: dict[str, list[int]]) -> bool:
    for ref in refs:
        rows = at.get(ref, [])
        k = bisect.bisect_right(rows, j)
        if k < len(rows) and rows[k] < i:
            return True
    return False


def in_context(hits: Sequence[Hit]) -> list[Hit]:
    """The hits whose ``requires`` holds and whose ``unless`` does not."""
    at: dict[str, list[int]] = {}
    for h in hits:
        at.setdefault(h.sig.id, []).append(h.line)
    for rows in at.values():
        rows.sort()
    out = []
    for h in hits:
        s = h.sig.sig
        if not all(_near(h.line, n, at) for n in s.requires):
            continue
        if any(_near(h.line, n, at) for n in s.unless):
            continue
        out.append(h)
    return out


def _rank(c: Compiled) -> tuple[int, float]:
    return (SEVERITY_RANK[c.sig.severity], c.sig.confidence)


def _kind_finding(name: str, hits: Sequence[Hit]) -> Finding | None:
    rep = max((h.sig for h in hits), key=_rank).sig
    rows = sorted({h.line for h in hits})
    if len(rows) < rep.min_count:
        return None
    first = min(hits, key=lambda h: h.line)
    facts: dict[str, JsonValue] = dict(rep.facts)
    numbers = {g for h in hits for g in h.sig.sig.numbers}
    values: dict[str, list[JsonValue]] = {}
    for h in sorted(hits, key=lambda h: h.line):
        for g, v in h.groups.items():
            val = _number(v) if g in numbers else v.strip()[:200]
            seen = values.setdefault(g, [])
            if val not in seen and len(seen) < MAX_FACT_VALUES:
                seen.append(val)
    for g, vals in values.items():
        facts[g] = vals[0]
        if len(vals) > 1:
            facts[f"{g}_values"] = vals
    facts.update(compact({
        "matched_lines": len(rows),
        "first": first.text.strip()[:QUOTE_CHARS],
        "signatures": sorted({h.sig.id for h in hits}),
        "reading": rep.reading or None,
        "fix": rep.fix or None,
    }))
    conf = min(rep.max_confidence, rep.confidence + rep.repeat_bonus * (len(rows) - 1))
    return Finding(name, rep.kind, rep.benign, rep.incident_hint, conf, facts, line_numbers(rows), "signatures",
                   severity=rep.severity, category=rep.category)


def _xid_events(hits: Sequence[Hit]) -> list[xid.XidEvent]:
    numbered: list[xid.XidEvent] = []
    prose: list[xid.XidEvent] = []
    for h in sorted(hits, key=lambda h: h.line):
        s = h.sig.sig
        raw = h.groups.get(s.xid_group, "") if s.xid_group else ""
        code = int(raw) if raw.isdigit() else s.xid_code
        if code is None:
            continue
        gpu = h.groups.get("pci") or h.groups.get("gpu") or "?"
        ev = xid.XidEvent(h.line, code, gpu, (h.groups.get("msg") or h.text).strip(), h.groups.get("recovery"))
        (numbered if s.xid_group else prose).append(ev)
    # Two signatures can read the same line (the recovery-action one adds the action): keep one, the richer.
    unique: dict[tuple[int, int], xid.XidEvent] = {}
    for e in numbered:
        if (e.line, e.code) not in unique or e.recovery_action:
            unique[(e.line, e.code)] = e
    numbered = sorted(unique.values(), key=lambda e: e.line)
    # Prose ("GPU has fallen off the bus") repeats a numbered Xid line already logged: count it only alone.
    seen = {e.code for e in numbered}
    return numbered + [e for e in prose if e.code not in seen]


def findings(text: str, name: str, sigs: Sequence[Compiled] | None = None) -> list[Finding]:
    """The catalogue's findings for ``text``: one per kind, Xids one per code; explained ones marked."""
    active = catalog.builtin() if sigs is None else sigs
    hits = in_context(scan(text, active))
    by_kind: dict[str, list[Hit]] = {}
    xid_hits: list[Hit] = []
    for h in hits:
        s = h.sig.sig
        if s.role == "context":
            continue
        if s.xid_group or s.xid_code is not None:
            xid_hits.append(h)
        else:
            by_kind.setdefault(s.kind, []).append(h)
    out = [f for hs in by_kind.values() for f in [_kind_finding(name, hs)] if f is not None]
    out += xid.findings(_xid_events(xid_hits), name)
    return _explain(out, hits)


def _explain(found: list[Finding], hits: Sequence[Hit]) -> list[Finding]:
    rules = [(h.sig.sig.kind, h.sig.sig.explains, h.line) for h in hits if h.sig.sig.explains is not None]
    if not rules:
        return found
    out = []
    for f in found:
        cause = next((kind for kind, ex, line in rules if ex is not None and f.kind in ex.kinds and kind != f.kind
                      and any(abs((n - 1) - line) <= ex.within for n in f.lines)), None)
        out.append(f.replace(facts={**f.facts, "explained_by": cause}) if cause else f)
    return out
