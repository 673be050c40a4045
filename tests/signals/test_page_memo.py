"""What a reader derives from a page is computed once and kept on the page (signals/series.py): the answers are the
ones a fresh computation gives, and a pair's increase is never served for another predecessor."""

from __future__ import annotations

from llm_oncall.signals.catalog import BY_KEY
from llm_oncall.signals.exposition import Page, parse
from llm_oncall.signals.series import _histogram_increase, histogram_increase, vector

TTFT = BY_KEY["ttft"]


def _page(counts: tuple[float, float, float], finished: float) -> Page:
    a, b, inf = counts
    return parse(
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        f'vllm:time_to_first_token_seconds_bucket{{model_name="m",le="0.1"}} {a}\n'
        f'vllm:time_to_first_token_seconds_bucket{{model_name="m",le="1.0"}} {b}\n'
        f'vllm:time_to_first_token_seconds_bucket{{model_name="m",le="+Inf"}} {inf}\n'
        f'vllm:time_to_first_token_seconds_count{{model_name="m"}} {inf}\n'
        f'vllm:time_to_first_token_seconds_sum{{model_name="m"}} {inf / 2}\n'
        "# TYPE vllm:request_success_total counter\n"
        f'vllm:request_success_total{{finished_reason="stop",model_name="m"}} {finished}\n')


def test_memoised_answers_equal_fresh_ones_and_pairs_are_keyed_by_their_predecessor() -> None:
    p0, p1, p2 = _page((1, 2, 3), 3), _page((2, 5, 6), 6), _page((4, 9, 12), 12)
    first = histogram_increase(p0, p2, TTFT)
    assert first == _histogram_increase(p0, p2, TTFT, None)
    assert histogram_increase(p0, p2, TTFT) is first  # kept on the page
    other = histogram_increase(p1, p2, TTFT)  # same later page, another predecessor: computed, not reused
    assert other == _histogram_increase(p1, p2, TTFT, None) and other != first
    assert other is not None and other.count == 6.0
    vec = vector(p2, BY_KEY["requests_finished"])
    assert vec == {(("finished_reason", "stop"), ("model_name", "m")): 12.0}
    assert vector(p2, BY_KEY["requests_finished"], {"finished_reason": "error"}) == {}
    assert p2 == _page((4, 9, 12), 12)  # the memo is not part of a page's value
