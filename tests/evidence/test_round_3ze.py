"""Round 3ze (docs/evidence.md, "Round 3ze"): what the failure-report reader reads, and the rules round 3ze added."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import reported
from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize("line", ["vllm exited with code 0", "the worker exited with status 0 after the run",
                                  "the job exits with exit code 0"])
def test_a_clean_exit_is_no_report(line: str) -> None:
    assert not reported.read(line + "\n").reports(1, False)


@pytest.mark.parametrize("line", ["vllm exited with code 1", "the server exited with exit code 137",
                                  "the engine exits with status 0x1 after the warm-up"])
def test_an_exit_with_another_code_is_a_report(line: str) -> None:
    assert reported.read(line + "\n").reports(1, False)


def test_a_clean_exit_stays_benign() -> None:
    assert classify_text("vllm exited with code 0\n", "ok").benign
