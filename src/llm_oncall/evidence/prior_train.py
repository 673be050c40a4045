"""Training, cross-validation and measurement of the word-level prior (prior.py) on a corpus of real samples.

``scripts/prior.py`` drives it: ``train`` writes ``catalog/prior.json`` from the training directories
(``TRAINING_DIRS``: the gated corpus and the labelled held-out sets, docs/evidence.md "Round 3o") with the settings
cross-validation chose; ``cv`` prints the cross-validated figures; ``eval`` measures a held-out set with and
without the fallback; ``check`` says whether the packaged model is current with the corpus.

Cross-validation is grouped by source thread (two samples of one thread are always in the same fold) and
retrains the model per fold. The catalogue's own answer does not depend on the prior, so each sample is
classified once with the prior off; a sample the catalogue found nothing in gets the fold model's finding
through the same ``prior.finding`` the classifier calls.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_oncall.evidence import corpus, prior
from llm_oncall.evidence.classify import classify_all, read_text

FOLDS = 5
MARGINS: tuple[float, ...] = tuple(round(x * 0.05, 2) for x in range(0, 81))
MIN_TOKENS: tuple[int, ...] = (1, 3, 5, 10, 20, 40)
MIN_BENIGN_PRECISION = 0.95
# The training data, relative to the repository root: the gated corpus and every labelled held-out set that is not
# the current check set (docs/evidence.md, "Round 3o"). The model's corpus_sha256 covers all of them.
TRAINING_DIRS: tuple[str, ...] = (
    "tests/evidence/real",
    "tests/evidence/holdout/fresh-2026-12b",
    "tests/evidence/holdout/fresh-2026-12c",
    "tests/evidence/holdout/fresh-2026-12h-check",
    "tests/evidence/holdout/fresh-2026-12j-check",
    "tests/evidence/holdout/fresh-2026-12k-check",
    "tests/evidence/holdout/fresh-2026-12m-check",
)


def training_roots(repo: Path, dirs: Sequence[str] = TRAINING_DIRS) -> list[Path]:
    return [repo / d for d in dirs]


def _roots(roots: Path | Sequence[Path]) -> tuple[list[Path], Path]:
    """The directories and the base their samples' relative paths are taken from: the directory itself for one
    (a sample's path as in round 3k), their common parent for several (``real/…``, ``holdout/fresh-…/…``)."""
    rs = [roots] if isinstance(roots, Path) else list(roots)
    if not rs:
        raise ValueError("no training directory")
    base = rs[0] if len(rs) == 1 else Path(os.path.commonpath([str(r.resolve()) for r in rs]))
    return rs, base


def _rel(path: Path, base: Path) -> str:
    return path.resolve().relative_to(base.resolve()).as_posix()


@dataclass(frozen=True)
class Row:
    """One sample: its expected class, its thread, the catalogue's answer, and the text when the catalogue found
    nothing (the fallback's input)."""

    rel: str
    expected: str
    thread: str
    predicted: str
    empty: bool
    text: str
    part: str = ""  # the training directory the sample is in, relative to the common base ("" for one directory)


def rows(roots: Path | Sequence[Path]) -> list[Row]:
    """Every sample of ``roots`` classified with the prior off."""
    dirs, base = _roots(roots)
    out = []
    for root in dirs:
        part = "" if len(dirs) == 1 else _rel(root, base)
        for s in corpus.load(root):
            text = read_text(s.path)
            found = classify_all(text, str(s.path), word_prior=False)
            best = found[0] if found else None
            out.append(Row(_rel(s.path, base), s.expected, corpus.source_key(s),
                           "benign" if best is None else corpus.predicted(best), not found, text, part))
    return out


def corpus_sha256(rs: Iterable[Row]) -> str:
    return prior.corpus_hash((r.rel, r.expected, r.text.encode("utf-8")) for r in rs)


def training_set(roots: Path | Sequence[Path]) -> list[tuple[str, str, str]]:
    """``(relative path, class, text)`` of every sample, without classifying anything (the model's input)."""
    dirs, base = _roots(roots)
    return [(_rel(s.path, base), s.expected, read_text(s.path)) for root in dirs for s in corpus.load(root)]


def training_sha256(items: Iterable[tuple[str, str, str]]) -> str:
    return prior.corpus_hash((rel, cls, text.encode("utf-8")) for rel, cls, text in items)


def fold_of(thread: str, k: int = FOLDS) -> int:
    return int(hashlib.sha256(thread.encode()).hexdigest(), 16) % k


def train_rows(rs: Sequence[Row], meta: dict[str, Any] | None = None) -> prior.Model:
    return prior.train([(r.text, r.expected) for r in rs], meta=meta)


def out_of_fold(rs: Sequence[Row], k: int = FOLDS) -> dict[str, prior.Reading | None]:
    """Each empty sample's reading by the model trained on the other folds."""
    out: dict[str, prior.Reading | None] = {}
    for f in range(k):
        model = train_rows([r for r in rs if fold_of(r.thread, k) != f])
        for r in rs:
            if fold_of(r.thread, k) == f and r.empty:
                out[r.rel] = prior.read(model, r.text)
    return out


@dataclass(frozen=True)
class Score:
    samples: int
    correct: int
    benign_predicted: int
    benign_correct: int
    fired: int
    fired_correct: int
    fired_on_benign: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.samples if self.samples else 0.0

    @property
    def benign_precision(self) -> float:
        return self.benign_correct / self.benign_predicted if self.benign_predicted else 1.0

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "correct": self.correct, "accuracy": round(self.accuracy, 4),
                "benign_predicted": self.benign_predicted, "benign_correct": self.benign_correct,
                "benign_precision": round(self.benign_precision, 4), "fired": self.fired,
                "fired_correct": self.fired_correct, "fired_on_benign": self.fired_on_benign}


