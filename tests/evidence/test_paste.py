"""The paste reader (evidence/paste.py): decoration removed line for line, quoted outputs found in prose, log
text never read as an output, findings keep the paste's line numbers; it never raises (fuzzed)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_oncall.evidence import corpus, outputs, paste
from llm_oncall.evidence.classify import classify_text
from llm_oncall.evidence.model import split_lines

DECORATION = [">", "> ", "```", "```text", "~~~", "svc-1  | ", "llama.cpp-gpu  | ", "\x1b[31m", "[36m", "  <-- here",
              '"', "“", "”", "output:", "looks like:\n", "\n\n", "# heading\n", "* bullet ", "NCCL INFO ", "ERROR "]


def test_clean_keeps_one_line_per_line_and_strips_decoration() -> None:
    text = ("The server says:\n```text\nsvc-1  | update_slots : failed to find free space in the KV cache  <-- here\n"
            "svc-1  | update_slots : failed to find free space in the KV cache\n```\n> quoted line\n\x1b[31mred\x1b[0m")
    p = paste.read(text)
    assert len(p.lines) == len(split_lines(text))
    assert p.lines[1] == "" and p.lines[4] == ""  # fences
    assert p.lines[2] == "update_slots : failed to find free space in the KV cache"
    assert p.lines[5] == "quoted line"
    assert p.lines[6] == "red"
    assert [b.kind for b in p.blocks if b.kind == "fence"] == ["fence"]


def test_a_single_line_with_a_bar_is_not_a_compose_prefix() -> None:
    p = paste.read("GPU  Name | something\nplain text")
    assert p.lines[0] == "GPU  Name | something"


def test_findings_keep_the_line_numbers_of_the_paste() -> None:
    text = ("I run the server in docker compose and after a while:\n\n```\n"
            "llama.cpp-gpu  | slot 0 is processing [task id: 812]\n"
            "llama.cpp-gpu  | update_slots : failed to find free space in the KV cache, "
            "retrying with smaller n_batch = 256\n"
            "```\n")
    f = classify_text(text, "paste.md")
    assert f.category == "kv-pressure"
    assert f.lines == (5,)


def test_quoted_outputs_in_prose() -> None:
    text = ('The model only answers "!!!!!!!!!!!!!!!!!!!!!!!" whatever I ask.\n\n'
            "It always looks like: ).\" ⁇ !+,'-$..-.\n")
    got = paste.read(text).quoted
    assert [q.how for q in got] == ["quotes", "cue"]
    f = classify_text(text, "issue.md")
    assert f.kind == "garbage_quoted_output" and f.incident_hint == "bad-model-rollout"
    assert f.lines == (1, 3)


def test_a_healthy_quote_is_not_garbage() -> None:
    text = 'The answer was "Paris is the capital of France, on the Seine." which is right.\n'
    assert paste.read(text).quoted
    assert classify_text(text, "ok.md").benign


def test_log_and_command_text_is_never_a_quoted_output() -> None:
    text = ("The output looks like:\n\n"
            "[2025-01-01 10:00:00] ERROR x failed\n[2025-01-01 10:00:01] ERROR x failed\n"
            "[2025-01-01 10:00:02] ERROR x failed\n\n"
            "> NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n> NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"
            "```\n0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000\n```\n")
    assert paste.read(text).quoted == ()
    assert classify_text(text, "log.md").category != "bad-output"


def test_an_engine_retry_loop_quoted_in_a_reply_is_kv_pressure_not_garbage() -> None:
    line = "> update_slots : failed to find free space in the KV cache, retrying with smaller n_batch = {}\n"
    text = "".join(line.format(n) for n in (256, 128, 64, 32, 16, 8, 4, 2, 1))
    f = classify_text(text, "reply.md")
    assert f.category == "kv-pressure"
    assert not any(x.category == "bad-output" for x in f.findings)


def test_named_reserved_tokens_and_function_word_salad() -> None:
    assert "special_tokens" in outputs.garbage("ok <EOS_TOKEN> x <SEP> y <MASK_TOKEN> z").reasons
    salad = " ".join(["the a of", "in the which", "a the that", "to the and", "of it is"] * 6)
    assert "word_salad" in outputs.garbage(salad).reasons
    prose = ("The GPU ran out of memory while the engine was loading the model, so we lowered the memory "
             "utilisation setting and restarted the service; after that every request finished normally.")
    assert not outputs.garbage(prose).garbage


def test_by_source_splits_shared_and_only_threads() -> None:
    root = Path(__file__).parent / "real"
    r = corpus.evaluate(corpus.load(root))
    by = r.by_source()
    assert by["shared"]["samples"] + by["only"]["samples"] == len(r.results)
    assert by["only"]["threads"] == by["only"]["samples"]
    assert by["shared"]["samples"] > by["shared"]["threads"]


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(DECORATION), st.text(max_size=20)), max_size=80))
def test_paste_reader_never_raises_and_keeps_the_line_count(parts: list[str]) -> None:
    text = "".join(parts)
    p = paste.read(text)
    assert len(p.lines) == len(split_lines(text))
    for q in p.quoted:
        assert 1 <= q.line <= max(1, len(p.lines))
    classify_text(text, "fuzz.md")


def test_glued_function_words_and_no_false_positive_on_this_repository() -> None:
    salad = ("I can' description for request, please of assistance with that and description of service. "
             "description, can to to the change request information on assistance with information request, "
             "-description of service andgetrequest andis_description of. request of a todescription andrequest. "
             "request. description of torequest, of description, andrequest.")
    assert "word_salad" in outputs.garbage(salad).reasons
    root = Path(__file__).parents[2]
    texts = [p.read_text(encoding="utf-8", errors="replace")
             for p in [*sorted((root / "docs").glob("*.md")), *sorted((root / "src").rglob("*.py"))]]
    for text in texts:
        words = text.split()
        for i in range(0, len(words), 150):
            chunk = " ".join(words[i:i + 150])
            assert "word_salad" not in outputs.garbage(chunk).reasons, chunk[:120]


def test_bench_evidence_by_source_cli(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from llm_oncall.cli.bench import app

    corpus_dir = Path(__file__).parent / "real" / "fresh-2026-12b"
    result = CliRunner().invoke(app, ["evidence", "--corpus", str(corpus_dir), "--by-source", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    by = out["by_source"]
    assert by["only"]["samples"] == out["samples"] and by["shared"]["samples"] == 0  # a fresh set: one per thread
    text = CliRunner().invoke(app, ["evidence", "--corpus", str(corpus_dir), "--by-source"], env={"COLUMNS": "200"})
    assert "only sample of its thread" in text.output
