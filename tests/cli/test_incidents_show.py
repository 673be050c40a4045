"""`incidents show` is read by people: rendered events, the plan with each action's verdict, no Python reprs; it
finds serve's store through serve's config."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.drills import act as drill_act
from llm_oncall.incidents import IncidentStore


def test_show_renders_the_record_of_an_engine_hang(tmp_path: Path) -> None:
    db = tmp_path / "record.db"
    drill_act.run_act("engine-hang", 7, record=db)
    store = IncidentStore(db)
    iid = store.incidents()[0]["id"]
    store.close()
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(yaml.safe_dump({"listen": "127.0.0.1:18081", "db": str(db), "source": {"sim": {}},
                                   "mode": "propose"}))
    for args in (["--db", str(db)], ["--config", str(cfg)]):
        res = CliRunner().invoke(app, ["incidents", "show", iid, *args], env={"COLUMNS": "120"})
        assert res.exit_code == 0, res.output
        out = res.output
        assert "{'" not in out and "':" not in out, out  # no dict reprs
        assert "diagnosis: engine-hang" in out
        assert "restart_group Pod/llm/vllm-llama-8b-0: executed" in out
        assert "expected effect of restart_group" in out
        assert "status → mitigated" in out
    res = CliRunner().invoke(app, ["incidents", "list", "--config", str(cfg), "--json"])
    assert res.exit_code == 0 and iid in res.output
    res = CliRunner().invoke(app, ["incidents", "list", "--config", str(cfg), "--db", str(db)])
    assert res.exit_code == 2
