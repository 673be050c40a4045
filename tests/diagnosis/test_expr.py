from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_oncall.runbooks.expr import ExprError, compile_expr


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("waiting > 10 and kv_max >= 0.9", {"waiting": 11.0, "kv_max": 0.95}, True),
        ("waiting > 10 and kv_max >= 0.9", {"waiting": 11.0, "kv_max": 0.5}, False),
        ("waiting > 10 and kv_max >= 0.9", {"waiting": 11.0}, None),  # unknown stays unknown
        ("waiting > 10 and kv_max >= 0.9", {"waiting": 1.0}, False),  # false and unknown is false
        ("waiting > 10 or kv_max >= 0.9", {"kv_max": 0.95}, True),  # unknown or true is true
        ("not (a > 1)", {"a": 0.0}, True),
        ("not (a > 1)", {}, None),
        ("a == null", {}, True),
        ("a == null or a < 2", {"a": 3.0}, False),
        ("a != null", {"a": 0.0}, True),
        ("flag == true", {"flag": True}, True),
        ("hit <= 0.5 * base", {"hit": 0.1, "base": 0.8}, True),
        ("a / b > 1", {"a": 1.0, "b": 0.0}, None),  # division by zero is unknown, not an error
        ("max(a, b) - min(a, b) >= 2", {"a": 5.0, "b": 2.0}, True),
        ("-a < 0", {"a": 2.0}, True),
        ("abs(a) > 1", {"a": -3.0}, True),
    ],
)
def test_three_valued_evaluation(text: str, env: dict[str, float | bool], expected: bool | None) -> None:
    assert compile_expr(text).evaluate(env) is expected


@pytest.mark.parametrize("bad", ["a >", "a > > 1", "__import__('os')", "a.b > 1", "a[0] > 1", "1 < a < 2",
                                 "open(1)", "a > 1 and", "(a > 1", "a ; b", "lambda: 1", "'x' == a"])
def test_rejects_anything_but_the_grammar(bad: str) -> None:
    with pytest.raises(ExprError):
        compile_expr(bad)


def test_names_lists_features() -> None:
    assert compile_expr("a > 1 and (b < c or max(d, 2) > 0)").names() == {"a", "b", "c", "d"}


def test_deep_nesting_is_refused_not_a_crash() -> None:
    with pytest.raises(ExprError):
        compile_expr("(" * 200 + "a" + ")" * 200)


@settings(max_examples=300)
@given(st.text(max_size=80))
def test_never_raises_anything_but_expr_error(text: str) -> None:
    try:
        expr = compile_expr(text)
    except ExprError:
        return
    expr.evaluate({})  # unknown features evaluate, they never raise
