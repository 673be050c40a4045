"""`evidence classify` command: JSON contract, table output, missing files."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from llm_oncall.cli.evidence import app

SAMPLES = Path(__file__).parent / "samples"
runner = CliRunner()


def test_json_list_in_file_order() -> None:
    files = [SAMPLES / "dmesg_xid79.log", SAMPLES / "nvsmi_q_ecc_clean.txt", SAMPLES / "unrelated.txt"]
    result = runner.invoke(app, ["classify", *map(str, files), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [d["file"] for d in data] == [str(f) for f in files]
    assert [d["kind"] for d in data] == ["xid_79", "ecc_clean", "unknown"]
    for d in data:
        assert {"file", "kind", "benign", "incident_hint", "confidence", "facts"} <= d.keys()
    assert data[2] | {"facts": {}} == data[2] and data[2]["incident_hint"] is None


def test_table_output() -> None:
    result = runner.invoke(app, ["classify", str(SAMPLES / "nccl_collective_mismatch.log")], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    assert "nccl_collective_mismatch" in result.stdout
    assert "engine-hang" in result.stdout


def test_missing_file_exits_2() -> None:
    result = runner.invoke(app, ["classify", str(SAMPLES / "does-not-exist.log"), "--json"])
    assert result.exit_code == 2
    assert "no such file" in result.output


def test_directory_is_rejected(tmp_path: Path) -> None:
    result = runner.invoke(app, ["classify", str(tmp_path)])
    assert result.exit_code == 2
