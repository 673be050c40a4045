"""Instant PromQL queries over the simulated fleet's scrapes: what the trainee types into Grafana's Explore.

The subset the runbooks' triage queries use (runbooks/builtin/*.yaml `signal`): vector selectors with `=`, `!=`,
`=~`, `!~` matchers; range selectors `[5m]`; `offset`; the functions `rate`, `irate`, `increase`, `delta`,
`changes`, `avg_over_time`, `max_over_time`, `min_over_time`, `histogram_quantile`, `abs`; the aggregations `sum`,
`min`, `max`, `avg`, `count` with `by`/`without`; arithmetic, comparisons (filtering, or `bool`), `and`, `or`,
`unless`, with `on`/`ignoring` matching. Counter resets are handled; `rate` divides the increase by the time the
samples span (no extrapolation to the window's edges). A series is stale after five minutes without a sample.
A comma-separated list of selectors (as some runbooks write "a, b") is answered as one query per selector.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from llm_oncall.signals.exposition import Page

Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]


class Matrix(dict[Labels, list[tuple[float, float]]]):
    """A range vector (`x[5m]`): kept apart from an instant vector even when empty."""

LOOKBACK_S = 300.0
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}
_TOKEN = re.compile(r"\s*(?:(?P<dur>(?:\d+(?:ms|[smhdwy]))+(?![A-Za-z0-9_]))"
                    r"|(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
                    r"|(?P<id>[A-Za-z_:][A-Za-z0-9_:]*)|(?P<str>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
                    r"|(?P<op>==|!=|>=|<=|=~|!~|[-+*/%(){}\[\],=<>^]))")
_AGGS = frozenset({"sum", "min", "max", "avg", "count"})
_RANGE_FNS = frozenset({"rate", "irate", "increase", "delta", "changes", "avg_over_time", "max_over_time",
                        "min_over_time"})


class PromQLError(ValueError):
    pass


@dataclass
class SeriesStore:
    """Every scrape of every target: (t, target labels, page), oldest first."""

    scrapes: list[tuple[float, dict[str, str], Page]] = field(default_factory=list)

    def add(self, t: float, target: dict[str, str], page: Page) -> None:
        self.scrapes.append((t, target, page))

    def matrix(self, name: str, matchers: list[tuple[str, str, str]], start: float, end: float) -> Matrix:
        out = Matrix()
        for t, target, page in self.scrapes:
            if t <= start or t > end + 1e-9:
                continue
            for s in page.get(name):
                labels = dict(target)
                labels.update(s.labels)
                labels["__name__"] = name
                if all(_match(labels.get(k, ""), op, v) for k, op, v in matchers):
                    out.setdefault(frozenset(labels.items()), []).append((t, s.value))
        return out


def _match(value: str, op: str, want: str) -> bool:
    if op == "=":
        return value == want
    if op == "!=":
        return value != want
    full = re.fullmatch(want, value) is not None
    return full if op == "=~" else not full


def _dur(text: str) -> float:
    total = 0.0
    for n, unit in re.findall(r"(\d+)(ms|[smhdwy])", text):
        total += int(n) * _UNITS[unit]
    return total


def _tokens(expr: str) -> list[tuple[str, str]]:
    out, i = [], 0
    expr = expr.strip()
    while i < len(expr):
        m = _TOKEN.match(expr, i)
        if m is None or m.end() == i:
            raise PromQLError(f"unexpected character at {i}: {expr[i:i + 10]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        i = m.end()
        while i < len(expr) and expr[i].isspace():
            i += 1
    return out


Value = float | Vector | Matrix


@dataclass
class _Sel:
    name: str
    matchers: list[tuple[str, str, str]]
    range_s: float | None = None
    offset_s: float = 0.0


class _Parser:
    def __init__(self, expr: str, store: SeriesStore, at: float) -> None:
        self.toks = _tokens(expr)
        self.i = 0
        self.store = store
        self.at = at

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.toks[j][1] if j < len(self.toks) else ""

    def take(self, want: str | None = None) -> str:
        if self.i >= len(self.toks):
            raise PromQLError(f"unexpected end of query{f', expected {want!r}' if want else ''}")
        tok = self.toks[self.i][1]
        if want is not None and tok != want:
            raise PromQLError(f"expected {want!r}, got {tok!r}")
        self.i += 1
        return tok

    def run(self) -> Value:
        v = self.binary(0)
        if self.i != len(self.toks):
            raise PromQLError(f"unexpected {self.peek()!r}")
        return v

    _PREC = (("or",), ("and", "unless"), ("==", "!=", ">", "<", ">=", "<="), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Value:
        if level == len(self._PREC):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self._PREC[level]:
            op = self.take()
            as_bool = False
            if self.peek() == "bool":
                self.take()
                as_bool = True
            on: tuple[str, list[str]] | None = None
            if self.peek() in ("on", "ignoring"):
                how = self.take()
                on = (how, self.labels())
            for kw in ("group_left", "group_right"):
                if self.peek() == kw:
                    self.take()
                    if self.peek() == "(":
                        self.labels()
            right = self.binary(level + 1)
            left = _apply(op, left, right, as_bool, on)
        return left

    def labels(self) -> list[str]:
        self.take("(")
        out = []
        while self.peek() != ")":
            out.append(self.take())
            if self.peek() == ",":
                self.take()
        self.take(")")
        return out

    def unary(self) -> Value:
        if self.peek() == "-":
            self.take()
            return _apply("*", -1.0, self.unary(), False, None)
        if self.peek() == "+":
            self.take()
        return self.primary()

    def primary(self) -> Value:
        kind, tok = self.toks[self.i] if self.i < len(self.toks) else ("", "")
        if kind == "num":
            self.take()
            return float(tok)
        if tok == "(":
            self.take()
            v = self.binary(0)
            self.take(")")
            return v
        if kind != "id" and tok != "{":
            raise PromQLError(f"unexpected {tok!r}")
        if tok in _AGGS and self.peek(1) in ("(", "by", "without"):
            return self.aggregate()
        if kind == "id" and self.peek(1) == "(":
            return self.function()
        sel = self.selector()
        if sel.range_s is not None:
            return self.store.matrix(sel.name, sel.matchers, self.at - sel.offset_s - sel.range_s,
                                     self.at - sel.offset_s)
        m = self.store.matrix(sel.name, sel.matchers, self.at - sel.offset_s - LOOKBACK_S, self.at - sel.offset_s)
        return {k: pts[-1][1] for k, pts in m.items()}

    def selector(self) -> _Sel:
        name = ""
        if self.peek() != "{":
            name = self.take()
        matchers: list[tuple[str, str, str]] = []
        if self.peek() == "{":
            self.take()
            while self.peek() != "}":
                label = self.take()
                op = self.take()
                if op not in ("=", "!=", "=~", "!~"):
                    raise PromQLError(f"bad matcher operator {op!r}")
                raw = self.take()
                matchers.append((label, op, raw[1:-1].encode().decode("unicode_escape")))
                if self.peek() == ",":
                    self.take()
            self.take("}")
        if not name:
            name = next((v for k, op, v in matchers if k == "__name__" and op == "="), "")
            matchers = [m for m in matchers if m[0] != "__name__"]
        if not name:
            raise PromQLError("a selector needs a metric name")
        sel = _Sel(name, matchers)
        if self.peek() == "[":
            self.take()
            sel.range_s = _dur(self.take())
            self.take("]")
        if self.peek() == "offset":
            self.take()
            sel.offset_s = _dur(self.take())
        return sel

    def aggregate(self) -> Vector:
        op = self.take()
        grouping: tuple[str, list[str]] | None = None
        if self.peek() in ("by", "without"):
            how = self.take()
            grouping = (how, self.labels())
        self.take("(")
        v = self.binary(0)
        self.take(")")
        if self.peek() in ("by", "without"):
            how = self.take()
            grouping = (how, self.labels())
        if not isinstance(v, dict) or _is_matrix(v):
            raise PromQLError(f"{op} needs an instant vector")
        return _aggregate(op, v, grouping)  # type: ignore[arg-type]

    def function(self) -> Value:
        fn = self.take()
        self.take("(")
        args: list[Value] = []
        while self.peek() != ")":
            args.append(self.binary(0))
            if self.peek() == ",":
                self.take()
        self.take(")")
        if fn in _RANGE_FNS:
            if len(args) != 1 or not isinstance(args[0], dict) or not _is_matrix(args[0]):
                raise PromQLError(f"{fn} needs a range vector, e.g. {fn}(x[5m])")
            return _range_fn(fn, args[0])  # type: ignore[arg-type]
        if fn == "histogram_quantile" and len(args) == 2 and isinstance(args[0], float):
            return _histogram_quantile(args[0], _instant(args[1], fn))
        if fn == "abs" and len(args) == 1:
            return {k: abs(x) for k, x in _instant(args[0], fn).items()}
        raise PromQLError(f"unsupported function {fn}() (see docs/training.md)")


def _is_matrix(v: object) -> bool:
    return isinstance(v, Matrix)


def _instant(v: Value, where: str) -> Vector:
    if not isinstance(v, dict) or _is_matrix(v):
        raise PromQLError(f"{where} needs an instant vector")
    return v  # type: ignore[return-value]


def _drop_name(k: Labels) -> Labels:
    return frozenset(x for x in k if x[0] != "__name__")


def _range_fn(fn: str, m: Matrix) -> Vector:
    out: Vector = {}
    for k, pts in m.items():
        key = _drop_name(k)
        vals = [v for _, v in pts]
        if fn.endswith("_over_time"):
            out[key] = {"avg": sum(vals) / len(vals), "max": max(vals), "min": min(vals)}[fn.split("_")[0]]
            continue
        if fn == "changes":
            out[key] = float(sum(1 for a, b in pairwise(vals) if a != b))
            continue
        if len(pts) < 2:
            continue
        if fn == "delta":
            out[key] = vals[-1] - vals[0]
            continue
        if fn == "irate":
            (t0, a), (t1, b) = pts[-2], pts[-1]
            out[key] = (b - a if b >= a else b) / (t1 - t0)
            continue
        inc = sum(b - a if b >= a else b for a, b in pairwise(vals))
        out[key] = inc if fn == "increase" else inc / (pts[-1][0] - pts[0][0])
    return out


def _group_key(k: Labels, grouping: tuple[str, list[str]] | None) -> Labels:
    if grouping is None:
        return frozenset()
    how, names = grouping
    if how == "by":
        return frozenset(x for x in k if x[0] in names)
    return frozenset(x for x in k if x[0] not in names and x[0] != "__name__")


def _aggregate(op: str, v: Vector, grouping: tuple[str, list[str]] | None) -> Vector:
    groups: dict[Labels, list[float]] = {}
    for k, x in v.items():
        groups.setdefault(_group_key(k, grouping), []).append(x)
    agg: dict[str, Callable[[list[float]], float]] = {
        "sum": sum, "min": min, "max": max, "avg": lambda xs: sum(xs) / len(xs), "count": lambda xs: float(len(xs))}
    return {k: agg[op](xs) for k, xs in groups.items()}


_OPS: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b if b else (math.nan if a == 0 else math.copysign(math.inf, a)),
    "%": lambda a, b: math.fmod(a, b) if b else math.nan,
    "==": lambda a, b: float(a == b), "!=": lambda a, b: float(a != b), ">": lambda a, b: float(a > b),
    "<": lambda a, b: float(a < b), ">=": lambda a, b: float(a >= b), "<=": lambda a, b: float(a <= b)}
_CMP = frozenset({"==", "!=", ">", "<", ">=", "<="})


def _sig(k: Labels, on: tuple[str, list[str]] | None) -> Labels:
    k = _drop_name(k)
    if on is None:
        return k
    how, names = on
    return frozenset(x for x in k if (x[0] in names) == (how == "on"))


def _apply(op: str, left: Value, right: Value, as_bool: bool,
           on: tuple[str, list[str]] | None) -> Value:
    if op in ("and", "or", "unless"):
        lv, rv = _instant(left, op), _instant(right, op)
        rsigs = {_sig(k, on) for k in rv}
        if op == "and":
            return {k: x for k, x in lv.items() if _sig(k, on) in rsigs}
        if op == "unless":
            return {k: x for k, x in lv.items() if _sig(k, on) not in rsigs}
        lsigs = {_sig(k, on) for k in lv}
        return {**lv, **{k: x for k, x in rv.items() if _sig(k, on) not in lsigs}}
    f = _OPS[op]
    if isinstance(left, float) and isinstance(right, float):
        return f(left, right)
    cmp = op in _CMP

    def one(k: Labels, a: float, b: float, keep: float) -> tuple[Labels, float] | None:
        r = f(a, b)
        if cmp and not as_bool:
            return (k, keep) if r else None
        return (_drop_name(k), r)

    out: Vector = {}
    if isinstance(left, float) or isinstance(right, float):
        vec = _instant(right if isinstance(left, float) else left, op)
        for k, x in vec.items():
            a, b = (left, x) if isinstance(left, float) else (x, float(right))  # type: ignore[arg-type]
            got = one(k, a, b, x)
            if got is not None:
                out[got[0]] = got[1]
        return out
    lv, rv = _instant(left, op), _instant(right, op)
    by_sig: dict[Labels, float] = {}
    for k, x in rv.items():
        by_sig[_sig(k, on)] = x
    for k, x in lv.items():
        s = _sig(k, on)
        if s in by_sig:
            got = one(k if on is None else (k if cmp and not as_bool else s), x, by_sig[s], x)
            if got is not None:
                out[got[0]] = got[1]
    return out


def _histogram_quantile(q: float, v: Vector) -> Vector:
    groups: dict[Labels, list[tuple[float, float]]] = {}
    for k, x in v.items():
        bound = dict(k).get("le")
        if bound is None:
            continue
        key = frozenset(p for p in _drop_name(k) if p[0] != "le")
        groups.setdefault(key, []).append((math.inf if bound == "+Inf" else float(bound), x))
    out: Vector = {}
    for key, buckets in groups.items():
        buckets.sort()
        total = buckets[-1][1]
        if total <= 0 or buckets[-1][0] != math.inf:
            out[key] = math.nan
            continue
        rank = q * total
        prev_le, prev_c = 0.0, 0.0
        for le, c in buckets:
            if c >= rank:
                if le == math.inf:
                    out[key] = prev_le
                else:
                    out[key] = prev_le + (le - prev_le) * ((rank - prev_c) / (c - prev_c) if c > prev_c else 0.0)
                break
            prev_le, prev_c = le, c
    return out


def query(expr: str, store: SeriesStore, at: float) -> Value:
    """The value of an instant query at time `at` (a number, a vector, or a range vector)."""
    return _Parser(expr, store, at).run()


def split(expr: str) -> list[str]:
    """A runbook's `a, b` (two selectors in one line) as two queries; one query otherwise."""
    depth, parts, cur = 0, [], ""
    for c in expr:
        depth += c in "([{"
        depth -= c in ")]}"
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


_HIDDEN = frozenset({"job", "instance", "model_name", "engine", "deployment", "group"})


def render(value: Value, limit: int = 40) -> str:
    """Grafana-Explore-like table: one line per series, sorted by labels."""
    if isinstance(value, float):
        return f"scalar: {_num(value)}"
    if not value:
        return "(empty result)"
    rows: list[str] = []
    for k in sorted(value, key=lambda k: sorted(k)):
        x = value[k]
        labels = dict(k)
        name = labels.pop("__name__", "")
        shown = ", ".join(f'{a}="{b}"' for a, b in sorted(labels.items()) if a not in _HIDDEN)
        body = (" ".join(_num(v) for _, v in x[-5:]) if isinstance(x, list) else _num(x))
        rows.append(f"{name}{{{shown}}}  {body}")
    more = [f"... {len(rows) - limit} more series"] if len(rows) > limit else []
    return "\n".join(rows[:limit] + more)


def _num(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return f"{x:.4g}"


def names(store: SeriesStore) -> Iterable[str]:
    seen: set[str] = set()
    for _, _, page in store.scrapes[-20:]:
        seen.update(page.names())
    return sorted(seen)
