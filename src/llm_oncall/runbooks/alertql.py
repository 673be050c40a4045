"""A runbook's alert condition, stated once over features, as PromQL: what `rules export` writes.

The condition language (runbooks/expr.py) has three-valued logic: a comparison with an unknown value is unknown,
and a condition holds only when definitely true. PromQL has presence instead: a filtered vector holds for the
series that remain. The two agree when each comparison becomes a filter (unknown = absent: no series survives),
`and` / `or` become the set operators, and `not` is pushed down to the comparisons (De Morgan holds in three-valued
logic, and `not (x >= 3)` is `x < 3` for a known x, unknown for an unknown one). `x == null` becomes "the objects
that exist, unless x". Whatever has no faithful PromQL form (a bare `not` over a count, `min`/`max`, a comparison
of two numbers) is refused with the reason, so `runbooks lint` catches it.

The features' PromQL forms are data: features.promql.yaml.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from llm_oncall.runbooks.expr import Expr, Node

TABLE_PATH = Path(__file__).with_name("features.promql.yaml")
FLEET = ("namespace",)
_FLIP = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


class TranslateError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class FeatureQL:
    name: str
    expr: str
    by: tuple[str, ...]
    """Labels the vector keeps; () for a scalar."""
    count_of: bool = False


@dataclass(frozen=True, slots=True)
class Table:
    features: Mapping[str, FeatureQL]
    universe: Mapping[tuple[str, ...], str]


@dataclass(frozen=True, slots=True)
class Translated:
    expr: str
    """PromQL with the export's `${…}` placeholders still in it."""
    scope: tuple[str, ...]
    """The labels each firing series carries (the alert's scope)."""


def _load(path: Path) -> Table:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    feats: dict[str, FeatureQL] = {}
    for name, spec in raw["features"].items():
        if "scalar" in spec:
            feats[name] = FeatureQL(name, str(spec["scalar"]), ())
        elif "count_of" in spec:
            feats[name] = FeatureQL(name, " ".join(str(spec["count_of"]).split()), tuple(spec["by"]), count_of=True)
        else:
            feats[name] = FeatureQL(name, " ".join(str(spec["expr"]).split()), tuple(spec["by"]))
    universe = {tuple(k.split(",")): str(v) for k, v in raw["universe"].items()}
    return Table(feats, universe)


@cache
def table() -> Table:
    return _load(TABLE_PATH)


@dataclass(frozen=True, slots=True)
class _Vec:
    expr: str
    by: tuple[str, ...]  # () for a scalar

    @property
    def scalar(self) -> bool:
        return not self.by


_ATOM = re.compile(r"^([A-Za-z0-9_:.]+|\$\{[A-Za-z0-9_]+\})$")


def _p(expr: str) -> str:
    """Parenthesised unless it is one name or number (PromQL's precedence is then never in question)."""
    return expr if _ATOM.match(expr) else f"({expr})"


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(x for x in a if x in b)


def _binary(op: str, a: _Vec, b: _Vec, bool_filter: bool = False) -> _Vec:
    """`a op b` with the vector matching PromQL needs: one side's labels a subset of the other's (group_left/right)."""
    if a.scalar or b.scalar or a.by == b.by:
        return _Vec(f"{_p(a.expr)} {op} {_p(b.expr)}", a.by or b.by)
    if set(b.by) <= set(a.by):
        return _Vec(f"{_p(a.expr)} {op} on ({', '.join(b.by)}) group_left () {_p(b.expr)}", a.by)
    if set(a.by) <= set(b.by):
        if bool_filter:
            # A filter keeps the left side's series: the finer side goes left, with the comparison mirrored.
            return _Vec(f"{_p(b.expr)} {_MIRROR[op]} on ({', '.join(a.by)}) group_left () {_p(a.expr)}", b.by)
        return _Vec(f"{_p(a.expr)} {op} on ({', '.join(a.by)}) group_right () {_p(b.expr)}", b.by)
    raise TranslateError(f"cannot match {a.by} with {b.by}: neither label set contains the other")


