"""Piped output (CI logs): the CLI's real process with stdout a pipe, no COLUMNS — Rich lays tables out for 80
columns, and nothing is wider or cut off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.golden import assert_fits

from llm_oncall.incidents import IncidentStore

SRC = Path(__file__).resolve().parents[2] / "src"


def run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TERM")}
    env["PYTHONPATH"] = f"{SRC}{os.pathsep}{env.get('PYTHONPATH', '')}"
    out = subprocess.run([sys.executable, "-m", "llm_oncall.cli", *args], capture_output=True, text=True,
                         env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_runbooks_list_piped_fits_80_columns() -> None:
    text = run("runbooks", "list")
    assert_fits(text, 80, "runbooks list")
    assert "kv-capacity" in text and "symptom: " in text  # the symptom moved below its row, not squeezed


def test_incidents_list_piped_fits_80_columns(tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    s = IncidentStore(db)
    s.open_incident("long-context-starvation", "Long prompts starve short chats: KV-cache usage 97% held by a few "
                    "long requests while the request rate stays flat")
    s.close()
    text = run("incidents", "list", "--db", str(db))
    assert_fits(text, 80, "incidents list")
    assert "long-context-starvation" in text and "title: Long prompts starve short chats" in text
