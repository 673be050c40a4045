"""Round 3zq (docs/evidence.md, "Check set 3zq, how often two labellers agree, and round 3zq"): read from check set
3zq's misses after it was measured: i915's hang lines as kernels before its move to drm_notice() print them, and a
report the word-level prior knows no word of, read by its own cues."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import prior, reported
from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize("text", [
    "Nov  9 03:53:18 host kernel: [ 8017.380507] i915 0000:2c:00.0: GPU HANG: ecode 12:10:9edbfffe, ccs0 in python "
    "[14654]",
    "Nov  9 03:53:18 host kernel: [ 8017.380519] i915 0000:2c:00.0: [drm] python[14654] context reset due to GPU hang",
    "[ 2730.991084] i915 0000:00:02.0: renderThread[22381] context reset due to GPU hang",
])
def test_i915_hang_lines_with_and_without_drm_prefix(text: str) -> None:
    f = classify_text(text + "\n", "dmesg.txt")
    assert (f.kind, f.category) == ("intel_gpu_reset", "gpu-hardware")


@pytest.mark.parametrize("text", [
    "We see a context reset due to GPU hang on every long prompt, is that expected",
    "i915 0000:00:02.0: [drm] GuC firmware i915/tgl_guc_70.bin version 70.20.0",
    "i915 0000:00:02.0: [drm] GPU HANG: ecode 12:1:, in python",  # cut before the hex: no hang record
])
def test_i915_look_alikes_are_not_a_hang(text: str) -> None:
    assert classify_text(text + "\n", "dmesg.txt").kind != "intel_gpu_reset"


# Short reports in plain words: the packaged prior's vocabulary has none of them, so it has no reading at all
PLAIN_REPORT = ("During training the first output is normal, but subsequent outputs keep repeating and filling up "
                "the context.\n")


def test_a_report_the_prior_knows_no_word_of_takes_its_cues_class() -> None:
    fb = prior.packaged()
    assert fb is not None and prior.read(fb.model, PLAIN_REPORT) is None
    f = classify_text(PLAIN_REPORT, "issue.md")
    assert (f.kind, f.category, f.benign) == ("failure_reported", "bad-output", False)
    assert "prior_class" not in f.facts and f.lines == (1,)


def test_without_a_reading_cues_that_tie_give_no_answer() -> None:
    # a hang cue and a crash cue, one each, and no prior ranking to break the tie: unknown beats a guess
    text = "The pod hangs; later the daemon segfaulted.\n"
    fb = prior.packaged()
    assert fb is not None and prior.read(fb.model, text) is None
    assert reported.cue_class(text, reported.read(text), ()) is None
    assert reported.cue_class(text, reported.read(text), ("hang", "other-failure")) == "hang"
    assert classify_text(text, "issue.md").kind != "failure_reported"


@pytest.mark.parametrize("text", [
    "Does the output keep repeating when the context fills up?\n",  # a question
    "If subsequent outputs keep repeating, lower the temperature.\n",  # advice
    "Fixes a bug where outputs keep repeating after a weight sync.\n",  # a change that names the failure
])
def test_without_a_reading_no_report_no_answer(text: str) -> None:
    assert classify_text(text, "issue.md").kind != "failure_reported"
