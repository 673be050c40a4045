"""Focused tests for the general rules round 3g added (docs/evidence.md, "Round 3g"): a PR or feature template's
headings, a bot reviewer's header and a diff fence mark a change document even beside "We see ..."; code,
configuration and diff fences in a change document name errors without reporting them; a diff is never a model's
output; a definition ("the error X occurs when ...") is a described behaviour; a how-to quotes errors it explains;
a blockquoted error in a thread whose problem is solved is history; a bad output and a hang told in plain words
(the signatures' own must-match / must-not-match examples run in test_signatures.py); two SGLang lines without
their queue, both with a full cache. The real files are in tests/evidence/real/fresh-2026-12f-check.
"""

from __future__ import annotations

from llm_oncall.evidence import described
from llm_oncall.evidence.classify import classify_text

# --- change documents: strong marks ---------------------------------------------------------------------------

PR_TEST_SECTION = ("## Purpose\n\nDo not count preempted tokens in the prefix cache hit rate.\n\n## Test Plan\n\n"
                   "We see the hit rate drop from 30% to 0.2% after the change.\n")


def test_a_pr_template_heading_beats_a_first_person_in_its_test_section() -> None:
    assert described.is_change_document(PR_TEST_SECTION)


def test_a_bug_template_heading_is_never_a_change_document() -> None:
    text = "### Describe the bug\n\n## Test Plan\n\nWe see the server crash on start.\n"
    assert not described.is_change_document(text)


def test_a_bot_reviewers_header_and_a_diff_fence_mark_a_change() -> None:
    assert described.is_change_document("**coderabbitai[bot]**:\nThe capture is invalidated when the stream syncs.\n")
    assert described.is_change_document("src/check.py:12\n```diff\n+    print('ECC error found')\n```\n")
    assert not described.is_change_document("I get this error every time I start the server.\n")


# --- code fences in a change document --------------------------------------------------------------------------

ECC_REGEX_PR = ("Update errorSpec to handle ecc error\n\nFix #4314\n\n```yaml\n"
                "- userLogRegex: \"(?i)CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered\"\n```\n")
ECC_LOG_REPORT = ("I get this on every run:\n\n```\n"
                  "RuntimeError: CUDA error: uncorrectable ECC error encountered\n```\n")


def test_an_error_string_in_a_change_documents_yaml_fence_is_named_not_reported() -> None:
    f = classify_text(ECC_REGEX_PR, "pr.md")
    assert f.benign and f.kind == "error_named_in_prose"


def test_the_same_error_in_a_reports_plain_fence_keeps_its_finding() -> None:
    f = classify_text(ECC_LOG_REPORT, "issue.md")
    assert f.category == "gpu-memory" and not f.benign


def test_code_rows_cover_code_fences_only() -> None:
    text = "intro\n```python\nx = 1\n```\n```\nlog line\n```\n"
    assert described.code_rows(text) == frozenset({2, 3, 4})


# --- a diff is code under change, not a model output ---------------------------------------------------------

def test_a_diff_of_repeated_warning_strings_is_not_a_repeating_output() -> None:
    line = '-           print("Warning: Detected a GPU SRAM uncorrectable error for GPU ID {}, please offline it")\n'
    text = "experimental/check_gpu_ecc.py:189\n```diff\n" + line * 6 + "```\n"
    f = classify_text(text, "review.md")
    assert f.category != "bad-output"
    # the same lines without the diff fence are still read as one output when nothing else recognises them
    assert described.has_diff(text) and not described.has_diff(line * 6)


# --- definitions, how-tos, resolved threads ---------------------------------------------------------------------

def test_a_definition_of_an_error_is_a_described_behaviour() -> None:
    assert described.describes_behaviour(
        'The error message "capture invalidated stream capture state" occurs when a CUDA stream\'s capture '
        "sequence has been compromised by an illegal operation.")
    assert described.describes_behaviour("This error indicates that the stream capture was invalidated.")
    assert not described.describes_behaviour("The capture failed with cudaErrorStreamCaptureInvalidated on rank 3.")


HOWTO_802 = ("if you get the following error using cuda in pytorch:\n\n```\n"
             "RuntimeError: cuda runtime error (802) : system not yet initialized at THCGeneral.cpp:50\n```\n\n"
             "it means that the fabric manager is not installed. What you want to do is to install it.\n")
REPORT_802 = ("We run vLLM on an HGX H100 node and I get this at start-up:\n\n```\n"
              "RuntimeError: cuda runtime error (802) : system not yet initialized at THCGeneral.cpp:50\n```\n")


def test_a_howto_quotes_the_error_it_explains() -> None:
    assert described.is_guide(HOWTO_802)
    assert classify_text(HOWTO_802, "howto.md").benign


def test_a_report_of_the_same_error_is_not_a_guide() -> None:
    assert not described.is_guide(REPORT_802)
    assert classify_text(REPORT_802, "issue.md").category == "nvlink"


RESOLVED = ("> > ggml_cuda_init: failed to initialize CUDA: system not yet initialized\n>\n"
            "> Do other CUDA apps work correctly on your GPUs?\n\n"
            "Turns out that's what my issue was: the fabric manager version. I reinstalled it and it works now.\n")


def test_a_blockquoted_error_in_a_solved_thread_is_history() -> None:
    assert described.is_resolved(RESOLVED)
    assert classify_text(RESOLVED, "thread.md").benign


def test_a_blockquoted_error_without_a_resolution_is_still_reported() -> None:
    text = RESOLVED.split("\n\n")[0] + "\n\nStill the same on the new driver.\n"
    assert not described.is_resolved(text)
    assert classify_text(text, "thread.md").category == "nvlink"


# --- a bad output and a hang in words -------------------------------------------------------------------------

def test_a_bad_output_told_in_a_report_is_bad_output() -> None:
    f = classify_text("### Describe the bug\n\nAfter the upgrade vllm produces gibberish for every prompt.\n", "b.md")
    assert f.kind == "bad_output_reported" and f.category == "bad-output" and f.confidence <= 0.45


def test_a_bad_output_named_in_a_change_document_is_demoted() -> None:
    text = "## Purpose\n\nThe FP8 path returns garbage for long prompts; this PR changes the scale.\n"
    f = classify_text(text, "pr.md")
    assert f.benign


def test_a_hang_told_in_plain_english_is_a_hang() -> None:
    f = classify_text("After a day of idling, the first inference request gets blocked until we send another.\n"
                      "Often stuck in any number of training step, and cuda usage is 0.\n", "h.md")
    assert f.category == "hang" and f.kind == "ranks_stuck_reported"


# --- two SGLang lines without their queue -------------------------------------------------------------------------

def _sgl(usage: float) -> str:
    return f"[TP0] Decode batch. #running-req: 36, #token: 958017, token usage: {usage:.2f}\n"


def test_two_full_sglang_lines_without_a_queue_are_kv_pressure() -> None:
    text = _sgl(0.96) + '[INFO] "POST /v1/chat/completions" 200 OK\n' + _sgl(0.96)
    f = classify_text(text, "sglang.log")
    assert f.category == "kv-pressure" and f.confidence == 0.35


def test_one_full_line_or_two_half_full_lines_are_not() -> None:
    assert classify_text(_sgl(0.96), "sglang.log").category != "kv-pressure"
    assert classify_text(_sgl(0.5) + _sgl(0.5), "sglang.log").category != "kv-pressure"
