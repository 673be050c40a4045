"""`llm-oncall postmortem ID --out DIR`: the happy path and the error paths (exit 3: no store / no such incident,
like `incidents show`; exit 2: bad input)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.postmortem import synth
from typer.testing import CliRunner

from llm_oncall.cli import app

runner = CliRunner()


def test_writes_the_postmortem_and_says_where(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    iid = synth.make(db)
    out = runner.invoke(app, ["postmortem", iid, "--db", str(db), "--out", str(tmp_path / "pm"), "--json"])
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    assert body["incident_id"] == iid and body["incident"] == "kv-capacity"
    assert Path(body["markdown"]).is_file() and Path(body["html"]).is_file()
    assert {i["type"] for i in body["action_items"]} >= {"mitigate", "prevent", "detect", "process"}
    assert body["impact"]["slo_minutes_burned"] > 0


def test_a_configured_slo_counts_too(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    iid = synth.make(db)
    base = ["postmortem", iid, "--db", str(db), "--out", str(tmp_path / "pm"), "--json"]
    default = json.loads(runner.invoke(app, base).output)["impact"]
    strict = json.loads(runner.invoke(app, [*base, "--slo-ttft-p99", "0.1"]).output)["impact"]
    assert strict["slo"]["configured"] and strict["slo_minutes_burned"] > default["slo_minutes_burned"]


def test_error_paths(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    iid = synth.make(db)
    out = tmp_path / "pm"
    r = runner.invoke(app, ["postmortem", iid, "--db", str(tmp_path / "missing.db"), "--out", str(out)])
    assert r.exit_code == 3 and "no such file" in r.output
    r = runner.invoke(app, ["postmortem", "inc-nope", "--db", str(db), "--out", str(out)])
    assert r.exit_code == 3 and "no incident inc-nope" in r.output and iid in r.output
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    r = runner.invoke(app, ["postmortem", iid, "--db", str(junk), "--out", str(out)])
    assert r.exit_code == 3 and "junk.db" in r.output
    assert runner.invoke(app, ["postmortem", iid, "--db", str(db), "--out", str(out), "--lang", "fr"]).exit_code == 2
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert runner.invoke(app, ["postmortem", iid, "--db", str(db), "--out", str(afile)]).exit_code == 2
    assert runner.invoke(app, ["postmortem", iid, "--db", str(db)]).exit_code == 2  # --out is required
    assert not out.exists()  # nothing written on an error


def test_drill_postmortem_needs_act(tmp_path: Path) -> None:
    r = runner.invoke(app, ["drill", "kv-capacity", "--postmortem", str(tmp_path / "pm")])
    assert r.exit_code == 2 and "--act" in r.output
