"""`bench evidence`: per-class precision and recall of `evidence classify` on a corpus of real samples.

The corpus is the repository's ``tests/evidence/real/`` (public issue threads, vendor test data; each sample
with its provenance and expected class) or any directory laid out the same way (``evidence.corpus``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llm_oncall.evidence import corpus


def default_corpus(start: Path | None = None) -> Path | None:
    """``tests/evidence/real`` of the repository this runs from (the working directory or the package's
    checkout), if there is one."""
    candidates = [start or Path.cwd(), *(start or Path.cwd()).parents, Path(__file__).resolve().parents[3]]
    for base in candidates:
        p = base / "tests" / "evidence" / "real"
        if p.is_dir():
            return p
    return None


def run(root: Path, repeat: int = 1, by_source: bool = False, word_prior: bool | None = None) -> dict[str, Any]:
    """Classify every sample (``repeat`` times for the files/s figure); scores come from the first pass.
    ``by_source``: also the accuracy of samples whose source thread has other samples in the corpus
    ("shared") and of those that are the only sample of their thread ("only"). ``word_prior``: the word-level
    prior as the fallback (None: the default, on since round 3o)."""
    samples = corpus.load(root)
    report = corpus.evaluate(samples, word_prior)
    seconds = report.seconds
    for _ in range(max(0, repeat - 1)):
        seconds += corpus.evaluate(samples, word_prior).seconds
    out = report.to_json()
    out["corpus"] = str(root)
    out["files_per_s"] = round(len(samples) * max(1, repeat) / seconds, 1) if seconds > 0 else None
    out["table"] = report.table()
    if by_source:
        out["by_source"] = report.by_source()
    return out
