"""Round 3zj (docs/evidence.md, "Round 3zj"): written before check set 3zj was read, each with its look-alikes."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported


@pytest.mark.parametrize("heading", [
    "### What happened?",  # llama.cpp, Kubernetes
    "### What is the issue?",  # Ollama
    "**Describe the Issue**",  # KoboldCpp
    "### Problem description & steps to reproduce",  # llama.cpp
    "### Problem Description",  # ROCm
])
def test_a_bug_templates_report_heading_counts_even_as_a_question(heading: str) -> None:
    assert reported.line_reports(heading) == "report_heading"


def test_a_question_or_a_heading_in_prose_is_still_no_report() -> None:
    assert reported.line_reports("What happened to the second GPU after the reboot?") is None
    assert reported.line_reports("Is there a problem description somewhere?") is None
    assert reported.line_reports("## Feature request") is None
