"""Round 3w: each held-out set as the catalogue read it the day it was committed (tests/evidence/holdout/
fresh_readings.json, ``scripts/prior.py fresh-readings``) and the fallback chosen in that regime, leave-one-set-out
(prior_train.fresh_loso, ``scripts/prior.py fresh-loso``; docs/evidence.md, "Round 3w")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llm_oncall.evidence import prior, prior_train
from llm_oncall.evidence.classify import classify_text

REPO = Path(__file__).resolve().parents[2]


def test_every_held_out_set_has_its_fresh_readings() -> None:
    doc = json.loads((REPO / prior_train.FRESH_READINGS).read_text(encoding="utf-8"))
    on_disk = {p.parent.relative_to(REPO).as_posix() for p in (REPO / "tests/evidence/holdout").glob("*/manifest.yaml")}
    assert set(doc["sets"]) == on_disk, "run scripts/prior.py fresh-readings"
    for entry in doc["sets"].values():
        assert len(entry["commit"]) == 40
    sets = prior_train.fresh_sets(REPO, sorted(on_disk))  # labels as recorded: nothing relabelled since
    assert all(len(rs) == len(doc["sets"][d]["readings"]) for d, rs in sets.items())


def _right(rows: list[prior_train.Row]) -> int:
    return sum(r.predicted == r.expected for r in rows)


def test_the_readings_are_the_figures_first_recorded() -> None:
    """docs/evidence.md's first readings without the prior: 3p 41/90, 3t 54/85, 3v 51/78."""
    sets = prior_train.fresh_sets(REPO)
    got = {d.split("-")[-2]: (_right(rs), len(rs)) for d, rs in sets.items() if d.endswith("-check")}
    assert (got["12p"], got["12t"], got["12v"]) == ((41, 90), (54, 85), (51, 78))
    nothing = [r for rs in sets.values() for r in rs if r.empty]
    assert (len(nothing), sum(r.expected != prior.BENIGN for r in nothing)) == (394, 196)


def test_a_relabelled_or_unread_sample_is_refused(tmp_path: Path) -> None:
    src = REPO / "tests/evidence/holdout/fresh-2026-12c"
    shutil.copytree(src, tmp_path / "set")
    doc = json.loads((REPO / prior_train.FRESH_READINGS).read_text(encoding="utf-8"))
    entry = doc["sets"]["tests/evidence/holdout/fresh-2026-12c"]
    (tmp_path / "r.json").write_text(json.dumps({"sets": {"set": entry}}), encoding="utf-8")
    assert len(prior_train.fresh_sets(tmp_path, ["set"], "r.json")["set"]) == 15
    first = sorted(entry["readings"])[0]
    entry["readings"][first]["expected"] = "hang" if entry["readings"][first]["expected"] != "hang" else "benign"
    (tmp_path / "r.json").write_text(json.dumps({"sets": {"set": entry}}), encoding="utf-8")
    with pytest.raises(prior_train.FreshReadingsError, match="read when it was"):
        prior_train.fresh_sets(tmp_path, ["set"], "r.json")
    del entry["readings"][first]
    (tmp_path / "r.json").write_text(json.dumps({"sets": {"set": entry}}), encoding="utf-8")
    with pytest.raises(prior_train.FreshReadingsError, match="no fresh reading"):
        prior_train.fresh_sets(tmp_path, ["set"], "r.json")
    with pytest.raises(prior_train.FreshReadingsError, match="no fresh readings"):
        prior_train.fresh_sets(tmp_path, ["other"], "r.json")


# docs/evidence.md, "Round 3w": summed over the eleven sets, (right, benign right, answered benign). Round 3zj's report
# headings (docs/evidence.md, "Round 3zj") moved the reader's from (467, 203, 312) and the candidate's from
# (481, 221, 349); round 3zl's bad output named as what came out ("causes gibberish output") from (468, 201, 307) and
# (482, 219, 344); round 3zq's report the prior knows no word of, read by its cues, from (470, 201, 305) and
# (484, 219, 342).
FRESH_LOSO_SUMS = {"without": (440, 233, 443), "packaged": (450, 231, 423), "plain": (446, 210, 363),
                   "reader": (474, 200, 299), "candidate": (488, 218, 336)}


def test_fresh_regime_leave_one_set_out_is_reproduced() -> None:
    fresh = prior_train.fresh_sets(REPO)
    gate = prior_train.text_rows(REPO / prior_train.GATE_DIR, prior_train.GATE_DIR)
    res = prior_train.fresh_loso(fresh, gate, prior.Settings(1.85, 3))
    sums = {k: tuple(sum(v[k][f] for v in res.values()) for f in ("correct", "benign_correct", "benign_predicted"))
            for k in FRESH_LOSO_SUMS}
    assert sums == FRESH_LOSO_SUMS
    # the candidate against the packaged settings, per set: up on ten (nine before round 3zj), down on none; round
    # 3zl's bad output named as what came out added one on the fourth and the sixth set; round 3zq's report the prior
    # knows no word of one on the fourth, two on the sixth and one on the last
    gain = [v["candidate"]["correct"] - v["packaged"]["correct"] for v in res.values()]
    assert gain == [1, 0, 1, 10, 1, 6, 6, 5, 3, 1, 4]
    plain, reader = prior_train.fresh_settings(fresh, gate)
    assert plain == prior_train.PLAIN_3O == prior.Settings(1.85, 3)
    assert reader == prior.ReaderSettings(1, 0.0, "lexicon", True)


# One-line look-alikes of earlier rounds' rule tests (3j, 3l, 3m, 3u): the catalogue stays quiet on each (those tests),
# and the word-level fallback trained on more sets answers some of them; what it says is bounded: a warning at the
# fallback's confidence, never an error or a confident reading (docs/evidence.md, "Round 3w": the adoption's cost).
ONE_LINE_LOOK_ALIKES = [
    "If the peer dies the scheduler will hang until the watchdog fires.\n",
    "except ray.exceptions.RaySystemError:\n    retry()\n",
    "Without a penalty a small model could repeat the same sentence until max_tokens.\n",
    "日志输出中文乱码，Windows 控制台编码问题\n",
    'time=2025-03-01T10:00:00.000Z level=WARN source=gpu.go:605 msg="unknown error initializing cuda driver library '
    '/usr/lib/libcuda.so.575.64.03: cuda driver library init failure: 999."\n',
]


@pytest.mark.parametrize("text", ONE_LINE_LOOK_ALIKES)
def test_the_fallback_on_one_line_look_alikes_is_at_most_a_low_warning(text: str) -> None:
    f = classify_text(text, "issue.md")
    if f.parser == "prior":
        assert f.severity == "warning" and f.confidence <= 0.3, (f.kind, f.category)
    assert classify_text(text, "issue.md", word_prior=False).parser != "prior"
