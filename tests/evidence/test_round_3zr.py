"""Round 3zr's reader, written before check set 3zr was read (docs/evidence.md, "Round 3zr's reader, written before
check set 3zr"): a line of prose is read sentence by sentence, and a subject that went into an endless loop is a
report."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported


@pytest.mark.parametrize("text", [
    # a report, then a request that ends in a question mark, on one line
    "for some reason one of the GPUs on cn110 is not working as it should. Could someone please drain this node and "
    "check on it?",
    # advice first, the report after it: the condition belongs to the first sentence only
    "If the server hangs, restart it. Since the upgrade it hangs every hour.",
    "模型加载正常。推理时一直卡住，没有任何输出。",
])
def test_a_report_in_one_sentence_of_a_paragraph_is_read(text: str) -> None:
    assert reported.read(text + "\n").lines == (0,)


@pytest.mark.parametrize("text", [
    "Is the GPU not working? Check the driver first.",
    "If the server hangs, restart it. The watchdog does that for you.",
    "How do I know whether it hangs? 如何判断是否卡住？",
])
def test_questions_and_advice_stay_unread_sentence_by_sentence(text: str) -> None:
    assert reported.read(text + "\n").lines == ()


def test_sentences_split_at_stops_not_inside_numbers_or_paths() -> None:
    assert reported.sentences("vLLM 0.5.1 at /opt/x.py hangs. Then it dies! Why?") == [
        "vLLM 0.5.1 at /opt/x.py hangs.", "Then it dies!", "Why?"]
    assert reported.sentences("卡住了。怎么办？") == ["卡住了。", "怎么办？"]


@pytest.mark.parametrize(("text", "reports"), [
    ("The model enters a repetitive loop, outputting variations of the greeting over and over.", True),
    ("After a few turns it went into an infinite generation loop.", True),
    ("The scheduler enters a loop that polls the queue every 10 ms.", False),  # a design, not a malfunction
    ("To keep it from entering an endless loop, set max_tokens.", False),
])
def test_an_endless_loop_is_a_report_a_loop_is_not(text: str, reports: bool) -> None:
    assert (reported.line_reports(text) is not None) == reports
