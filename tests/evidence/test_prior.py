"""The word-level prior (evidence/prior.py): tokenizer and model are deterministic, the packaged model is current
with its training directories (the gated corpus and the labelled held-out sets), the fallback answers only where
nothing was recognised and never raises."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_oncall.evidence import prior, prior_train
from llm_oncall.evidence.classify import classify_file, classify_text

REPO = Path(__file__).resolve().parents[2]

# words no signature reads, so the catalogue finds nothing in them
TOY = [
    ("the frobnicator wobbles, the sprocket jams", "hang"),
    ("sprocket jams again, frobnicator wobbles", "hang"),
    ("the sprocket gleams, the frobnicator hums", "benign"),
    ("frobnicator hums and gleams", "benign"),
    ("the widget squeaks purple noise", "bad-output"),
    ("purple noise from the widget", "bad-output"),
]
HANGING = "the frobnicator wobbles and the sprocket jams"


J3_SAMPLE = (Path(__file__).parent / "holdout" / "fresh-2026-12j-check"
             / "failed_to_instantiate_cuda_graph_not_permitted_keras_inaseg_105.txt")


def unrecognised_3j_text() -> str:
    """The 3j sample without the XLA message round 3l's signature reads: nothing is recognised in it, and the
    packaged model answers cuda-graph."""
    return J3_SAMPLE.read_text(encoding="utf-8").replace("Failed to instantiate CUDA graph: ", "")


@pytest.fixture
def toy_prior() -> Iterator[prior.Fallback]:
    yield prior.Fallback(prior.train(TOY, top_k=50, min_df=1), prior.Settings(min_margin=-100.0, min_tokens=1))


def test_tokens_drop_numbers_hex_paths_and_split_words() -> None:
    toks = prior.line_tokens("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234 GPU has fallen off the bus 0xdeadbeef")
    assert "xid" in toks and "fallen" in toks and "fallen off" in toks and "the bus" in toks
    assert not any(any(ch.isdigit() for ch in t) for t in toks)
    assert "deadbeef" not in toks
    assert prior.line_tokens("ray.exceptions.RaySystemError: System error")[:4] == ["ray", "exceptions", "ray",
                                                                                   "system"]
    assert "usr" not in prior.line_tokens("File /usr/lib/python3/site-packages/vllm/worker.py line 3")
    assert prior.line_tokens("https://github.com/vllm-project/vllm/issues/1 hangs") == ["hangs"]
    assert prior.line_tokens("输出大量重复") == ["输出", "出大", "大量", "量重", "重复"]
    assert prior.line_tokens("") == []


def test_training_is_deterministic_and_round_trips() -> None:
    a = prior.train(TOY, top_k=50, min_df=1)
    b = prior.train(list(reversed(TOY)), top_k=50, min_df=1)
    assert a.to_json() == b.to_json()
    c = prior.Model.from_json(json.loads(json.dumps(a.to_json())))
    assert c.to_json() == a.to_json()
    r = prior.read(a, HANGING)
    assert r is not None and r.cls == "hang" and r.margin > 0
    assert prior.read(a, "zzz qqq") is None
    assert prior.decide(r, prior.Settings(min_margin=r.margin + 1, min_tokens=1)) is None
    assert prior.decide(r, prior.Settings(min_margin=0.0, min_tokens=r.tokens + 1)) is None
    assert prior.decide(r, prior.Settings(min_margin=0.0, min_tokens=1)) == "hang"


def test_packaged_model_is_current_with_its_training_directories() -> None:
    """`PYTHONPATH=src python scripts/prior.py train` after any change to tests/evidence/real or a held-out set the
    prior is trained on (prior_train.TRAINING_DIRS)."""
    model = prior.default_model()
    assert model is not None and prior.default_settings(model) is not None
    assert model.meta["corpus"] == list(prior_train.TRAINING_DIRS)
    assert "tests/evidence/real" in model.meta["corpus"]
    # the check sets that measured round 3w's choice are never trained on
    assert not any(d.endswith(("12w-check", "12x-check", "12y-check")) for d in model.meta["corpus"])
    assert prior.default_reader(model) == prior.ReaderSettings(1, 0.0, "lexicon", True)
    items = prior_train.training_set(prior_train.training_roots(REPO))
    assert model.meta["corpus_sha256"] == prior_train.training_sha256(items), "run scripts/prior.py train"
    assert model.meta["samples"] == len(items)
    again = prior.train([(text, cls) for _, cls, text in items], top_k=model.meta["top_k"],
                        min_df=model.meta["min_df"], alpha=model.meta["alpha"])
    assert prior.Model.from_json(again.to_json()).log_prob == model.log_prob
    assert model.meta["settings"]["confidence"] <= 0.35
    assert model.meta["adopted"] is prior.ADOPTED


def test_on_by_default_for_documents_never_for_streams(toy_prior: prior.Fallback) -> None:
    """Adopted in round 3o: a document takes the packaged prior unless asked not to; a stream (a container's log,
    the live loop's `stream=True`) never does, not even with a fallback passed explicitly."""
    assert prior.ADOPTED and prior.packaged() is not None
    text = unrecognised_3j_text()
    on = classify_text(text, "x.txt")
    assert on.kind == "word_prior" and on.category == "cuda-graph" and on.confidence <= 0.35
    assert classify_text(text, "x.txt", word_prior=True).kind == "word_prior"
    off = classify_text(text, "x.txt", word_prior=False)
    assert off.kind == "unknown" and off.benign and off.confidence == 0
    for use in (None, True, toy_prior):
        assert prior.resolve(use, stream=True) is None
        assert all(f.parser != "prior" for f in classify_text(text, "pod-0", stream=True, word_prior=use).findings)
    assert classify_text(HANGING + "\n", "pod-0", stream=True, word_prior=toy_prior).kind == "unknown"


def test_live_loop_and_tool_outputs_do_not_use_the_prior() -> None:
    """The autopilot classifies pod log tails as streams; node-problem messages and a training session's tool
    output are passed `word_prior=False`: none of them is a paste."""
    import inspect

    from llm_oncall.diagnosis import autopilot
    from llm_oncall.evidence import nodeproblems
    from llm_oncall.training import session

    assert 'stream=True)' in inspect.getsource(autopilot.Autopilot.observe)
    assert "word_prior=False" in inspect.getsource(nodeproblems)
    assert "word_prior=False" in inspect.getsource(session)


def test_fallback_answers_only_where_nothing_was_found(toy_prior: prior.Fallback) -> None:
    text = "```\nintro\n```\n" + HANGING + "\nnothing else\n"
    f = classify_text(text, "x.txt", word_prior=toy_prior)
    assert f.kind == "word_prior" and f.category == "hang" and not f.benign and f.confidence <= 0.35
    assert f.parser == "prior" and f.incident_hint == "engine-hang"
    assert f.lines == (4,)  # the paste's own line numbers
    assert "word-level prior" in f.facts["reading"]


def test_fallback_never_overrides_a_signature_or_a_benign_reading(toy_prior: prior.Fallback) -> None:
    xid = "[  12.3] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n" + HANGING + "\n"
    f = classify_text(xid, "dmesg.txt", word_prior=toy_prior)
    assert f.kind == "xid_79" and all(g.parser != "prior" for g in f.findings)
    # a recognised healthy format (a benign finding) keeps its benign reading
    healthy = ("INFO 01-01 00:00:00 metrics.py:1] Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: "
               "20.0 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 5.0%, "
               "CPU KV cache usage: 0.0%.\n" + HANGING + "\n")
    g = classify_text(healthy, "vllm.log", word_prior=toy_prior)
    assert all(x.parser != "prior" for x in g.findings)
    # error lines the catalogue does not know (unknown, not benign) are not replaced either
    u = classify_text("Traceback (most recent call last):\nFooError: " + HANGING + "\n", "t.txt", word_prior=toy_prior)
    assert u.kind == "unknown" and all(x.parser != "prior" for x in u.findings)


def test_packaged_fallback_on_one_held_out_sample() -> None:
    """The one 3j sample the chosen settings answer (docs/evidence.md, "Round 3k"). Since round 3l a signature
    reads its XLA line (cuda-graph-instantiate-failed), so the fallback no longer runs in the classifier; the
    packaged model's own answer on the text is unchanged."""
    p = J3_SAMPLE
    text = p.read_text(encoding="utf-8")
    model = prior.default_model()
    settings = prior.default_settings(model)
    assert model is not None and settings is not None
    f = prior.finding(model, settings, text, p.name)
    assert f is not None and f.kind == "word_prior" and f.category == "cuda-graph" and f.lines
    g = classify_text(text, p.name, word_prior=True)
    assert g.kind == "cuda_graph_instantiate_failed" and g.category == "cuda-graph"


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=3000))
def test_fuzz_never_raises(text: str) -> None:
    model = prior.default_model()
    assert model is not None
    prior.line_tokens(text)
    r = prior.read(model, text)
    f = prior.finding(model, prior.Settings(min_margin=-100.0, min_tokens=1), text, "fuzz.txt")
    n = len(text.splitlines())
    if f is not None:
        assert r is not None and all(1 <= x <= n for x in f.lines)
    g = classify_text(text, "fuzz.txt", word_prior=prior.Fallback(model, prior.Settings(min_margin=-100.0,
                                                                                         min_tokens=1)))
    assert all(1 <= x <= max(n, 1) for x in g.lines)


