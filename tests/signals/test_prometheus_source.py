"""PrometheusSource against a canned HTTP API: pages rebuilt from range queries."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from llm_oncall.signals.catalog import SIGNALS
from llm_oncall.signals.prometheus import PrometheusError, PrometheusSource, promql, validate_selector
from llm_oncall.signals.store import Store

from .pages import TTFT_NEW, cumulative, prom_quantile


def _series(name: str, pod: str, values: list[float], job: str = "vllm", **labels: str) -> dict[str, Any]:
    metric = {"__name__": name, "pod": pod, "job": job, "instance": f"{pod}:8000", "model_name": "m", **labels}
    return {"metric": metric, "values": [[100 + i, repr(v)] for i, v in enumerate(values)]}


def _histogram(base: str, pod: str, per_step: list[float]) -> list[dict[str, Any]]:
    out = []
    steps = [cumulative(per_step * i, TTFT_NEW) for i in range(4)]
    for j, (le, _) in enumerate(steps[0]):
        text = "+Inf" if le == float("inf") else repr(le)
        out.append(_series(f"{base}_bucket", pod, [s[j][1] for s in steps], le=text))
    out.append(_series(f"{base}_count", pod, [s[-1][1] for s in steps]))
    return out


def _answer(series: list[dict[str, Any]], up: list[dict[str, Any]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        result = up if query.startswith("up") else series
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": result}})

    return httpx.MockTransport(handler)


def _up(pod: str, values: list[str], job: str = "vllm") -> dict[str, Any]:
    return {"metric": {"__name__": "up", "pod": pod, "job": job, "instance": f"{pod}:8000"},
            "values": [[100 + i, v] for i, v in enumerate(values)]}


def test_colon_and_escaped_names_and_down_targets() -> None:
    series = [
        _series("vllm:num_requests_running", "a", [1, 2, 3, 4]),
        _series("vllm:num_preemptions_total", "a", [100, 103, 106, 109]),
        *_histogram("vllm:time_to_first_token_seconds", "a", [0.05] * 9 + [0.7]),
        # Prometheus stored this pod's names underscore-escaped
        _series("vllm_num_requests_running", "b", [7, 7, 7, 7]),
        _series("vllm_num_preemptions_total", "b", [5, 1, 2, 3]),  # restarted after the first step
        *_histogram("vllm_time_to_first_token_seconds", "b", [0.05] * 9 + [0.7]),
        # a router series has no model_name and must not count
        {"metric": {"__name__": "vllm:num_requests_running", "pod": "a", "server": "http://x"},
         "values": [[103, "99"]]},
    ]
    series[-1]["metric"].pop("model_name", None)
    up = [_up("a", ["1"] * 4), _up("b", ["1"] * 4), _up("c", ["0"] * 4), _up("other", ["0"] * 4, job="node")]
    source = PrometheusSource("http://prom:9090", window_s=3, step_s=1, clock=lambda: 103.2,
                              transport=_answer(series, up))
    store = Store(interval_s=1)
    store.add(source.collect())
    snap = store.snapshot(window_s=3)
    a, b, c = snap.pod("a"), snap.pod("b"), snap.pod("c")
    assert a is not None and b is not None and c is not None
    assert snap.pod("other") is None  # a down target of another job is not a vLLM pod
    assert a.running == 4 and b.running == 7
    assert a.preemptions_per_s == pytest.approx(9 / 3)
    assert b.preemptions_per_s == pytest.approx((1 + 1 + 1) / 3)  # the reset counts from zero
    expected = prom_quantile(0.99, cumulative([0.05] * 27 + [0.7] * 3, TTFT_NEW))
    assert a.ttft_p99 == pytest.approx(expected) and b.ttft_p99 == pytest.approx(expected)
    assert not c.up and c.running is None  # never up in the window: a pod we cannot see
    assert (snap.fleet.pods_total, snap.fleet.pods_up) == (3, 2)


def test_api_errors_are_prometheus_errors() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "parse error"})

    source = PrometheusSource("http://prom:9090", transport=httpx.MockTransport(handler))
    with pytest.raises(PrometheusError, match="bad_data: parse error"):
        source.collect()
    html = PrometheusSource("http://prom:9090",
                            transport=httpx.MockTransport(lambda r: httpx.Response(502, text="<html>")))
    with pytest.raises(PrometheusError, match="HTTP 502, not JSON"):
        html.query("up")


def test_promql_uses_promql_aggregators_and_both_spellings() -> None:
    for sig in SIGNALS:
        expr = promql(sig, 'job="vllm"')
        assert "mean by" not in expr
        for spelling in sig.spellings:
            assert json.dumps(spelling.name)[1:-1] in expr
    assert '"vllm_num_requests_waiting"' in promql(SIGNALS[1])


@pytest.mark.parametrize("selector", ['job="vllm"} or vector(1) or {a="b"', "job=vllm", 'job="x",) or up'])
def test_selector_injection_is_refused(selector: str) -> None:
    with pytest.raises(ValueError, match="invalid selector"):
        validate_selector(selector)