class _Translator:
    def __init__(self, tab: Table) -> None:
        self.tab = tab

    def feature(self, name: str) -> FeatureQL:
        f = self.tab.features.get(name)
        if f is None:
            raise TranslateError(f"feature {name!r} has no PromQL form (runbooks/features.promql.yaml)")
        return f

    def value(self, n: Node) -> _Vec:
        if n.op == "num":
            return _Vec(f"{float(n.value):g}", ())  # type: ignore[arg-type]
        if n.op == "name":
            f = self.feature(str(n.value))
            if f.count_of:
                return _Vec(f"count by ({', '.join(FLEET)}) ({f.expr})", FLEET)
            return _Vec(f.expr, f.by)
        if n.op in ("+", "-", "*", "/"):
            return _binary(n.op, self.value(n.args[0]), self.value(n.args[1]))
        if n.op == "neg":
            v = self.value(n.args[0])
            return _Vec(f"-{_p(v.expr)}", v.by)
        if n.op == "call" and n.value == "abs":
            v = self.value(n.args[0])
            return _Vec(f"abs({v.expr})", v.by)
        raise TranslateError(f"{_what(n)} has no PromQL form in an alert")

    def holds(self, n: Node, negate: bool = False) -> _Vec:
        op = n.op
        if op == "not":
            return self.holds(n.args[0], not negate)
        if op in ("and", "or"):
            if negate:
                op = "or" if op == "and" else "and"
            a, b = self.holds(n.args[0], negate), self.holds(n.args[1], negate)
            common = _common(a.by, b.by)
            if op == "and":
                return _Vec(f"{_p(a.expr)} and on ({', '.join(common)}) {_p(b.expr)}", a.by)
            if a.by == b.by:
                return _Vec(f"{_p(a.expr)} or {_p(b.expr)}", a.by)
            if not common:
                raise TranslateError(f"'or' of {a.by} and {b.by}: no label in common")
            return _Vec(f"(count by ({', '.join(common)}) ({a.expr})) or (count by ({', '.join(common)}) "
                        f"({b.expr}))", common)
        if op in _FLIP:
            return self.compare(_FLIP[op] if negate else op, n.args[0], n.args[1])
        raise TranslateError(f"{_what(n)} is not a condition (compare it)")

    def compare(self, op: str, left: Node, right: Node) -> _Vec:
        if left.op == "null" or right.op == "null":
            other = right if left.op == "null" else left
            if op not in ("==", "!="):
                raise TranslateError("null is compared with == or != only")
            v = self.value(other)
            if v.scalar:
                raise TranslateError("a number is never null")
            # Known: a series that is there and not NaN (NaN != NaN; the features read NaN as unknown too).
            known = _Vec(f"{_p(v.expr)} == {_p(v.expr)}", v.by)
            if op == "!=":
                return known
            universe = self.tab.universe.get(v.by)
            if universe is None:
                raise TranslateError(f"`== null` needs a universe for labels {v.by} (features.promql.yaml)")
            return _Vec(f"{_p(universe)} unless on ({', '.join(v.by)}) ({known.expr})", v.by)
        if left.op == "bool" or right.op == "bool":
            raise TranslateError("boolean features have no PromQL form in an alert")
        for side, other, mirrored in ((left, right, False), (right, left, True)):
            if side.op == "name" and self.feature(str(side.value)).count_of:
                return self.count(str(side.value), _MIRROR[op] if mirrored else op, other)
        a, b = self.value(left), self.value(right)
        if a.scalar and b.scalar:
            raise TranslateError("a comparison of two numbers has no series to alert on")
        if a.scalar:
            a, b, op = b, a, _MIRROR[op]
        return _binary(op, a, b, bool_filter=True)

    def count(self, name: str, op: str, bound: Node) -> _Vec:
        f = self.feature(name)
        k = bound.value if bound.op == "num" else None
        if not isinstance(k, float) or op not in (">=", ">") or (op == ">=" and k < 1) or (op == ">" and k < 0):
            raise TranslateError(f"{name} counts objects: only `{name} >= k` (k ≥ 1) or `{name} > k` (k ≥ 0) "
                                 "translate (Prometheus has no series for a count of zero)")
        if (op == ">=" and k <= 1) or (op == ">" and k < 1):
            return _Vec(f.expr, f.by)
        return _Vec(f"count by ({', '.join(FLEET)}) ({f.expr}) {op} {k:g}", FLEET)


def _what(n: Node) -> str:
    if n.op == "name":
        return f"feature {n.value!r}"
    if n.op == "call":
        return f"{n.value}()"
    return {"num": "a number", "bool": "true/false", "null": "null"}.get(n.op, f"'{n.op}'")


def translate(expr: Expr, tab: Table | None = None) -> Translated:
    """The PromQL of a runbook alert condition; TranslateError says why one has none."""
    v = _Translator(tab or table()).holds(expr.tree)
    return Translated(" ".join(v.expr.split()), v.by)


__all__ = ["FLEET", "TABLE_PATH", "FeatureQL", "Table", "TranslateError", "Translated", "table", "translate"]
