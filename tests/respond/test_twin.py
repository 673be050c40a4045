"""The twin (respond/twin.py): calibration from what a live fleet exposes, the ranking of candidates against doing
nothing, the prediction on `act plan --simulate --json` and on `drill --act --json`, and the timeline's verdict
when a prediction misses. No test is timed: the twin's runs are on the simulator's virtual clock."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.testkit import capture_bundle
from typer.testing import CliRunner

from llm_oncall.actions import verify
from llm_oncall.actions.model import Action, Plan
from llm_oncall.cli import app
from llm_oncall.cli.act import plan_table
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.diagnosis.features import Features
from llm_oncall.drills import act
from llm_oncall.incidents import IncidentStore
from llm_oncall.respond import twin
from llm_oncall.signals.gpu import GpuSnapshot
from llm_oncall.signals.snapshot import FleetSnapshot, PodSnapshot, Snapshot
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster


def _snap(t: float, pods: int = 8, tp: int = 2, group: int = 2, rps: dict[str, float] | None = None) -> Snapshot:
    ps = tuple(PodSnapshot(f"llama-{i}", {"group": f"llama-g{i // group}", "deployment": "llama",
                                          "revision": "bad" if i == 0 else "good"}, True,
                           kv_capacity_tokens=432_000.0, requests_per_s=(rps or {}).get("bad" if i == 0 else "good"))
               for i in range(pods))
    gpus = tuple(GpuSnapshot(f"node-{i // 4}", str(j), None, f"llama-{i}") for i in range(pods) for j in range(tp))
    return Snapshot(t, 30.0, ps, FleetSnapshot(pods, pods), gpus)


def _history(red: int, n: int = 12, **values: float) -> list[Features]:
    """n scrapes, the last `red` of them with the user-facing symptom red and the queue deep."""
    out = []
    for i in range(n):
        bad = i >= n - red
        out.append(Features(15.0 * i, {"pods_up_baseline": 8.0, "arrival_rate_baseline": 64.0,
                                       "arrival_rate": 140.0 if bad else 64.0, "symptom": bad,
                                       "waiting_per_pod": 40.0 if bad else 0.5, **values}))
    return out


def _d(incident: str, revision: str | None = None) -> Diagnosis:
    return Diagnosis(incident=incident, confidence=0.9, summary="", t=165.0, scope_revision=revision)


def test_calibration_reads_the_fleet_from_its_snapshot() -> None:
    feats = _history(red=2, arrival_rate_ratio=2.2)
    snaps = [_snap(f.t) for f in feats]
    spec = twin.calibrate(_d("kv-capacity"), feats, snaps)
    c = spec.cfg
    assert (c.pods, c.tp, c.group_size, c.deployment) == (8, 2, 2, "llama")  # pods, GPUs per pod, groups
    assert c.rate_per_pod == pytest.approx(8.0)  # arrivals before the incident / pods
    assert c.engine.num_gpu_blocks == 432_000 // 16  # vllm:cache_config_info's KV capacity
    assert spec.fault.kind == "kv-capacity" and spec.fault.params["factor"] == pytest.approx(2.2)
    assert spec.red_scrapes == 2  # the twin acts once as many of its own scrapes are red
    assert spec.fault.at == pytest.approx(twin.WARMUP_S + 7.5)


def test_calibration_models_each_fault_from_its_evidence() -> None:
    feats = _history(red=1)
    hang = twin.calibrate(_d("engine-hang"), feats, [_snap(f.t) for f in feats])
    assert hang.fault.params["group"] == "llama-g0"
    rps = {"bad": 2.0, "good": 8.0}  # one canary pod of eight: 2 of 58 requests per second
    bad = twin.calibrate(_d("bad-model-rollout", "bad"), feats, [_snap(f.t, rps=rps) for f in feats])
    assert bad.fault.params["weight"] == pytest.approx(2.0 / 58.0, abs=0.02)
    lone = twin.calibrate(_d("kv-capacity"), [], [])  # nothing to read: defaults, said so
    assert lone.cfg.pods == 8 and lone.red_scrapes == 0


def test_a_prediction_misses_beyond_twice_and_two_scrapes() -> None:
    assert verify.prediction_miss(135.0, 150.0, 600.0, 150.0) is None
    assert verify.prediction_miss(15.0, 40.0, 600.0, 40.0) is None  # ×2.7 but within two scrapes: the grid
    assert verify.prediction_miss(60.0, 150.0, 600.0, 150.0) is not None
    assert verify.prediction_miss(None, 150.0, 600.0, 150.0) is not None  # recovered; the twin said it would not
    assert verify.prediction_miss(None, None, 600.0, 600.0) is None
    assert verify.prediction_miss(60.0, None, 600.0, 100.0) is None  # still in time
    assert verify.prediction_miss(60.0, None, 600.0, 160.0) is not None  # late beyond ×2


def test_a_twin_that_does_not_page_acts_at_the_live_incidents_age() -> None:
    """The twin's own diagnosis may name another incident than the plan's (here its surge pages kv-capacity, the
    plan is for long-context-starvation): it acts once it has been red as long as the live fleet was, not minutes
    later, so a prediction from onset is comparable with the live fleet's."""
    feats = _history(red=2, arrival_rate_ratio=2.2)
    spec = twin.calibrate(_d("kv-capacity"), feats, [_snap(f.t) for f in feats])
    assert spec.red_scrapes == 2
    out = twin.run(spec, "long-context-starvation", [], "nothing", horizon_s=15.0)
    assert out.error is None
    assert out.age_s is not None and 2 * spec.interval_s <= out.age_s <= 5 * spec.interval_s, out.age_s


