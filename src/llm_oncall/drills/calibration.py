"""Is the stated confidence honest? A reliability table (confidence bins vs observed accuracy) and the Brier score.

Each scenario contributes the confidence of the answer the scorer took (the first named page after onset; for a
healthy run, or a missed incident, the last diagnosis) and whether that answer was right.  `unknown` answers are
abstentions: they state no incident, so they are counted apart and not binned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

BIN_EDGES: tuple[float, ...] = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
MIN_BIN = 20
"""A bin is judged only with at least this many scenarios (fewer say little about a rate)."""


@dataclass(frozen=True)
class Answer:
    confidence: float
    correct: bool
    abstained: bool = False


def reliability(answers: Sequence[Answer]) -> list[dict[str, Any]]:
    rows = []
    stated = [a for a in answers if not a.abstained]
    for lo, hi in pairwise(BIN_EDGES):
        inside = [a for a in stated if lo <= a.confidence < hi or (hi == 1.0 and a.confidence == 1.0)]
        if not inside:
            continue
        mean_conf = sum(a.confidence for a in inside) / len(inside)
        accuracy = sum(a.correct for a in inside) / len(inside)
        rows.append({"bin": f"{lo:.1f}-{hi:.1f}", "n": len(inside), "mean_confidence": round(mean_conf, 3),
                     "accuracy": round(accuracy, 3), "gap": round(accuracy - mean_conf, 3),
                     "judged": len(inside) >= MIN_BIN})
    return rows


def brier(answers: Sequence[Answer]) -> float | None:
    stated = [a for a in answers if not a.abstained]
    if not stated:
        return None
    return round(sum((a.confidence - float(a.correct)) ** 2 for a in stated) / len(stated), 4)
