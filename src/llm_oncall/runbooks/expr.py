"""The small, safe condition language of runbooks.

    waiting > 10 and kv_max >= 0.9 and (preemptions_per_s > 0 or req_rate_ratio >= 1.8)

Grammar: `or` / `and` / `not`, comparisons (`< <= > >= == !=`), `+ - * /`, parentheses,
numbers, `true`/`false`, `null`, identifiers (features), and the functions `abs`, `min`,
`max`.  No attribute access, no calls into Python, no eval: it is parsed once into a tree
and evaluated against a mapping of feature values.

Unknown values are first-class: a feature that is missing or None makes any comparison with
it unknown, and the three-valued `and`/`or` keep it so (`unknown and false` is false,
`unknown or true` is true).  A runbook condition only holds when it is definitely true —
an empty series is unknown, never zero or healthy.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Value = float | bool | None

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
    | (?P<op><=|>=|==|!=|<|>|\+|-|\*|/|\(|\)|,)
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    )""", re.VERBOSE)

_KEYWORDS = {"and", "or", "not", "true", "false", "null"}
_FUNCS: dict[str, Callable[..., float]] = {"abs": abs, "min": min, "max": max}


class ExprError(ValueError):
    def __init__(self, message: str, text: str, pos: int) -> None:
        super().__init__(f"{message} at column {pos + 1}: {text!r}")
        self.pos = pos


@dataclass(frozen=True, slots=True)
class Node:
    op: str
    args: tuple[Node, ...] = ()
    value: float | str | bool | None = None


def _tokenize(text: str) -> list[tuple[str, str, int]]:
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ExprError("unexpected character", text, pos)
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    tokens.append(("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        if len(text) > 2000:
            raise ExprError("expression too long", text[:40], 0)
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i]

    def take(self, value: str | None = None) -> tuple[str, str, int]:
        tok = self.tokens[self.i]
        if value is not None and tok[1] != value:
            raise ExprError(f"expected {value!r}, found {tok[1] or 'end'!r}", self.text, tok[2])
        self.i += 1
        return tok

    def parse(self) -> Node:
        node = self.or_()
        kind, val, pos = self.peek()
        if kind != "end":
            raise ExprError(f"unexpected {val!r}", self.text, pos)
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.peek()[1] == "or":
            self.take()
            node = Node("or", (node, self.and_()))
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.peek()[1] == "and":
            self.take()
            node = Node("and", (node, self.not_()))
        return node

    def not_(self) -> Node:
        if self.peek()[1] == "not":
            self.take()
            return Node("not", (self.not_(),))
        return self.cmp()

    def cmp(self) -> Node:
        node = self.add()
        if self.peek()[1] in ("<", "<=", ">", ">=", "==", "!="):
            op = self.take()[1]
            node = Node(op, (node, self.add()))
            if self.peek()[1] in ("<", "<=", ">", ">=", "==", "!="):
                raise ExprError("chained comparison; use 'and'", self.text, self.peek()[2])
        return node

    def add(self) -> Node:
        node = self.mul()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            node = Node(op, (node, self.mul()))
        return node

    def mul(self) -> Node:
        node = self.unary()
        while self.peek()[1] in ("*", "/"):
            op = self.take()[1]
            node = Node(op, (node, self.unary()))
        return node

    def unary(self) -> Node:
        if self.peek()[1] == "-":
            self.take()
            return Node("neg", (self.unary(),))
        return self.atom()

    def atom(self) -> Node:
        kind, val, pos = self.take()
        if kind == "num":
            return Node("num", value=float(val))
        if val == "(":
            self.depth += 1
            if self.depth > 50:
                raise ExprError("nested too deeply", self.text, pos)
            node = self.or_()
            self.take(")")
            self.depth -= 1
            return node
        if kind == "name":
            if val in ("true", "false"):
                return Node("bool", value=val == "true")
            if val == "null":
                return Node("null")
            if val in _KEYWORDS:
                raise ExprError(f"unexpected {val!r}", self.text, pos)
            if self.peek()[1] == "(":
                if val not in _FUNCS:
                    raise ExprError(f"unknown function {val!r}", self.text, pos)
                self.take("(")
                args = [self.or_()]
                while self.peek()[1] == ",":
                    self.take()
                    args.append(self.or_())
                self.take(")")
                return Node("call", tuple(args), val)
            return Node("name", value=val)
        raise ExprError(f"unexpected {val or 'end'!r}", self.text, pos)


@dataclass(frozen=True, slots=True)
class Expr:
    text: str
    tree: Node

    def names(self) -> set[str]:
        out: set[str] = set()

        def walk(n: Node) -> None:
            if n.op == "name":
                out.add(str(n.value))
            for a in n.args:
                walk(a)

        walk(self.tree)
        return out

    def evaluate(self, env: Mapping[str, Value]) -> Value:
        return _eval(self.tree, env)

    def holds(self, env: Mapping[str, Value]) -> bool:
        """True only when the condition is definitely true (unknown → False)."""
        return self.evaluate(env) is True


@functools.lru_cache(maxsize=4096)
def compile_expr(text: str) -> Expr:
    """The parsed condition; cached, as an Expr is immutable and runbooks ask for the same few every scrape."""
    return Expr(text, _Parser(text).parse())


def _num(v: Value) -> float | None:
    if v is None or isinstance(v, bool):
        return None if v is None else float(v)
    return None if math.isnan(v) else v


def _eval(n: Node, env: Mapping[str, Value]) -> Value:
    op = n.op
    if op == "num":
        return float(n.value)  # type: ignore[arg-type]
    if op == "bool":
        return bool(n.value)
    if op == "null":
        return None
    if op == "name":
        return env.get(str(n.value))
    if op == "and":
        a = _truth(_eval(n.args[0], env))
        if a is False:
            return False
        b = _truth(_eval(n.args[1], env))
        if b is False:
            return False
        return True if (a is True and b is True) else None
    if op == "or":
        a = _truth(_eval(n.args[0], env))
        if a is True:
            return True
        b = _truth(_eval(n.args[1], env))
        if b is True:
            return True
        return False if (a is False and b is False) else None
    if op == "not":
        a = _truth(_eval(n.args[0], env))
        return None if a is None else not a
    if op == "call":
        vals = [_num(_eval(a, env)) for a in n.args]
        if any(v is None for v in vals):
            return None
        return float(_FUNCS[str(n.value)](*vals))
    if op == "neg":
        v = _num(_eval(n.args[0], env))
        return None if v is None else -v
    left = _eval(n.args[0], env)
    right = _eval(n.args[1], env)
    if op in ("==", "!=") and (n.args[0].op == "null" or n.args[1].op == "null"):
        # `x == null` asks whether x is unknown: the one comparison that is never unknown.
        is_null = (left is None) if n.args[1].op == "null" else (right is None)
        return is_null if op == "==" else not is_null
    if op in ("==", "!=") and (isinstance(left, bool) or isinstance(right, bool)):
        if left is None or right is None:
            return None
        return (left == right) if op == "==" else (left != right)
    x, y = _num(left), _num(right)
    if x is None or y is None:
        return None
    return _arith(op, x, y)


def _arith(op: str, a: float, b: float) -> Value:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return None if b == 0 else a / b
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def _truth(v: Value) -> bool | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    return None if math.isnan(v) else v != 0