def test_cli_prior_option_is_on_by_default_and_off_when_asked(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from llm_oncall.cli.evidence import app

    p = tmp_path / J3_SAMPLE.name
    p.write_text(unrecognised_3j_text(), encoding="utf-8")
    runner = CliRunner()
    default = runner.invoke(app, ["classify", str(p), "--json"])
    on = runner.invoke(app, ["classify", str(p), "--json", "--prior"])
    off = runner.invoke(app, ["classify", str(p), "--json", "--no-prior"])
    assert default.exit_code == 0 and on.exit_code == 0 and off.exit_code == 0
    assert json.loads(default.stdout)[0]["kind"] == "word_prior"
    assert json.loads(on.stdout)[0]["kind"] == "word_prior"
    assert json.loads(off.stdout)[0]["kind"] == "unknown"


def test_training_directories_are_one_corpus_with_distinct_paths(tmp_path: Path) -> None:
    """Several training directories: relative paths from their common parent, one hash over all of them that
    changes when any of them changes."""
    for d, cls in (("a", "benign"), ("b", "hang")):
        (tmp_path / "x" / d).mkdir(parents=True)
        (tmp_path / "x" / d / "s.txt").write_text(f"sample {d}\n", encoding="utf-8")
        (tmp_path / "x" / d / "manifest.yaml").write_text(
            f"- file: s.txt\n  class: {cls}\n  incident_hint: {'null' if cls == 'benign' else 'engine-hang'}\n"
            f"  benign: {'true' if cls == 'benign' else 'false'}\n  format: issue-paste\n"
            f"  source: {{repo: o/r, ref: 'issue #1', url: 'https://example.com/{d}'}}\n  note: test\n",
            encoding="utf-8")
    roots = [tmp_path / "x" / "a", tmp_path / "x" / "b"]
    items = prior_train.training_set(roots)
    assert [(rel, cls) for rel, cls, _ in items] == [("a/s.txt", "benign"), ("b/s.txt", "hang")]
    assert [rel for rel, _, _ in prior_train.training_set(roots[0])] == ["s.txt"]  # one directory: as round 3k
    before = prior_train.training_sha256(items)
    (tmp_path / "x" / "b" / "s.txt").write_text("sample b, changed\n", encoding="utf-8")
    assert prior_train.training_sha256(prior_train.training_set(roots)) != before
    assert [r.part for r in prior_train.rows(roots)] == ["a", "b"]


def test_diagnose_logs_are_read_without_the_prior(tmp_path: Path, toy_prior: prior.Fallback,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`diagnose --logs` files are a process's log or a command's output: a prior that would answer for them (here
    one that answers anything) is not asked, so its guess never becomes an incident's evidence; `evidence classify`
    of the same file is."""
    from llm_oncall.cli.diagnose import log_findings

    monkeypatch.setattr(prior, "packaged", lambda: toy_prior)
    log = tmp_path / "worker.log"
    log.write_text(HANGING + "\n")
    assert classify_file(log).kind == "word_prior"
    assert [f.kind for f in log_findings([log])] == ["unknown"]


def test_a_model_file_with_unreadable_settings_turns_the_fallback_off(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings the code cannot read (a hand-edited or truncated `meta.settings`) leave documents classified by the
    catalogue alone, not blanked to `unknown`."""
    body = json.loads(prior.MODEL_PATH.read_text(encoding="utf-8"))
    body["meta"]["settings"] = {"min_margin": "not a number"}
    broken = tmp_path / "prior.json"
    broken.write_text(json.dumps(body), encoding="utf-8")
    monkeypatch.setattr(prior, "MODEL_PATH", broken)
    prior.default_model.cache_clear()
    prior.packaged.cache_clear()
    try:
        assert prior.packaged() is None
        xid = "[  12.3] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
        assert classify_text(xid, "dmesg.txt").kind == "xid_79"
    finally:
        prior.default_model.cache_clear()
        prior.packaged.cache_clear()
