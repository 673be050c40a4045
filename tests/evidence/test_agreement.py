"""A second, independent labelling of three check sets (tests/evidence/agreement/): how reproducible the labels the
classifier is measured against are (docs/evidence.md, "Check set 3zq, and how often two labellers agree")."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.evidence import agreement, corpus

HOLDOUT = Path(__file__).parent / "holdout"
RELABEL = Path(__file__).parent / "agreement" / "relabel-2026-12-04.yaml"


def test_the_second_labelling_of_3zn_3zo_3zp_as_measured() -> None:
    labels = agreement.load_second(RELABEL)
    assert {x.file.split("/")[0] for x in labels} == {f"fresh-2026-12z{c}-check" for c in "nop"}
    sets = [s for d in ("fresh-2026-12zn-check", "fresh-2026-12zo-check", "fresh-2026-12zp-check")
            for s in corpus.load(HOLDOUT / d)]
    assert len(labels) == len(sets) == 197  # every sample of the three sets, once
    r = agreement.compare(corpus.load(HOLDOUT), HOLDOUT, labels)
    assert (r.samples, r.agree, r.sure, r.sure_agree, r.benign_agree) == (197, 193, 140, 140, 195)
    assert r.kappa == pytest.approx(0.9749, abs=5e-4)
    assert all(not d.sure for d in r.disagreements)


def test_kappa_is_agreement_beyond_chance() -> None:
    assert agreement.kappa([("a", "a"), ("b", "b")]) == pytest.approx(1.0)
    # two labellers who each say "a" half the time, independently: chance agreement only
    assert agreement.kappa([("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")]) == pytest.approx(0.0)
    assert agreement.kappa([("a", "a")] * 3) is None  # one class only: no chance to beat
    assert agreement.kappa([]) is None


def _write(tmp: Path, text: str) -> Path:
    p = tmp / "labels.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_a_bad_second_labelling_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(corpus.CorpusError, match="labelled more than once"):
        agreement.load_second(_write(tmp_path, "- {file: a.txt, class: hang}\n- {file: a.txt, class: benign}\n"))
    with pytest.raises(corpus.CorpusError, match="class"):
        agreement.load_second(_write(tmp_path, "- {file: a.txt, class: stuck}\n"))
    with pytest.raises(corpus.CorpusError, match="expected a list"):
        agreement.load_second(_write(tmp_path, "file: a.txt\n"))
    labels = agreement.load_second(_write(tmp_path, "- {file: fresh-2026-12zn-check/nope.txt, class: hang}\n"))
    with pytest.raises(corpus.CorpusError, match="not in the corpus"):
        agreement.compare(corpus.load(HOLDOUT / "fresh-2026-12zn-check"), HOLDOUT, labels)


def test_the_command_reports_and_refuses(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["evidence", "agreement", str(RELABEL), "--corpus", str(HOLDOUT), "--json"])
    assert r.exit_code == 0, r.output
    assert '"agree": 193' in r.output
    r = CliRunner().invoke(app, ["evidence", "agreement", str(tmp_path / "none.yaml"), "--corpus", str(HOLDOUT)])
    assert r.exit_code == 2 and "no such file" in r.output
