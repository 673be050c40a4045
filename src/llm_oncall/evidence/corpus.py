"""A corpus of real samples with their expected class, and how the classifier scores on it.

Layout: one directory per source family, each with ``manifest.yaml`` — a list of entries ``{file, class,
incident_hint, benign, format, source: {repo, ref, url}, version?, note?}`` — and the sample files it names.
The repository's corpus is ``tests/evidence/real/``; the gate (tests/evidence/test_real_corpus.py) and
``llm-oncall bench evidence`` both read it through ``evaluate``.

A sample's predicted class is its file-level finding's category, except that a benign finding predicts
``benign`` whatever its category; ``unknown`` is a prediction of its own (it counts against recall, and a
benign ``unknown``, nothing recognised, counts as a benign prediction: no alarm raised).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llm_oncall.evidence import prior
from llm_oncall.evidence.catalog import HINT_OF_CATEGORY
from llm_oncall.evidence.classify import classify_file
from llm_oncall.evidence.model import CATEGORIES, Finding

CLASSES: tuple[str, ...] = tuple(c for c in CATEGORIES if c != "unknown")


class Source(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    repo: str | None = None  # null for a source outside GitHub (a vendor forum thread); the url says where
    ref: str = Field(min_length=1)
    url: str = Field(min_length=8)


class Entry(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    file: str = Field(min_length=1)
    cls: Literal[CLASSES] = Field(alias="class")  # type: ignore[valid-type]
    incident_hint: str | None = None
    benign: bool
    format: str = ""
    source: Source
    version: str | None = None
    note: str = ""


class CorpusError(ValueError):
    pass


@dataclass(frozen=True)
class Sample:
    path: Path
    entry: Entry

    @property
    def expected(self) -> str:
        return str(self.entry.cls)


def read_list(path: Path) -> list[Any]:
    """A YAML file that holds a list of entries (a manifest, a second labelling); raises CorpusError otherwise."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CorpusError(f"{path}: {exc}") from exc
    if not isinstance(doc, list):
        raise CorpusError(f"{path}: expected a list of entries")
    return doc


def load(root: Path) -> list[Sample]:
    """Every manifest under ``root`` (recursively); raises CorpusError on a bad manifest or a missing file."""
    manifests = sorted(root.rglob("manifest.yaml"))
    if not manifests:
        raise CorpusError(f"{root}: no manifest.yaml found")
    out: list[Sample] = []
    for m in manifests:
        for raw in read_list(m):
            try:
                e = Entry.model_validate(raw)
            except ValidationError as exc:
                raise CorpusError(f"{m}: {raw.get('file') if isinstance(raw, dict) else raw!r}: {exc}") from exc
            p = m.parent / e.file
            if not p.is_file():
                raise CorpusError(f"{m}: {e.file} does not exist")
            if e.benign != (e.cls == "benign") or e.incident_hint != HINT_OF_CATEGORY[str(e.cls)]:
                raise CorpusError(f"{m}: {e.file}: class {e.cls} needs benign={e.cls == 'benign'} and "
                                  f"incident_hint={HINT_OF_CATEGORY[str(e.cls)]!r}")
            out.append(Sample(p, e))
    return out


def predicted(f: Finding) -> str:
    return "benign" if f.benign else f.category


@dataclass
class Result:
    sample: Sample
    finding: Finding

    @property
    def predicted(self) -> str:
        return predicted(self.finding)

    @property
    def correct(self) -> bool:
        return self.predicted == self.sample.expected


@dataclass
class Report:
    results: list[Result] = field(default_factory=list)
    seconds: float = 0.0

    def per_class(self) -> dict[str, dict[str, Any]]:
        exp = Counter(r.sample.expected for r in self.results)
        pred = Counter(r.predicted for r in self.results)
        hit = Counter(r.sample.expected for r in self.results if r.correct)
        out: dict[str, dict[str, Any]] = {}
        for c in sorted(set(exp) | {p for p in pred if p in CLASSES}):
            out[c] = {
                "n": exp[c],
                "predicted": pred[c],
                "recall": round(hit[c] / exp[c], 4) if exp[c] else None,
                "precision": round(hit[c] / pred[c], 4) if pred[c] else None,
            }
        return out

    def confusion(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for r in self.results:
            row = out.setdefault(r.sample.expected, {})
            row[r.predicted] = row.get(r.predicted, 0) + 1
        return out

    def misses(self) -> list[dict[str, Any]]:
        return [{"file": str(r.sample.path), "expected": r.sample.expected, "predicted": r.predicted,
                 "kind": r.finding.kind, "confidence": r.finding.confidence}
                for r in self.results if not r.correct]

    def by_source(self) -> dict[str, dict[str, Any]]:
        """Accuracy split by whether a sample's source thread (its URL, without a fragment) has other samples in
        the corpus ("shared") or only this one ("only"): the gap measures how much the classifier learnt from
        the threads it has seen."""
        threads = Counter(source_key(r.sample) for r in self.results)
        out: dict[str, dict[str, Any]] = {}
        for group in ("shared", "only"):
            rs = [r for r in self.results if (threads[source_key(r.sample)] > 1) == (group == "shared")]
            hit = sum(r.correct for r in rs)
            out[group] = {"samples": len(rs), "correct": hit, "threads": len({source_key(r.sample) for r in rs}),
                          "accuracy": round(hit / len(rs), 4) if rs else None}
        return out

    def to_json(self) -> dict[str, Any]:
        n = len(self.results)
        return {
            "samples": n,
            "benign_samples": sum(1 for r in self.results if r.sample.expected == "benign"),
            "accuracy": round(sum(r.correct for r in self.results) / n, 4) if n else None,
            "per_class": self.per_class(),
            "unknown_predictions": sum(1 for r in self.results if r.predicted == "unknown"),
            "confusion": self.confusion(),
            "files_per_s": round(n / self.seconds, 1) if self.seconds > 0 else None,
            "seconds": round(self.seconds, 3),
            "misses": self.misses(),
        }

    def table(self) -> str:
        rows = [f"{'class':<14} {'n':>4} {'pred':>5} {'precision':>9} {'recall':>7}"]
        for c, v in self.per_class().items():
            p = "-" if v["precision"] is None else f"{v['precision']:.3f}"
            r = "-" if v["recall"] is None else f"{v['recall']:.3f}"
            rows.append(f"{c:<14} {v['n']:>4} {v['predicted']:>5} {p:>9} {r:>7}")
        return "\n".join(rows)


def source_key(s: Sample) -> str:
    """The thread a sample comes from: its source URL without fragment, query or trailing slash."""
    url = s.entry.source.url.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    return url.lower()


def evaluate(samples: Iterable[Sample], word_prior: prior.Fallback | bool | None = None) -> Report:
    """Classify every sample as a document (``word_prior``: see classify.classify_all)."""
    report = Report()
    todo = list(samples)
    start = time.perf_counter()
    for s in todo:
        report.results.append(Result(s, classify_file(s.path, word_prior)))
    report.seconds = time.perf_counter() - start
    return report
