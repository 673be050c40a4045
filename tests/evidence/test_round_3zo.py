"""Round 3zo's reader rule (docs/evidence.md, "The reader's 'same here', written before check set 3zo"): a reader
of the thread who met the same malfunction reports it. Written from the common wording of issue comments before
check set 3zo was read."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported


@pytest.mark.parametrize("line", [
    "I have the same issue on torch 2.4.",
    "We are having the exact same problem with two H100s.",
    "I've had the same problem since 0.6.3",
    "Same issue here, with the 24.10 image.",
    "I had a similar crash yesterday.",
])
def test_a_reader_who_met_the_same_malfunction_reports_it(line: str) -> None:
    assert reported.line_reports(line) == "same_here"


@pytest.mark.parametrize("line", [
    "I have the same question.",
    "If I have the same issue, what should I do?",
    "Do you have the same problem on the 0.6 release?",
    "We could have the same issue on ROCm, so the guard is in both paths.",
    "I don't have the same problem on my machine.",
])
def test_the_same_words_without_a_malfunction_met_are_not(line: str) -> None:
    assert reported.line_reports(line) is None
