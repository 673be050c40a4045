"""A postmortem's prevent item quotes what the fix's what-if drill measured (the runbook's `measured:`)."""

from __future__ import annotations

from llm_oncall.postmortem.build import _long_term_text
from llm_oncall.runbooks.schema import LongTerm, Text, WhatIfFigure


def _item(slo: tuple[float, float], failed: tuple[int, int]) -> LongTerm:
    return LongTerm(tag="capacity", text=Text(en="A warm pool.", zh="预热池。"), what_if="warm-pool-20",
                    measured=WhatIfFigure(seed=7, measured_on="2026-12-02", slo_minutes_burned=slo,
                                          requests_failed=failed, pages=(1, 1)))


def test_the_figure_is_quoted_with_its_seed_and_day() -> None:
    text = _long_term_text(_item((25.0, 2.5), (2013124, 46160)), "en")
    assert text == ("A warm pool. — what-if `warm-pool-20` (seed 7, 2026-12-02): SLO minutes 25 → 2.5, failed requests "
                    "2,013,124 → 46,160, pages 1 → 1")


def test_a_fix_that_measured_worse_says_so() -> None:
    assert "worse than without it" in _long_term_text(_item((2.5, 12.0), (15, 2188)), "en")
    assert "更差" in _long_term_text(_item((2.5, 12.0), (15, 2188)), "zh")


def test_without_a_figure_the_text_stands_alone() -> None:
    plain = LongTerm(tag="capacity", text=Text(en="A warm pool.", zh="预热池。"))
    assert _long_term_text(plain, "en") == "A warm pool."
