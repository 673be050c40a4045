"""The gate on real samples: every class recalled >= 0.9, benign predictions >= 0.95 precise.

The corpus (tests/evidence/real/*/manifest.yaml) holds excerpts harvested from public issue threads and vendor
test data, each with its provenance; the classifier was written from the producers' format strings, and
docs/evidence.md records which samples drove which change.
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from llm_oncall.evidence import corpus

ROOT = Path(__file__).parent / "real"
RECALL_GATE = 0.9
BENIGN_PRECISION_GATE = 0.95


@cache
def report() -> corpus.Report:
    return corpus.evaluate(corpus.load(ROOT))


def describe(r: corpus.Report) -> str:
    lines = [r.table(), "misses:"]
    lines += [f"  {m['expected']} -> {m['predicted']} ({m['kind']}, {m['confidence']}): {Path(m['file']).name}"
              for m in r.misses()]
    return "\n".join(lines)


def test_corpus_size_and_provenance() -> None:
    samples = corpus.load(ROOT)
    assert len(samples) >= 200
    assert sum(1 for s in samples if s.expected == "benign") >= 60
    names = Counter(s.path.name for s in samples)
    assert not [n for n, c in names.items() if c > 1], "sample file names are unique"
    for s in samples:
        assert s.entry.source.url.startswith("http"), s.path
        assert s.path.stat().st_size > 0, s.path
    # every sample file is in a manifest
    listed = {s.path.resolve() for s in samples}
    on_disk = {p.resolve() for p in ROOT.rglob("*") if p.is_file() and p.name != "manifest.yaml"}
    assert on_disk == listed


def test_every_class_is_represented() -> None:
    classes = Counter(s.expected for s in corpus.load(ROOT))
    for c in ("gpu-memory", "gpu-hardware", "nvlink", "hang", "cuda-graph", "kv-pressure", "bad-output", "benign"):
        assert classes[c] >= 10, (c, classes)


def test_per_class_recall() -> None:
    r = report()
    low = {c: v for c, v in r.per_class().items() if v["n"] and v["recall"] < RECALL_GATE}
    assert not low, f"recall below {RECALL_GATE}:\n{describe(r)}"


def test_benign_precision() -> None:
    r = report()
    benign = r.per_class()["benign"]
    assert benign["precision"] >= BENIGN_PRECISION_GATE, f"benign precision below gate:\n{describe(r)}"


@pytest.mark.parametrize("cls", ["gpu-memory", "gpu-hardware", "nvlink", "hang", "cuda-graph", "kv-pressure",
                                 "bad-output", "other-failure"])
def test_incident_classes_are_precise(cls: str) -> None:
    """A wrong confident answer is worse than unknown: the incident classes are not guessed."""
    r = report()
    v = r.per_class().get(cls)
    assert v is not None and v["precision"] >= 0.9, describe(r)


def test_a_finding_names_its_lines() -> None:
    for res in report().results:
        f = res.finding
        if not f.benign and f.kind != "unknown":
            assert f.lines, res.sample.path


def test_bench_json_contract() -> None:
    from llm_oncall.drills import bench_evidence

    out = bench_evidence.run(ROOT)
    assert out["samples"] == len(report().results)
    assert out["files_per_s"] > 0
    for c, v in out["per_class"].items():
        assert {"precision", "recall", "n"} <= v.keys(), c