def score(rs: Sequence[Row], answers: dict[str, str | None]) -> Score:
    """The figures when each empty sample takes ``answers[rel]`` (a class, or None: stays benign)."""
    correct = bp = bc = fired = fc = fb = 0
    for r in rs:
        p = r.predicted
        if r.empty and answers.get(r.rel):
            p = str(answers[r.rel])
            fired += 1
            fc += p == r.expected
            fb += r.expected == "benign"
        correct += p == r.expected
        if p == "benign":
            bp += 1
            bc += r.expected == "benign"
    return Score(len(rs), correct, bp, bc, fired, fc, fb)


def decisions(readings: dict[str, prior.Reading | None], s: prior.Settings) -> dict[str, str | None]:
    return {rel: prior.decide(rd, s) for rel, rd in readings.items()}


def precision_bound(rs: Sequence[Row]) -> float:
    """The benign precision a setting must keep: MIN_BENIGN_PRECISION, or the figure without the prior when that
    is already lower (docs/evidence.md, "Round 3o")."""
    return min(MIN_BENIGN_PRECISION, score(rs, {}).benign_precision)


def choose(rs: Sequence[Row], readings: dict[str, prior.Reading | None]) -> tuple[prior.Settings, Score]:
    """The settings cross-validation chooses: benign precision at least ``precision_bound`` and the fallback
    answering at least one held-out sample (a setting that never answers measures nothing); of those, the highest
    accuracy, then the most answers, then the lowest margin and token minimum."""
    bound = precision_bound(rs)
    best: tuple[tuple[int, int, float, int], prior.Settings, Score] | None = None
    for mt in MIN_TOKENS:
        for mm in MARGINS:
            s = prior.Settings(mm, mt)
            sc = score(rs, decisions(readings, s))
            if sc.fired == 0 or sc.benign_precision < bound - 1e-12:
                continue
            key = (sc.correct, sc.fired, -mm, -mt)
            if best is None or key > best[0]:
                best = (key, s, sc)
    if best is None:
        raise ValueError("no setting answers any sample with benign precision kept")
    return best[1], best[2]


def cross_validate(rs: Sequence[Row]) -> dict[str, Any]:
    readings = out_of_fold(rs)
    settings, chosen = choose(rs, readings)
    grid = {}
    for mt in (1, 5, 10):
        for mm in (0.0, 0.5, 1.0, 1.5, 2.0):
            grid[f"margin {mm}, tokens {mt}"] = score(rs, decisions(readings, prior.Settings(mm, mt))).to_json()
    answers = decisions(readings, settings)
    by_part: dict[str, dict[str, Any]] = {}
    groups = {r.part for r in rs} | {r.part.split("/")[0] + "/*" for r in rs if "/" in r.part}
    for part in sorted(groups):
        sub = [r for r in rs if r.part == part or (part.endswith("/*") and r.part.startswith(part[:-1]))]
        by_part[part] = {"without": score(sub, {}).to_json(), "with": score(sub, answers).to_json(),
                         "eligible": sum(r.empty for r in sub)}
    return {"folds": FOLDS, "without": score(rs, {}).to_json(), "settings": settings, "with": chosen.to_json(),
            "grid": grid, "eligible": sum(r.empty for r in rs), "bound": precision_bound(rs), "by_part": by_part,
            "eligible_by_class": dict(sorted(Counter(r.expected for r in rs if r.empty).items())),
            "answers": {r.rel: (r.expected, answers.get(r.rel)) for r in rs if r.empty and answers.get(r.rel)}}


def build(roots: Path | Sequence[Path], commit: str | None = None, today: dt.date | None = None,
          names: Sequence[str] | None = None, adopted: bool = False) -> tuple[prior.Model, dict[str, Any]]:
    """Cross-validate on ``roots``, choose the settings, train on all of them; the model records its provenance
    (``names``: the directories as the repository names them) and the settings in ``meta``."""
    rs = rows(roots)
    cv = cross_validate(rs)
    s: prior.Settings = cv["settings"]
    meta = {"corpus": list(names) if names is not None else [str(r) for r in _roots(roots)[0]],
            "corpus_sha256": corpus_sha256(rs), "commit": commit,
            "trained": (today or dt.date.today()).isoformat(),
            "settings": {"min_margin": s.min_margin, "min_tokens": s.min_tokens, "confidence": s.confidence},
            "cv": {"folds": FOLDS, "grouped_by": "source thread", "without": cv["without"], "with": cv["with"],
                   "benign_precision_bound": round(cv["bound"], 4),
                   "by_part": {k or ".": {"without": v["without"], "with": v["with"]}
                               for k, v in cv["by_part"].items()}},
            "adopted": adopted}
    return train_rows(rs, meta), cv


def evaluate(root: Path, model: prior.Model, settings: prior.Settings) -> dict[str, Any]:
    """A set's figures without and with the fallback (the model is not retrained)."""
    rs = rows(root)
    answers = {r.rel: (f.category if (f := prior.finding(model, settings, r.text, r.rel)) else None)
               for r in rs if r.empty}
    with_fallback = score(rs, answers)
    fired = [(r.rel, r.expected, answers[r.rel]) for r in rs if r.empty and answers.get(r.rel)]
    return {"without": score(rs, {}).to_json(), "with": with_fallback.to_json(), "fired": fired,
            "eligible": sum(r.empty for r in rs)}
