"""`drill INCIDENT --what-if FIX`: the runbooks' long-term fixes name a modelled what-if, and a run shows both sides."""

from __future__ import annotations

import pytest

from llm_oncall.drills import whatif
from llm_oncall.runbooks.loader import builtin


def test_every_runbook_what_if_is_modelled_for_its_incident() -> None:
    named = [(rb.id, item.what_if) for rb in builtin() for item in rb.long_term if item.what_if]
    assert named, "no runbook links a long-term fix to its what-if drill"
    for incident, fix in named:
        assert fix in whatif.FIXES and whatif.FIXES[fix].incident == incident, (incident, fix)


def test_an_unknown_what_if_is_refused_with_the_modelled_ones() -> None:
    with pytest.raises(ValueError, match="retry-budget"):
        whatif.run("engine-hang", "retry-budget", 7)


def test_the_retry_budget_what_if_measures_both_sides() -> None:
    body = whatif.run("retry-storm", "retry-budget", 7)
    for side in ("without", "with"):
        assert set(body[side]) == {"slo_minutes_burned", "requests_failed", "requests_over_slo", "mttr_s", "pages"}
    # The autopilot ends the storm before it forms; with clients that back off no storm forms and none is paged, but
    # the hot fleet without the lost pod still loses pods to its OOM limit now and then: more pages, none of them
    # a retry storm (docs/drills.md; tests/sim/test_whatif_controllers.py checks the storm itself).
    assert body["with"]["pages"] > body["without"]["pages"] == 1, body
    # The runbook quotes this run's figure (its `measured:`, what the postmortem's prevent item says): a fresh run of
    # the same seed gives the same numbers.
    rb = next(r for r in builtin() if r.id == "retry-storm")
    m = next(i.measured for i in rb.long_term if i.what_if == "retry-budget")
    assert m is not None and m.seed == 7
    assert m.slo_minutes_burned == (body["without"]["slo_minutes_burned"], body["with"]["slo_minutes_burned"])
    assert m.requests_failed == (body["without"]["requests_failed"], body["with"]["requests_failed"])
    assert m.pages == (body["without"]["pages"], body["with"]["pages"])


def test_every_what_if_carries_its_measured_figure() -> None:
    missing = [(rb.id, i.what_if) for rb in builtin() for i in rb.long_term if i.what_if and i.measured is None]
    assert not missing, f"long-term fixes without the figure their what-if measured: {missing}"
