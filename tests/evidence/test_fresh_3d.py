"""Focused tests for the general rules the fourth fresh set of 2026-12 drove (docs/evidence.md, "Fourth fresh
set of 2026-12"). The signatures' own must-match / must-not-match examples run in test_signatures.py; these
cover the code: the paste reader's new quotes (an interactive prompt's answer, a run of one character in
prose, a cue that points below, the text after a tool's log in a fence, an unclosed fence), the output
measure (a role word glued to a turn, words glued to a function word with the document's vocabulary) and
kubectl get all's pod/ rows. The real files are in tests/evidence/real/fresh-2026-12d and fresh-2026-12c-post.
"""

from __future__ import annotations

from llm_oncall.evidence import crashloop, outputs, paste
from llm_oncall.evidence.classify import classify_text

# --- quotes the reader now finds ---------------------------------------------------------------------------

def test_the_lines_after_an_interactive_prompt_are_the_models_answer() -> None:
    text = ("I get this, and it loops (see below)\n\nollama run llama3\n>>> hello\n"
            "Hello! Nice to meet you. Shall we chat?assistant\n\nSure! What about a game?assistant\n\n"
            "Great, you start!assistant\n")
    q = [x for x in paste.read(text).quoted if x.how == "repl"]
    assert [x.line for x in q] == [5]
    f = classify_text(text, "repl")
    assert (f.kind, f.category) == ("garbage_quoted_output", "bad-output")
    healthy = ">>> hello\nHello! Nice to meet you. How can I help you today?\n"
    assert classify_text(healthy, "ok").category != "bad-output"
    python = ">>> print(model.generate('hi'))\nhi there\n"
    assert not [x for x in paste.read(python).quoted if x.how == "repl"]


def test_a_run_of_one_character_in_prose_is_a_quoted_output_but_rules_and_redactions_are_not() -> None:
    text = "Llama 3.2 ended up texting @@@@@@@@@@@@@@@@@ after the first prompt, then GGGGGGGGGGGG's.\n"
    runs = [x.text for x in paste.read(text).quoted if x.how == "run"]
    assert runs == ["@@@@@@@@@@@@@@@@@", "GGGGGGGGGGGG"]
    assert classify_text(text, "run").category == "bad-output"
    for line in ("See the table ============ below", "token=xxxxxxxxxxxxxxxx in the URL", "id 1111111111111",
                 "caret ^^^^^^^^^^^^ under the error", "a ------------ rule", 'the output was "!!!!!!!!!!!!"'):
        assert not [x for x in paste.read(line + "\n").quoted if x.how == "run"], line


def test_a_cue_that_points_below_and_the_text_after_a_tools_log_in_an_unclosed_fence() -> None:
    log = "\n".join(f"gpt2_model_load: n_layer = {i}" for i in range(8))
    text = ("the model outputs blank tokens (the example below shows them as boxes):\n\n```\n"
            f"main: seed = 1\n{log}\nmain: prompt: 'Java is a programming '\n\nJava is a programming"
            + "□" * 25 + "\n")
    q = [x for x in paste.read(text).quoted if x.how == "fence"]
    assert [x.line for x in q] == [15] and q[0].text.startswith("Java is a programming")
    f = classify_text(text, "tail")
    assert (f.category, f.lines) == ("bad-output", (15,))
    closed = text + "```\n"
    assert [x.line for x in paste.read(closed).quoted if x.how == "fence"] == [15]
    uncued = "Here is my log:\n```\n" + log + "\nall done, 8 layers\n```\n"
    assert classify_text(uncued, "log").category != "bad-output"


# --- the output measure ------------------------------------------------------------------------------------

def test_a_role_word_glued_to_the_end_of_turns_is_a_leaked_template() -> None:
    leak = "Nice to meet you. Shall we chat?assistant\n\nSure! What about a game?assistant"
    assert "special_tokens" in outputs.garbage(leak).reasons
    assert not outputs.garbage("Ask the assistant. The assistant answers every user.").garbage


def test_glued_words_count_with_the_words_of_the_document_they_are_quoted_in() -> None:
    bad = ("The smell of tobacco smoke in theseemingly ceaseless breeze which swept through during these "
           "conversationswas unmistakable evidence of his presence to anyone who heard that faintpunctual "
           "pungency overrode any other possible olfactory suggestion; butRobert could sense how he etc.")
    good = bad.replace("theseemingly", "the seemingly").replace("conversationswas", "conversations was") \
        .replace("butRobert", "but Robert").replace("faintpunctual", "faint punctual")
    assert not outputs.garbage(bad).garbage  # alone, the rests of the glued words occur nowhere else
    assert "word_salad" in outputs.garbage(bad, vocab=outputs.words_of(good)).reasons
    assert not outputs.garbage(good, vocab=outputs.words_of(bad + good)).garbage
    healthy = ("Together with the others we went forward tonight, and therefore the theory of the thermal "
               "forecast held; another forever question stayed open for the offset and the official report "
               "of the weather that evening, as it usually does when the ward and the night are quiet.")
    assert not outputs.garbage(healthy, vocab=outputs.words_of(healthy + " ever night ward gether")).garbage


# --- kubectl get all ---------------------------------------------------------------------------------------

def test_kubectl_get_all_pod_rows_with_a_recent_restart() -> None:
    text = ("NAME                                  READY   STATUS    RESTARTS       AGE\n"
            "pod/vllm-standalone-3b-57c8d4996c-qtr8b   0/1     Running   6 (118s ago)   20m\n")
    f = crashloop.parse(text, "get-all")
    assert f is not None and (f.kind, f.category) == ("container_restarts", "other-failure")


# --- reports in prose: the rules and their look-alikes -------------------------------------------------------

def test_hangs_and_full_caches_told_in_prose_and_what_is_no_report() -> None:
    assert classify_text("Obviously, the root cause is that RANK2 is hanged.\n", "h").category == "hang"
    assert classify_text("I suspect we have a deadlock -- both ranks are waiting for the send.\n", "h").category \
        == "hang"
    habit = "Distributed training runs occasionally hang at NCCL collectives; py-spy helps diagnose them.\n"
    assert classify_text(habit, "b").category != "hang"
    assert classify_text("KV cache usage接近100%时，TPOT激增四五倍\n", "k").category == "kv-pressure"
    assert classify_text("12并发：423ms TPOT，Running 8，Waiting 4， KVC占用率98.7%\n", "k").category == "kv-pressure"
    assert classify_text("8并发：440ms TPOT，Running 8，Waiting 0， KVC占用率98.9%\n", "k").category != "kv-pressure"
