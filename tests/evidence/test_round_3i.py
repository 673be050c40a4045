"""Focused tests for the general rules round 3i added (docs/evidence.md, "Round 3i"), all of them catalogue data: a
serving launcher's crashed shard and a Ray actor that is temporarily unavailable are other failures; TurboMind cutting
its session length for lack of KV cache memory is a KV cache sized too small at start; a bad output told as "started
outputting ... gibberish" even when a later clause says prompts "would output this gibberish"; a hang told as
something that "seems (to be) hung / stuck" or a call that "does not return and enters an endless loop"; a fault
light lit on an NVLink board. The signatures' own must-match / must-not-match examples run in test_signatures.py.
The real files are in tests/evidence/holdout/fresh-2026-12h-check.
"""

from __future__ import annotations

from llm_oncall.evidence.classify import classify_text


def test_a_crashed_launcher_shard_is_another_failure() -> None:
    text = (
        "SystemExit: 1 rank=0\n"
        "2024-06-03T07:12:23.785971Z ERROR text_generation_launcher: Shard 0 crashed\n"
        "2024-06-03T07:12:23.786015Z  INFO text_generation_launcher: Terminating webserver\n"
    )
    f = classify_text(text, "launcher.log")
    assert f.category == "other-failure" and f.kind == "tgi_shard_crashed" and not f.benign


def test_a_terminated_shard_at_shutdown_is_not_a_crash() -> None:
    f = classify_text("2023-07-07T17:55:44.134207Z  INFO text_generation_launcher: Shard 0 terminated\n", "l.log")
    assert f.kind != "tgi_shard_crashed"


def test_an_unavailable_ray_actor_is_another_failure() -> None:
    text = "ray.exceptions.ActorUnavailableError: The actor is temporarily unavailable: RpcError: Socket closed\n"
    f = classify_text(text, "ray.log")
    assert f.category == "other-failure" and f.kind == "ray_actor_unavailable"


def test_turbomind_truncating_the_session_for_kv_memory_is_a_cache_too_small() -> None:
    text = (
        "[TM][WARNING] `session_len` truncated to 4928 due to limited KV cache memory\n"
        "[TM][ERROR] [Engine] Warm-up for 6144 tokens failed with status 6\n"
    )
    f = classify_text(text, "turbomind.log")
    assert f.category == "other-failure" and f.kind == "kv_cache_too_small"


def test_gibberish_told_before_a_would_clause_is_a_bad_output() -> None:
    text = (
        "While it wrote a poem it started outputting complete gibberish. Then every prompt would output this "
        "gibberish until I restarted it.\n"
    )
    f = classify_text(text, "issue.md")
    assert f.category == "bad-output"


def test_a_hypothetical_would_still_is_no_report() -> None:
    f = classify_text("With a broken template the model would produce garbage output.\n", "issue.md")
    assert f.category != "bad-output"


def test_an_engine_that_seems_hung_is_a_hang() -> None:
    f = classify_text("The log shows the same counts for over an hour, the vllm seems be hang.\n", "issue.md")
    assert f.category == "hang"


def test_a_call_that_never_returns_in_an_endless_loop_is_a_hang() -> None:
    f = classify_text("When this occurs, the model does not return and enters an endless loop.\n", "issue.md")
    assert f.category == "hang"


def test_a_person_who_seems_stuck_is_no_hang() -> None:
    f = classify_text("I seem to be stuck with the tokenizer config, any hint?\n", "issue.md")
    assert f.category != "hang"


def test_a_fault_light_on_the_nvlink_board_is_nvlink() -> None:
    f = classify_text("How can i fix it when the Fatal Error and Interrupt lights are on on the NVLINK board\n", "q.md")
    assert f.category == "nvlink" and f.kind == "nvlink_fault_light_reported"
