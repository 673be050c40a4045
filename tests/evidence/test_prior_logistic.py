"""Round 3zb's logistic prior (prior_train.train_logistic, prior.LOGISTIC): deterministic, reads as the naive Bayes
does (a margin, a ranking, the tokens that weigh), never raises; round 3ze's candidate records its margin, its guard
(a floor of known tokens, the failure-report reader below it) and its training."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_oncall.evidence import prior, prior_train, reported
from llm_oncall.evidence.classify import classify_text

REPO = Path(__file__).resolve().parents[2]

# words no signature reads; "report" sits in every class (a template's boilerplate)
TOY = [
    ("report: the frobnicator wobbles, the sprocket jams", "hang"),
    ("report: sprocket jams again, frobnicator wobbles", "hang"),
    ("report: the sprocket jams forever", "hang"),
    ("report: the sprocket gleams, the frobnicator hums", "benign"),
    ("report: frobnicator hums and gleams", "benign"),
    ("report: the gleams are fine", "benign"),
    ("report: the widget squeaks purple noise", "bad-output"),
    ("report: purple noise from the widget", "bad-output"),
]


def toy_model() -> prior.Model:
    return prior_train.train_logistic(TOY, min_df=1, steps=200)


def test_training_is_deterministic_and_round_trips() -> None:
    a = toy_model()
    b = prior_train.train_logistic(list(reversed(TOY)), min_df=1, steps=200)
    assert a.kind == prior.LOGISTIC and a.to_json() == b.to_json()
    assert json.loads(json.dumps(a.to_json()))["kind"] == prior.LOGISTIC
    c = prior.Model.from_json(json.loads(json.dumps(a.to_json())))
    assert c.kind == prior.LOGISTIC and c.to_json() == a.to_json()
    # a naive Bayes file is written as before there were two kinds, and read as naive Bayes
    nb = prior.train(TOY, top_k=50, min_df=1)
    assert "kind" not in nb.to_json() and prior.Model.from_json(nb.to_json()).kind == prior.NAIVE_BAYES
    with pytest.raises(ValueError, match="kind"):
        prior.Model.from_json(a.to_json() | {"kind": "forest"})


def test_reading_weighs_what_tells_classes_apart() -> None:
    m = toy_model()
    r = prior.read(m, "the sprocket jams and the frobnicator wobbles")
    assert r is not None and r.cls == "hang" and 0 < r.margin <= 1 and r.ranking[0] == "hang"
    assert "jams" in r.top_tokens and 0 < r.posterior <= 1
    quiet = prior.read(m, "the frobnicator hums, all gleams")
    assert quiet is not None and quiet.margin < 0  # benign more likely than any failure class
    assert prior.read(m, "zzz qqq") is None
    # a token every class shares weighs (almost) nothing for any of them
    assert max(abs(x) for x in m.log_prob["report"]) < max(abs(x) for x in m.log_prob["jams"])
    # a long paste is one document: the margin of a text repeated is the margin of the text
    once = prior.read(m, "the sprocket jams")
    many = prior.read(m, "\n".join(["the sprocket jams"] * 50))
    assert once is not None and many is not None and math.isclose(once.margin, many.margin)


def test_the_classifier_takes_a_logistic_fallback_where_nothing_was_found() -> None:
    fb = prior.Fallback(toy_model(), prior.Settings(0.0, 1))
    f = classify_text("intro\nthe sprocket jams, the frobnicator wobbles\n", "x.txt", word_prior=fb)
    assert f.kind == "word_prior" and f.category == "hang" and f.confidence <= 0.35 and f.lines == (2,)
    assert classify_text("the frobnicator hums\n", "x.txt", word_prior=fb).kind == "unknown"


def _row(set_: str, i: int, text: str, cls: str, empty: bool = True) -> prior_train.Row:
    return prior_train.Row(f"{set_}/{i}.txt", cls, f"{set_}#{i}", "benign" if empty else cls, empty, text, set_)


def test_candidate_records_its_margin_its_training_and_is_not_adopted(tmp_path: Path) -> None:
    """Round 3zb's candidate on two toy sets: the margin chosen out of set, the training recorded, never adopted;
    the model file it writes is read back as a fallback with that margin and no reader. The packaged model stays
    the naive Bayes (the check set did not adopt the candidate)."""
    fresh = {s: [_row(s, i, text, cls) for i, (text, cls) in enumerate(TOY)] for s in ("set-a", "set-b")}
    gate = [_row("gate", i, text, cls, empty=False) for i, (text, cls) in enumerate(TOY)]
    built = prior_train.logistic_candidate(fresh, gate, commit="abc", today=dt.date(2026, 12, 3))
    meta = built.meta
    assert built.kind == prior.LOGISTIC and meta["adopted"] is False
    assert meta["settings"]["min_tokens"] == prior_train.LOGISTIC_MIN_TOKENS
    assert meta["reader"] == {"min_lines": 1, "min_margin": meta["settings"]["min_margin"], "classes": "prior",
                              "headings": False, "over_benign": False}
    assert meta["corpus"] == [prior_train.GATE_DIR, "set-a", "set-b"] and meta["samples"] == 3 * len(TOY)
    assert meta["settings"]["min_margin"] in prior_train.LOGISTIC_MARGINS and meta["trained"] == "2026-12-03"
    path = tmp_path / "candidate.json"
    path.write_text(json.dumps(built.to_json()), encoding="utf-8")
    fb = prior.fallback_from(path)
    assert fb is not None and fb.settings.min_margin == meta["settings"]["min_margin"]
    assert fb.reader == prior.ReaderSettings(1, meta["settings"]["min_margin"], "prior", headings=False)
    assert prior.fallback_from(tmp_path / "missing.json") is None
    packaged = prior.packaged()
    assert packaged is not None and packaged.model.kind == prior.NAIVE_BAYES


def test_margin_is_chosen_for_the_most_right_without_losing_benign_precision() -> None:
    rows = [_row("s", 0, "a", "hang"), _row("s", 1, "b", "benign"), _row("s", 2, "c", "hang")]
    reading = {r.rel: prior.Reading("hang", m, 25, (), 0.5) for r, m in zip(rows, (0.3, 0.1, -0.2), strict=True)}
    settings, reader, sc = prior_train.choose_margin(rows, reading, {})
    # 0.15 … 0.3 answers the first hang and leaves the benign sample alone; the higher margin wins the tie
    assert settings.min_margin == 0.3 and sc.correct == 2 and sc.fired_on_benign == 0
    assert settings.min_tokens == prior_train.LOGISTIC_MIN_TOKENS and reader.min_margin == 0.3


def test_the_guard_answers_a_long_paste_or_a_report_never_a_short_sentence() -> None:
    """Round 3ze's guard: below the floor of known tokens only a text the failure-report reader reads as a report
    takes the logistic prior's class."""
    settings, reader = prior_train.guarded(0.0)
    short = prior.Reading("hang", 0.5, prior_train.LOGISTIC_MIN_TOKENS - 1, (), 0.6)
    long = dataclasses.replace(short, tokens=prior_train.LOGISTIC_MIN_TOKENS)
    hypothesis = "If the peer dies, the program will hang until the timeout fires.\n"
    assert not reported.read(hypothesis).reports(1, False)
    assert prior.decide_with_reader(short, reported.read(hypothesis), settings, reader, hypothesis) is None
    report = "After the upgrade the server hangs at startup and never answers any request.\n"
    assert reported.read(report).reports(1, False)
    assert prior.decide_with_reader(short, reported.read(report), settings, reader, report) == "hang"
    assert prior.decide_with_reader(long, reported.read(hypothesis), settings, reader, hypothesis) == "hang"
    assert prior.decide_with_reader(dataclasses.replace(long, margin=-0.1), None, settings, reader) is None


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=3000))
def test_fuzz_never_raises(text: str) -> None:
    model = _TOY_MODEL
    r = prior.read(model, text)
    if r is not None:
        assert -1.0 <= r.margin <= 1.0
    g = classify_text(text, "fuzz.txt", word_prior=prior.Fallback(model, prior.Settings(-1.0, 1)))
    assert all(1 <= x <= max(len(text.splitlines()), 1) for x in g.lines)


_TOY_MODEL = prior_train.train_logistic(TOY, min_df=1, steps=200)
