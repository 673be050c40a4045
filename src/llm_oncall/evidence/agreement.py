"""How often two labellers agree: a corpus's labels beside a second, independent labelling of the same files.

The classifier's accuracy on a set is only as meaningful as its labels are reproducible: where two careful
labellers disagree, no classifier can be right against both. A second labelling is a YAML list of entries
``{file, class, sure?, second?, thread_read?, reason?}``, ``file`` relative to the corpus root; it is read against
the corpus's manifests and scored as raw agreement, Cohen's kappa (agreement beyond what the two label
distributions give by chance) and agreement on the entries the second labeller was sure of.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llm_oncall.evidence.corpus import CLASSES, CorpusError, Sample, read_list


class SecondLabel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    file: str = Field(min_length=1)
    cls: Literal[CLASSES] = Field(alias="class")  # type: ignore[valid-type]
    sure: bool = True
    second: Literal[CLASSES] | None = None  # type: ignore[valid-type]  # the class also considered, when not sure
    thread_read: bool = False  # the labeller read the source thread, not only the excerpt
    reason: str = ""


@dataclass(frozen=True)
class Disagreement:
    file: str
    first: str
    second: str
    sure: bool
    reason: str


@dataclass(frozen=True)
class Agreement:
    samples: int
    agree: int
    kappa: float | None
    sure: int
    sure_agree: int
    benign_agree: int  # agreement on benign against any failure, the decision that pages
    disagreements: tuple[Disagreement, ...]

    @property
    def rate(self) -> float | None:
        return self.agree / self.samples if self.samples else None

    def to_json(self) -> dict[str, object]:
        return {"samples": self.samples, "agree": self.agree,
                "agreement": None if self.rate is None else round(self.rate, 4),
                "kappa": None if self.kappa is None else round(self.kappa, 4),
                "sure": self.sure, "sure_agree": self.sure_agree, "benign_agree": self.benign_agree,
                "disagreements": [d.__dict__ for d in self.disagreements]}


def load_second(path: Path) -> list[SecondLabel]:
    """The second labelling; raises CorpusError on a file that is not a list of valid entries or names a file
    twice."""
    try:
        labels = [SecondLabel.model_validate(e) for e in read_list(path)]
    except ValidationError as exc:
        raise CorpusError(f"{path}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from exc
    twice = [f for f, n in Counter(x.file for x in labels).items() if n > 1]
    if twice:
        raise CorpusError(f"{path}: labelled more than once: {', '.join(sorted(twice)[:5])}")
    return labels


def kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two labellings (None when chance agreement is total: one class only)."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(first[c] * second[c] for c in first) / (n * n)
    return None if chance >= 1.0 else (observed - chance) / (1.0 - chance)


def compare(samples: list[Sample], root: Path, labels: list[SecondLabel]) -> Agreement:
    """Every second label against the manifest's class of the same file; raises CorpusError when a label names a
    file the corpus does not hold (a mistyped path must not shrink the comparison silently)."""
    by_file = {s.path.resolve().relative_to(root.resolve()).as_posix(): s for s in samples}
    missing = [x.file for x in labels if x.file not in by_file]
    if missing:
        raise CorpusError(f"{len(missing)} labelled file(s) not in the corpus under {root}: "
                          f"{', '.join(missing[:5])}")
    pairs = [(by_file[x.file].expected, str(x.cls)) for x in labels]
    sure = [(a, b) for (a, b), x in zip(pairs, labels, strict=True) if x.sure]
    return Agreement(
        samples=len(pairs), agree=sum(a == b for a, b in pairs), kappa=kappa(pairs),
        sure=len(sure), sure_agree=sum(a == b for a, b in sure),
        benign_agree=sum((a == "benign") == (b == "benign") for a, b in pairs),
        disagreements=tuple(Disagreement(x.file, a, b, x.sure, x.reason)
                            for (a, b), x in zip(pairs, labels, strict=True) if a != b))
