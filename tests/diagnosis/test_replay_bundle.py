"""A capture bundle written from a fleet's telemetry replays to the same diagnosis, via the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.testkit import PageServer, capture_bundle, free_port
from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.sim import Fleet, scenario

pytestmark = pytest.mark.xdist_group("sim-replay")


def _capture(incident: str, seed: int, out: Path, until: float) -> None:
    cfg, fault = scenario(incident, seed)
    capture_bundle(Fleet(cfg, seed=seed, fault=fault), out, until)


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


NODE_EXPORTER_PAGE = b"""# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 2.3e+04
node_cpu_seconds_total{cpu="0",mode="user"} 1.2e+03
# HELP node_load1 1m load average.
# TYPE node_load1 gauge
node_load1 0.42
"""


def test_a_page_without_vllm_series_is_an_error_naming_what_it_found() -> None:
    """A newcomer points --target at node_exporter: that is the wrong URL, not a healthy engine."""
    page = PageServer(lambda: NODE_EXPORTER_PAGE)
    try:
        res = CliRunner().invoke(app, ["diagnose", "--target", f"node={page.url}", "--interval", "0.2",
                                       "--samples", "2", "--json"])
    finally:
        page.close()
    assert res.exit_code == 3, res.output
    assert "no vLLM series" in res.output and "node_load1" in res.output and "node_cpu_seconds_total" in res.output


def test_incident_lasting_most_of_the_bundle_is_still_named_at_its_end(tmp_path: Path) -> None:
    """The onset at 20 % of the bundle: the incident is 80 % of what is replayed, longer than the autopilot's
    history, and must not become its own baseline (the baseline stays frozen at the change while TTFT is red)."""
    _, fault = scenario("long-context-starvation", 2)
    assert fault is not None
    until = fault.at / 0.2
    out = tmp_path / "bundle"
    _capture("long-context-starvation", 2, out, until)
    res = CliRunner().invoke(app, ["diagnose", "--replay", str(out), "--json"])
    assert res.exit_code == 0, res.output
    body = json.loads(res.output)
    assert body["incident"] == "long-context-starvation", body["summary"]
    assert body["baseline"]["frozen_at"] < fault.at + 30, body.get("baseline")
    ttft = next(s for s in body["symptoms"] if s["signal"] == "ttft_p99")
    assert ttft["red"] and ttft["value"] >= 3 * ttft["baseline"], ttft
    # The story of the bundle: healthy, then the incident paged near onset.
    assert body["timeline"][0]["incident"] == "healthy"
    assert body["first_page"]["incident"] in ("long-context-starvation", "unknown")
    assert fault.at <= body["first_page"]["t"] <= fault.at + 120, body["first_page"]
    assert any(e["incident"] == "long-context-starvation" and e["severity"] == "page" for e in body["timeline"])


def test_a_configured_slo_turns_the_symptom_red(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    _capture("healthy", 2, out, 240.0)
    plain = json.loads(CliRunner().invoke(app, ["diagnose", "--replay", str(out), "--json"]).output)
    ttft = next(s for s in plain["symptoms"] if s["signal"] == "ttft_p99")
    assert not ttft["red"] and ttft["slo"] is None
    # An SLO below what the fleet delivers: the symptom is red against the SLO, and the answer is not healthy.
    strict = CliRunner().invoke(app, ["diagnose", "--replay", str(out), "--json",
                                      "--slo-ttft-p99", str(ttft["value"] / 4)])
    body = json.loads(strict.output)
    ttft = next(s for s in body["symptoms"] if s["signal"] == "ttft_p99")
    assert ttft["red"] is True and ttft["slo"] is not None and ttft["slo"] < ttft["value"]
    assert body["incident"] != "healthy" or body["confidence"] < 0.5, body["summary"]
    bad = CliRunner().invoke(app, ["diagnose", "--replay", str(out), "--slo-ttft-p99", "0"])
    assert bad.exit_code == 2 and "must be positive" in bad.output
