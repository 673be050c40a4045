"""The trainee's PromQL: the runbooks' triage queries evaluated over scrapes."""

from __future__ import annotations

import math

import pytest

from llm_oncall.runbooks.loader import builtin
from llm_oncall.signals.exposition import parse
from llm_oncall.training import promql


def _store() -> promql.SeriesStore:
    s = promql.SeriesStore()
    for i, t in enumerate((0.0, 15.0, 30.0, 45.0)):
        for pod, slope in (("a", 1.0), ("b", 3.0)):
            total = slope * t if not (pod == "b" and t == 45.0) else 5.0  # b's counter resets at 45 s
            text = (f"vllm:num_requests_waiting{{engine=\"0\"}} {i if pod == 'a' else 0}\n"
                    f"vllm:request_success_total{{engine=\"0\"}} {total}\n"
                    f"vllm:iteration_tokens_total_count{{engine=\"0\"}} {100 if pod == 'b' else 100 + t}\n"
                    f"vllm:num_requests_running{{engine=\"0\"}} 4\n"
                    f"lat_bucket{{le=\"0.1\"}} {10 * i}\nlat_bucket{{le=\"1\"}} {20 * i}\n"
                    f"lat_bucket{{le=\"+Inf\"}} {20 * i}\n")
            s.add(t, {"job": "vllm", "pod": pod}, parse(text))
    return s


def q(expr: str, at: float = 45.0) -> promql.Value:
    return promql.query(expr, _store(), at)


def _by_pod(v: promql.Value) -> dict[str, float]:
    assert isinstance(v, dict)
    return {dict(k).get("pod", ""): x for k, x in v.items()}  # type: ignore[misc]


def test_instant_selector_and_matchers() -> None:
    assert _by_pod(q("vllm:num_requests_waiting")) == {"a": 3.0, "b": 0.0}
    assert _by_pod(q('vllm:num_requests_waiting{pod="a"}')) == {"a": 3.0}
    assert _by_pod(q('vllm:num_requests_waiting{pod=~"a|b", pod!="b"}')) == {"a": 3.0}


def test_rate_handles_counter_resets_and_sum_by() -> None:
    r = _by_pod(q("rate(vllm:request_success_total[1m])"))
    assert r["a"] == pytest.approx(1.0)
    assert r["b"] == pytest.approx((90.0 + 5.0) / 45.0)  # 0 → 90, reset → 5
    total = q("sum(rate(vllm:request_success_total[1m]))")
    assert isinstance(total, dict) and next(iter(total.values())) == pytest.approx(1.0 + 95.0 / 45.0)


def test_engine_hang_triage_query() -> None:
    # The engine-hang runbook's forward-progress check: b's heartbeat is flat while requests run.
    got = q("changes(vllm:iteration_tokens_total_count[1m]) == 0 and vllm:num_requests_running > 0")
    assert set(_by_pod(got)) == {"b"}


def test_histogram_quantile_and_arithmetic() -> None:
    v = q("histogram_quantile(0.5, sum by (le) (rate(lat_bucket[1m])))")
    assert isinstance(v, dict) and next(iter(v.values())) == pytest.approx(0.1)
    assert _by_pod(q("vllm:num_requests_waiting * 2 + 1")) == {"a": 7.0, "b": 1.0}
    assert _by_pod(q("vllm:num_requests_waiting > bool 1")) == {"a": 1.0, "b": 0.0}
    assert q("1 / 0") == math.inf


def test_errors_are_promql_errors() -> None:
    for bad in ("rate(vllm:num_requests_waiting)", "sum(rate(x[5m])) offset 1d", "foo(", "nosuch_fn(x)"):
        with pytest.raises(promql.PromQLError):
            q(bad)
    assert q("vllm:request_success_total offset 1d") == {}  # no data a day ago


def test_split_and_render() -> None:
    assert promql.split("vllm:a, vllm:b") == ["vllm:a", "vllm:b"]
    assert promql.split("sum by (a, b) (x)") == ["sum by (a, b) (x)"]
    assert promql.render({}) == "(empty result)"
    assert 'pod="a"' in promql.render(q("vllm:num_requests_waiting"))


def test_every_runbook_triage_query_parses() -> None:
    # A runbook's triage query is what a human pastes into Prometheus at 3 a.m.: it must at least be valid PromQL.
    queries = [(rb.id, part) for rb in builtin() for step in rb.triage if step.signal
               for part in promql.split(step.signal)]
    assert len(queries) >= 8
    for rb_id, expr in queries:
        try:
            q(expr)
        except promql.PromQLError as exc:
            raise AssertionError(f"{rb_id}: {expr!r}: {exc}") from None
