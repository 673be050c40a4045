"""llm-d's context-length-aware filter as the simulator's router applies it: once some pod carries
`llm-d.ai/context-length-range`, a prompt goes to pods whose range holds its length or that carry no label
(an unlabelled endpoint accepts any length); no candidate left means no endpoint."""

from __future__ import annotations

import random
from dataclasses import dataclass

from llm_oncall.sim.router import Router


@dataclass(frozen=True)
class Ep:
    key: int
    context_range: tuple[int, int] | None
    load: int = 0
    long_pool: bool = False


LONG, SHORT, ANY = Ep(1, (16384, 131072)), Ep(2, (0, 16384)), Ep(3, None)


def _picks(router: Router, eps: list[Ep], prompt_len: int) -> set[Ep | None]:
    return {router.pick(eps, chain, prompt_len) for chain in range(200)}


def test_filter_keeps_the_range_and_the_unlabelled() -> None:
    r = Router("sticky", random.Random(1))
    r.length_aware = True
    assert _picks(r, [LONG, SHORT, ANY], 40_000) == {LONG, ANY}
    assert _picks(r, [LONG, SHORT, ANY], 900) == {SHORT, ANY}
    assert _picks(r, [LONG, SHORT], 40_000) == {LONG}
    assert _picks(r, [SHORT], 40_000) == {None}


def test_without_labels_every_pod_is_a_candidate() -> None:
    r = Router("sticky", random.Random(1))
    assert _picks(r, [LONG, SHORT, ANY], 40_000) == {LONG, SHORT, ANY}
