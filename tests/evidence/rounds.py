"""What the round tests (test_round_3m … 3x) ask of a classified text: its category, or whether it stays quiet."""

from __future__ import annotations

from llm_oncall.evidence.classify import classify_text


def category(text: str, name: str = "issue.md") -> str:
    return classify_text(text, name).category


def quiet(text: str, name: str = "issue.md") -> bool:
    """No alarm: a benign reading, or nothing recognised at all (scored as benign by the corpus)."""
    f = classify_text(text, name)
    return f.category == "benign" or (f.category == "unknown" and f.confidence <= 0.2)


def catalogue_category(text: str, name: str = "issue.md") -> str:
    """The catalogue's reading alone (the word-level fallback off): what a rule test of a one-line look-alike asks.
    The fallback's own answers on such lines are bounded in test_fresh_regime.py."""
    return classify_text(text, name, word_prior=False).category
