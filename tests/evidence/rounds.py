"""What the round tests (test_round_3m … 3s) ask of a classified text: its category, or whether it stays quiet."""

from __future__ import annotations

from llm_oncall.evidence.classify import classify_text


def category(text: str, name: str = "issue.md") -> str:
    return classify_text(text, name).category


def quiet(text: str, name: str = "issue.md") -> bool:
    """No alarm: a benign reading, or nothing recognised at all (scored as benign by the corpus)."""
    f = classify_text(text, name)
    return f.category == "benign" or (f.category == "unknown" and f.confidence <= 0.2)
