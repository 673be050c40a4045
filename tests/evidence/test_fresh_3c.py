"""Focused tests for the general rules the third fresh set of 2026-12 drove (docs/evidence.md, "Third fresh
set of 2026-12"). The signatures' own must-match / must-not-match examples run in test_signatures.py; these
cover the code: the paste reader's new quotes, the output measure, stats lines cut by a wrap, and the
shm-broadcast wait read once or repeated. The real files are in tests/evidence/real/fresh-2026-12c.
"""

from __future__ import annotations

from llm_oncall.evidence import outputs, paste, stats
from llm_oncall.evidence.classify import classify_text

SHM = ("No available shared memory broadcast block found in 60 seconds. This typically happens when some processes "
       "are hanging or doing some time-consuming work (e.g. compilation).")


# --- logs are never a model output -------------------------------------------------------------------------

def test_go_timestamps_and_snake_case_prefixes_are_logs_not_outputs() -> None:
    go = "\n".join(f"2025/11/25 22:33:36 fm-wrapper: infiniband: found NVSwitch LPF device: mlx5_{i}" for i in range(5))
    llama = "\n".join(["load_tensors: offloading 12 repeating layers to GPU", "llama_context: n_ctx         = 2048",
                       "llama_context: n_batch       = 512", "print_info: EOG token        = 102 '[SEP]'",
                       "decode: cannot decode batches with this context (use llama_encode() instead)"])
    for text in (go, "On a DGX B200:\n```\n" + go + "\n```\n", llama):
        f = classify_text(text, "log")
        assert f.category != "bad-output", f
        assert outputs.parse_plain(paste.read(text).clean, "log") is None


# --- quotes the reader now finds ---------------------------------------------------------------------------

def test_speaker_labels_are_quoted_outputs_and_stutter_is_garbage() -> None:
    text = ("See how the answers repeat:\n\nMe: what is 2+3\nAI: The answer to 2+3 is 5!\n\nMe: what is 2+3\n"
            "AI: TheThe answer answer to to  22++33 is is  55!! and and it it is is always always five five\n")
    q = [x for x in paste.read(text).quoted if x.how == "speaker"]
    assert [x.line for x in q] == [7]  # line 4 is in the paragraph under the cue "answers repeat:"
    f = classify_text(text, "chat")
    assert (f.kind, f.category, f.lines) == ("garbage_quoted_output", "bad-output", (7,))


def test_stutter_needs_many_doubled_words() -> None:
    assert outputs.garbage("the the answer answer is is five five and and it it is is always always five").garbage
    healthy = ("He had had enough of the rain, so he went home and read a book about the history of the city and "
               "its bridges.")
    assert not outputs.garbage(healthy).garbage


def test_a_quote_the_user_calls_gibberish_is_bad_output() -> None:
    text = ('output = llm.generate(text)\n\ngot the gibberish outpus:\n```text\n\n'
            '    "$GET images (as \n(col-% http=\n```\n')
    f = classify_text(text, "q")
    assert (f.kind, f.category, f.lines) == ("garbage_quoted_output", "bad-output", (6,))
    assert "called_garbage" in f.facts["reasons"]
    plain = 'the output looks like:\n```text\n    "$GET images (as \n(col-% http=\n```\n'
    assert classify_text(plain, "q").category != "bad-output"


def test_a_trailing_cue_and_a_printed_repr_string() -> None:
    text = ("The output of the above code is\n```\n答：\nProcessed prompts: 100%|███| 2/2 [00:02<00:00,  1.42s/it]\n"
            "'L 1. 000000000000000\\n\\n\\n11500000000000001\\n\\n\\n\\n0\\n0\\n\\n\\n灭'\n```\n")
    f = classify_text(text, "repr")
    assert (f.kind, f.category, f.lines) == ("garbage_quoted_output", "bad-output", (5,))
    ok = "The output of the above code is\n```\n'Paris is the capital of France.'\n```\n"
    assert classify_text(ok, "repr").category != "bad-output"


def test_one_digit_filling_an_output_is_garbage_but_a_number_in_a_sentence_is_not() -> None:
    assert "one_character" in outputs.garbage("0000000000000000000000 000000 1").reasons
    assert not outputs.garbage("The population is 1000000000 and growing").garbage
    assert not outputs.garbage("12345678901234567890").garbage


# --- stats lines cut by a wrap ----------------------------------------------------------------------------

def test_a_stats_line_wrapped_mid_field_is_read_whole_on_its_first_line() -> None:
    text = ('Most recent stats show that "INFO 10-27 20:44:35 llm_engine.py:624] Avg prompt throughput: 642.0 '
            "tokens/s, Avg generation throughput: 61.0 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 20 "
            'reqs, GPU KV cache u\nsage: 98.7%, CPU KV cache usage: 0.0%".\n\nAny idea?\n')
    f = stats.parse(paste.read(text).clean, "wrapped")
    assert f is not None and (f.kind, f.category, f.lines) == ("vllm_stats_kv_pressure", "kv-pressure", (1,))
    unwrapped = ("INFO 10-27 20:44:35 llm_engine.py:624] Avg prompt throughput: 1.0 tokens/s, Avg generation "
                 "throughput: 61.0 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: "
                 "12.0%, CPU KV cache usage: 0.0%\nsage: 98.7% is not a continuation of a complete line\n")
    g = stats.parse(unwrapped, "whole")
    assert g is not None and g.benign


# --- the shm-broadcast wait: a quoted notice, a logged line, a repeat ------------------------------------

def test_one_quoted_shm_wait_is_a_notice_a_logged_or_repeated_one_a_hang() -> None:
    quoted = f"It takes a long time to load the model, and this is printed:\n\n```\n{SHM}\n```\n"
    assert classify_text(quoted, "q", word_prior=False).category != "hang"
    # since round 3o the word-level prior answers where nothing is recognised, here a hang at 0.3 (a look-alike it
    # cannot tell from a report: docs/evidence.md, "Round 3o")
    assert classify_text(quoted, "q").kind == "word_prior"
    logged = f"(EngineCore_DP0 pid=1) INFO 10-22 09:43:49 [shm_broadcast.py:466] {SHM}\n"
    assert classify_text(logged, "l").category == "hang"
    assert classify_text(f"{SHM}\n{SHM}\n", "r").category == "hang"
