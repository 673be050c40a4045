"""Taking PromQL apart, just enough for the checks of the exported rules: the vector selectors of an expression.

A small tokenizer, not a parser: strings, brackets, numbers and durations are skipped; an identifier is a metric
name unless it is a keyword, an aggregator or a function (followed by `(`); label lists after `by`, `without`,
`on`, `ignoring`, `group_left` and `group_right` are skipped.
"""

from __future__ import annotations

import re

_AGGREGATORS = frozenset({"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                          "bottomk", "topk", "quantile", "limitk", "limit_ratio"})
_KEYWORDS = frozenset({"and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring", "group_left",
                       "group_right", "inf", "nan", "atan2", "start", "end"})
_LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NUMBER = re.compile(r"(0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?)")


def _skip_string(s: str, i: int) -> int:
    q = s[i]
    i += 1
    while i < len(s) and s[i] != q:
        i += 2 if s[i] == "\\" and q != "`" else 1
    return i + 1


def _close(s: str, i: int, open_: str, close: str) -> int:
    """Index just past the bracket matching the one at `i`."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c in "\"'`":
            i = _skip_string(s, i)
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced {open_}{close} in {s!r}")


def selectors(expr: str) -> list[str]:
    """The vector selectors of a PromQL expression (`name{matchers}` as written), in order, without repeats."""
    out: list[str] = []
    i, n = 0, len(expr)
    while i < n:
        c = expr[i]
        if c in "\"'`":
            i = _skip_string(expr, i)
        elif c == "[":
            i = _close(expr, i, "[", "]")
        elif c == "{":
            j = _close(expr, i, "{", "}")
            out.append(expr[i:j])
            i = j
        elif c.isdigit() or (c == "." and i + 1 < n and expr[i + 1].isdigit()):
            m = _NUMBER.match(expr, i)
            i = m.end() if m else i + 1
            while i < n and expr[i].isalnum():  # a duration's unit (offset 10m)
                i += 1
        elif c.isalpha() or c in "_:":
            m = _IDENT.match(expr, i)
            assert m is not None
            word, i = m.group(0), m.end()
            j = i
            while j < n and expr[j].isspace():
                j += 1
            nxt = expr[j] if j < n else ""
            if word in _LABEL_LISTS and nxt == "(":
                i = _close(expr, j, "(", ")")
            elif word in _KEYWORDS or word in _AGGREGATORS or nxt == "(":
                continue
            elif nxt == "{":
                k = _close(expr, j, "{", "}")
                out.append(word + expr[j:k])
                i = k
            else:
                out.append(word)
        else:
            i += 1
    seen: list[str] = []
    for s in out:
        if s not in seen:
            seen.append(s)
    return seen


def metric_name(selector: str) -> str:
    """The metric a selector names (`__name__` matchers included); '' when it names none."""
    name = selector.split("{", 1)[0].strip()
    if name:
        return name
    m = re.search(r'__name__\s*=\s*"([^"]*)"', selector)
    return m.group(1) if m else ""
