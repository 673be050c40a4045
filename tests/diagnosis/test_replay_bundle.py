"""A capture bundle written from a fleet's telemetry replays to the same diagnosis, via the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.testkit import free_port
from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.drills.simsource import SimSource
from llm_oncall.signals.bundle import BundleWriter
from llm_oncall.signals.source import Target
from llm_oncall.sim import Fleet, scenario

pytestmark = pytest.mark.xdist_group("sim-replay")


def _capture(incident: str, seed: int, out: Path, until: float) -> None:
    cfg, fault = scenario(incident, seed)
    fleet = Fleet(cfg, seed=seed, fault=fault)
    source = SimSource(fleet, 15.0, keep_text=True)
    writer = BundleWriter(out, 15.0)
    while fleet.now < until:
        batch = source.collect()
        for obs in batch.observations:
            if obs.target.kind in ("vllm", "dcgm"):
                writer.write(obs)
        for name, lines in batch.logs.items():
            pod = name.split("/")[0]
            if pod in fleet.targets():
                writer.write_logs(Target(pod), lines)
        writer.add_events(batch.events)


@pytest.mark.parametrize(("incident", "until"), [("engine-hang", 420.0), ("healthy", 360.0)])
def test_replay_of_a_capture_diagnoses_it(tmp_path: Path, incident: str, until: float) -> None:
    out = tmp_path / "bundle"
    _capture(incident, 2, out, until)
    meta = json.loads((out / "bundle.json").read_text())
    assert meta["interval"] == 15.0 and meta["targets"]
    res = CliRunner().invoke(app, ["diagnose", "--replay", str(out), "--json"])
    assert res.exit_code == 0, res.output
    body = json.loads(res.output)
    assert body["incident"] == incident, body["summary"]
    assert body["snapshot"]["fleet"]["pods_total"] >= 4
    # Rates are windowed: generated tokens/s is far below the lifetime counter value.
    assert all(p["generation_tokens_per_s"] is None or p["generation_tokens_per_s"] < 1e5
               for p in body["snapshot"]["pods"])


def test_replay_errors_are_clear(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["diagnose", "--replay", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "not a directory" in res.output
    res = runner.invoke(app, ["diagnose", "--replay", str(tmp_path)])
    assert res.exit_code == 2 and "no <target>/<t>.prom" in res.output


def test_nothing_answering_is_an_error_not_healthy() -> None:
    port = free_port()
    res = CliRunner().invoke(app, ["diagnose", "--target", f"dead=http://127.0.0.1:{port}/metrics",
                                   "--interval", "0.2", "--samples", "2", "--json"])
    assert res.exit_code == 3, res.output
    assert "no vLLM target is up" in res.output
