"""Round 3zb's logistic prior (prior_train.train_logistic, prior.LOGISTIC): deterministic, reads as the naive Bayes
does (a margin, a ranking, the tokens that weigh), never raises; the candidate file is current with the sets it was
trained and chosen on and is not what the classifier uses."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_oncall.evidence import prior, prior_train
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


def test_candidate_is_current_and_not_the_packaged_model() -> None:
    """`PYTHONPATH=src python scripts/prior.py logistic-candidate` after any change to a set it is trained on."""
    cand = prior.fallback_from(prior.CANDIDATE_PATH)
    assert cand is not None and cand.model.kind == prior.LOGISTIC and cand.reader is None
    meta = cand.model.meta
    assert meta["corpus"] == [prior_train.GATE_DIR, *prior_train.CANDIDATE_DIRS] and meta["adopted"] is False
    assert not any("12zb" in d for d in meta["corpus"])  # the check set that tests it
    fresh = prior_train.fresh_sets(REPO, prior_train.CANDIDATE_DIRS)
    gate = prior_train.text_rows(REPO / prior_train.GATE_DIR, prior_train.GATE_DIR)
    docs = [(r.rel, r.expected, r.text) for rs in [*fresh.values(), gate] for r in rs]
    assert meta["corpus_sha256"] == prior_train.training_sha256(docs), "run scripts/prior.py logistic-candidate"
    assert meta["samples"] == len(docs)
    # the weights are what the training gives (to a tolerance: the last bits of numpy's exp differ between CPUs)
    again = prior_train.train_logistic([(text, cls) for _, cls, text in docs])
    assert again.log_prob.keys() == cand.model.log_prob.keys()
    assert max(abs(x - y) for t, row in again.log_prob.items()
               for x, y in zip(row, cand.model.log_prob[t], strict=True)) < 0.01
    packaged = prior.packaged()
    assert packaged is not None and packaged.model.kind == prior.NAIVE_BAYES


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=3000))
def test_fuzz_never_raises(text: str) -> None:
    cand = prior.fallback_from(prior.CANDIDATE_PATH)
    assert cand is not None
    r = prior.read(cand.model, text)
    if r is not None:
        assert -1.0 <= r.margin <= 1.0
    g = classify_text(text, "fuzz.txt", word_prior=prior.Fallback(cand.model, prior.Settings(-1.0, 1)))
    assert all(1 <= x <= max(len(text.splitlines()), 1) for x in g.lines)