def _notes(db: Path, incident_id: str | None) -> list[dict[str, Any]]:
    assert incident_id is not None
    store = IncidentStore(db)
    try:
        return [e["detail"] for e in store.timeline(incident_id) if e["kind"] == "note" and "twin" in e["detail"]]
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize(("incident", "fix"), [("kv-capacity", "scale_out"), ("engine-hang", "restart_group")])
def test_doing_nothing_ranks_below_the_fix_and_the_drill_carries_the_prediction(
        tmp_path: Path, incident: str, fix: str) -> None:
    db = tmp_path / "record.db"
    r = act.run_act(incident, seed=7, record=db, simulate=True)
    assert r.recovered and r.twin is not None
    nothing = r.twin["nothing"]
    right = next(a["prediction"] for a in r.plan["actions"] if a["kind"] == fix)
    assert right["rank"] < nothing["rank"]
    assert right["predicted_slo_minutes"] < nothing["predicted_slo_minutes"]
    assert right["predicted_seconds_to_recovery"] is not None and nothing["predicted_seconds_to_recovery"] is None
    body = json.loads(json.dumps(r.to_json()))
    predicted, observed = body["predicted_seconds_to_recovery"], body["seconds_to_recovery"]
    assert predicted is not None and body["predicted_seconds_after_action"] is not None
    assert body["prediction_error"] == pytest.approx(abs(predicted - observed) / observed, abs=1e-3)
    assert verify.prediction_miss(body["predicted_seconds_after_action"], body["observed_seconds_after_action"],
                                  600.0, 600.0) is None
    assert [n["twin"] for n in _notes(db, r.incident_id)] == ["hit"]


def _late_twin(plan: Plan, d: Diagnosis, features: Sequence[Features], snapshots: Sequence[Snapshot],
               executes: Any = None) -> None:
    """A twin that predicts recovery ten minutes after the action."""
    plan.twin = {"horizon_s": 900.0, "plan": {"predicted_seconds_to_recovery": 600.0}}


def test_a_large_miss_goes_on_the_timeline(tmp_path: Path) -> None:
    db = tmp_path / "record.db"
    r = act.run_act("kv-capacity", seed=7, record=db, twin=_late_twin)
    assert r.recovered
    notes = _notes(db, r.incident_id)
    assert [n["twin"] for n in notes] == ["miss"]
    assert notes[0]["predicted_seconds_to_recovery"] == 600.0
    assert notes[0]["observed_seconds_to_recovery"] < 300.0 and "twin miss" in notes[0]["detail"]


def _capture(fleet: Fleet, out: Path, until: float) -> None:
    capture_bundle(fleet, out, until)


@pytest.mark.slow
def test_act_plan_simulate_json_puts_the_prediction_on_each_action(tmp_path: Path) -> None:
    cfg, fault = scenario("engine-hang", 2)
    fleet = Fleet(cfg, seed=2, fault=fault)
    _capture(fleet, tmp_path / "bundle", 420.0)
    server = KubeApiServer(KubeCluster(fleet)).start()
    try:
        kc = server.write_kubeconfig(tmp_path / "kubeconfig")
        res = CliRunner().invoke(app, ["act", "plan", "--replay", str(tmp_path / "bundle"), "--kubeconfig", str(kc),
                                       "--db", str(tmp_path / "oncall.db"), "--simulate", "--horizon", "300",
                                       "--json"])
    finally:
        server.stop()
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["incident"] == "engine-hang"
    ranks = []
    for a in body["actions"]:
        p = a["prediction"]
        assert set(p) >= {"predicted_seconds_to_recovery", "predicted_slo_minutes", "rank", "horizon_s"}
        assert p["horizon_s"] == 300.0
        ranks.append(p["rank"])
    tw = body["twin"]
    ranks += [tw["nothing"]["rank"]] + ([tw["plan"]["rank"]] if len(body["actions"]) > 1 else [])
    assert sorted(ranks) == list(range(1, len(ranks) + 1))  # one ranking: doing nothing, each action, the plan
    assert tw["calibration"]["tp"] == 2 and tw["calibration"]["fault"] == "engine-hang"
    restart = next(a for a in body["actions"] if a["kind"] == "restart_group")
    assert restart["prediction"]["rank"] < tw["nothing"]["rank"]
    table = plan_table(body)
    assert "predicted (twin)" in [c.header for c in table.columns]
    assert Action.model_validate({k: v for k, v in restart.items() if k != "idempotency_key"}).prediction is not None


def test_serve_tries_plans_on_the_twin_only_when_enabled() -> None:
    from llm_oncall.service import watch
    from llm_oncall.service.config import ServiceConfig

    assert ServiceConfig.model_validate({"source": {"sim": {}}}).twin is False  # serve's rounds stay cheap
    assert ServiceConfig.model_validate({"source": {"sim": {}}, "twin": True}).twin is True
    made = watch._twin(15.0)
    assert isinstance(made, twin.Twin) and made.interval_s == 15.0
