"""The manual baseline: the same seeded incident, the same loop, a simulated on-call human deciding later."""

from __future__ import annotations

from typing import Any

from llm_oncall.drills import act
from llm_oncall.drills.manual import Human
from llm_oncall.runbooks.loader import load_registry


def test_the_humans_delay_is_seeded_and_counts_each_triage_step() -> None:
    h = Human()
    assert h.delay_s("gpu-ecc", 7) == h.delay_s("gpu-ecc", 7)
    assert h.delay_s("gpu-ecc", 7) != h.delay_s("gpu-ecc", 8)
    rb = load_registry().get("engine-hang")
    assert rb is not None
    steps = sum(h.command_s if c.command else h.query_s for c in rb.triage)
    instant = Human(ack_median_s=0.0, ack_sigma=0.0)
    assert instant.delay_s("engine-hang", 7) == steps + h.decide_s
    slow = Human(ack_median_s=600.0, ack_sigma=0.0)
    assert slow.delay_s("engine-hang", 7) == 600.0 + steps + h.decide_s


def test_gpu_ecc_worked_by_hand_recovers_later_through_the_same_actions() -> None:
    r = act.run_job(act.Job("gpu-ecc", 7, manual=True))
    assert r.recovered and r.seconds_to_recovery is not None
    assert r.manual_seconds_to_recovery is not None and r.manual_decision_s is not None
    # the human acts after acknowledging and triaging: later by about that delay, never sooner
    assert r.manual_seconds_to_recovery >= r.seconds_to_recovery + 0.5 * r.manual_decision_s
    assert r.to_json()["manual_seconds_to_recovery"] == r.manual_seconds_to_recovery


def test_the_suite_act_reports_mttr_by_incident() -> None:
    from llm_oncall.drills import suite_act

    results = suite_act.run(10, 3, workers=2, manual=False)
    body = suite_act.report(results, 10, 3)
    assert body["incidents"] == len(results) > 0
    assert set(body) >= {"accuracy", "recovered", "mttr_median_s", "mttr_p95_s", "manual_mttr_median_s",
                         "mttr_by_incident"}
    recovered = [r.seconds_to_recovery for r in results if r.seconds_to_recovery is not None]
    assert body["recovered"] == len(recovered) > 0
    assert min(recovered) <= body["mttr_median_s"] <= body["mttr_p95_s"] <= max(recovered)
    for inc, row in body["mttr_by_incident"].items():
        assert row["n"] == sum(r.drill.incident == inc for r in results)
        assert row["recovered"] <= row["acted"] <= row["n"]  # a recovery is an executed fix's


def test_one_baseline_credits_a_self_resolution_for_both_drills(monkeypatch: Any) -> None:
    """`drill --act` and `drill --suite N --act` both take the human's recovery from `manual_baseline`: a human who
    arrives after the incident went away by itself (nothing executed) is credited with its resolution time."""
    from types import SimpleNamespace

    from llm_oncall.drills import suite_act

    def fake(ttr: float | None, executed: bool) -> Any:
        return lambda *a, **k: SimpleNamespace(seconds_to_recovery=ttr, seconds_to_resolution=400.0,
                                               actions=[{"status": "executed"}] if executed else [])

    monkeypatch.setattr(act, "run_act", fake(None, False))
    assert act.manual_baseline("prefix-cache-drop", 7)[0] == 400.0
    monkeypatch.setattr(act, "run_act", fake(None, True))
    assert act.manual_baseline("prefix-cache-drop", 7)[0] is None
    monkeypatch.setattr(act, "run_act", fake(250.0, True))
    assert act.manual_baseline("prefix-cache-drop", 7)[0] == 250.0
    assert suite_act.manual_baseline is act.manual_baseline


def test_the_manual_baseline_is_on_for_named_drills_and_opt_in_for_the_suite(monkeypatch: Any) -> None:
    """`drill --act` works each named incident by hand too; `drill --suite N --act` only with `--manual` (the human's
    longer window triples a scenario's time), and its table then shows the human's columns."""
    from typer.testing import CliRunner

    from llm_oncall.cli import app
    from llm_oncall.drills import suite_act

    seen: dict[str, Any] = {}

    def fake_run(n: int, seed: int, workers: int | None, manual: bool, **kw: Any) -> list[act.ActResult]:
        seen["suite"] = manual
        return []

    def fake_many(jobs: Any, workers: Any, **kw: Any) -> list[act.ActResult]:
        seen["named"] = [j.manual for j in jobs]
        return []

    monkeypatch.setattr(suite_act, "run", fake_run)
    monkeypatch.setattr(act, "run_many", fake_many)
    runner = CliRunner()
    out = runner.invoke(app, ["drill", "--suite", "4", "--act"])
    assert out.exit_code == 0, out.output
    assert seen["suite"] is False and "manual" not in out.output
    out = runner.invoke(app, ["drill", "--suite", "4", "--act", "--manual"])
    assert out.exit_code == 0, out.output
    assert seen["suite"] is True and "manual" in out.output
    assert runner.invoke(app, ["drill", "gpu-ecc", "--act", "--json", "--no-simulate"]).exit_code == 0
    assert seen["named"] == [True]
    assert runner.invoke(app, ["drill", "gpu-ecc", "--act", "--json", "--no-manual", "--no-simulate"]).exit_code == 0
    assert seen["named"] == [False]
    out = runner.invoke(app, ["drill", "--suite", "4", "--act", "--manual", "--json"])
    assert out.exit_code == 0 and '"manual": true' in out.output
    out = runner.invoke(app, ["drill", "--suite", "4", "--manual"])
    assert out.exit_code != 0 and "needs --act" in out.output
