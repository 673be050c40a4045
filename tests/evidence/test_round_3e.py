"""Focused tests for the general rules round 3e added (docs/evidence.md, "Round 3e"): prose that names an error
in a fix, a feature or a described behaviour is a mention, not a report (described.py); SGLang's named watchdog
line; a KV cache near full with requests waiting in any wording, and KV pressure named in a report; one run's
exit 137 explained next to its log link; an output that is one endless identifier. The signatures' own
must-match / must-not-match examples run in test_signatures.py. The real files are in
tests/evidence/real/fresh-2026-12d-heldout.
"""

from __future__ import annotations

from llm_oncall.evidence import described, outputs
from llm_oncall.evidence.classify import classify_text

# --- a fix, a feature or a behaviour names an error; a report says it happened ----------------------------

FIX_PR = ("This is a permanent fix to the capture issue. We add a wrapper that detects "
          "`cudaErrorStreamCaptureInvalidated` at EndCapture time and re-runs the callable eagerly.\n\n"
          "Fixes #1185\n")


def test_a_fix_pr_naming_an_error_is_a_mention() -> None:
    assert described.is_change_document(FIX_PR)
    f = classify_text(FIX_PR, "pr")
    assert f.benign and f.kind == "error_named_in_prose"
    assert f.facts["named"] == ["cuda_graph_capture_error"]


def test_a_report_naming_the_same_error_stays_a_report() -> None:
    report = ("### Describe the bug\n\nI get this when the server starts, then it exits. "
              "It fails with cudaErrorStreamCaptureInvalidated during capture.\n")
    assert not described.is_change_document(report)
    assert classify_text(report, "issue").category == "cuda-graph"


def test_a_fix_pr_keeps_the_crash_it_pastes_as_a_log() -> None:
    text = FIX_PR + ("\n```\nRuntimeError: CUDA error: operation failed due to a previous error during capture\n"
                     "CUDA error: operation not permitted when stream is capturing\n```\n")
    f = classify_text(text, "pr-with-log")
    assert not f.benign and f.category == "cuda-graph"


def test_a_described_behaviour_is_not_an_event() -> None:
    rule = ("> when an uncorrectable ECC error is detected, the NVIDIA driver software will perform error "
            "recovery.\n\nso we only watch the remapped rows.\n")
    assert described.describes_behaviour(rule.splitlines()[0])
    assert classify_text(rule, "note").benign
    event = "Our job died: an uncorrectable ECC error was encountered on GPU 3 at 02:14.\n"
    assert not classify_text(event, "event").benign


def test_a_review_that_validated_a_patch_is_a_change_document() -> None:
    text = ("Validated this fix on 4 GPUs.\n\nWithout the patch the scheduler hung the instant the host tier "
            "was exercised, then the watchdog fired.\n\n+1 to merge.\n")
    assert described.is_change_document(text)
    assert classify_text(text, "review").benign


# --- SGLang's watchdog line family ---------------------------------------------------------------------------

def test_the_named_watchdog_line_is_a_hang() -> None:
    for line in ("[TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
                 "[2025-03-06 11:02:17 TP0] Watchdog timeout (self.watchdog_timeout=300)"):
        f = classify_text(line + "\n", "sglang")
        assert (f.category, f.kind) == ("hang", "sglang_watchdog_timeout"), line
    assert classify_text("python -m sglang.launch_server --watchdog-timeout 600\n", "cmd").category != "hang"


# --- KV pressure in people's words ----------------------------------------------------------------------------

def test_a_kv_cache_near_full_with_requests_waiting_is_pressure() -> None:
    text = ("We pressure-test the server; the GPU KV Cache utilization quickly increases (GPU KV Cache > 90%). "
            "New requests are added and all in Pending state, nothing more is generated.\n")
    f = classify_text(text, "kv")
    assert (f.category, f.kind) == ("kv-pressure", "kv_cache_full_reported")


def test_a_kv_cache_near_full_with_nothing_waiting_or_as_a_rule_is_not() -> None:
    for text in ("GPU KV cache usage above 95% during the benchmark, every request finished in time.\n",
                 "When the KV cache is near-fully occupied, vLLM preempts requests and pending requests wait.\n"):
        assert classify_text(text, "kv").category != "kv-pressure", text


def test_kv_pressure_named_in_a_report() -> None:
    text = "Observed: under KV pressure, output throughput and TPOT p99 were worse than off pressure.\n"
    assert classify_text(text, "perf").category == "kv-pressure"
    assert classify_text("Long prompts can cause KV pressure on small GPUs.\n", "doc").category != "kv-pressure"


# --- one run's exit 137, explained next to its log ---------------------------------------------------------

def test_exit_137_explained_next_to_the_runs_log_is_a_report() -> None:
    link = "https://ci.example.org/tasks/abc/runs/0/logs/public/logs/live.log\n\n"
    text = link + "Status code 137 indicates OOM error in the docker container. A bigger worker should fix it.\n"
    assert classify_text(text, "ci").category == "other-failure"
    page = "Exit code 137 means the container process was killed by the OOM killer.\n"
    assert classify_text(page, "doc").category != "other-failure"


# --- an output that is one endless identifier ------------------------------------------------------------

def test_an_endless_identifier_is_garbage_but_a_long_test_name_is_not() -> None:
    soup = ("def main_module_example_rebind_to_context_freeze_use_main_question_order_3_buggy_in_fact_oa_"
            "watrdut_numberic_table_qreserdoc_hack_threading_list_demo_request_code_sign_question_numbe")
    assert "identifier_soup" in outputs.garbage(soup).reasons
    name = "def test_a_run_of_one_character_in_prose_is_a_quoted_output_but_rules_are_not() -> None:"
    assert "identifier_soup" not in outputs.garbage(name).reasons
    text = "Example output 1:\n\n```text\n" + soup + "\n```\n"
    assert classify_text(text, "soup").category == "bad-output"
