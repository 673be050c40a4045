"""Postmortem tests: seeded `drill INCIDENT --act --postmortem DIR` runs through the CLI (session-scoped, ~10 s
each), read back from its `--json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llm_oncall.cli import app

Drill = tuple[dict[str, Any], Path]


def _drill(incident: str, root: Path) -> Drill:
    out = CliRunner().invoke(app, ["drill", incident, "--seed", "7", "--act", "--no-manual", "--postmortem", str(root),
                                   "--workers", "1", "--json"])
    assert out.exit_code == 0, out.output
    (result,) = json.loads(out.output)["results"]
    return result, root / incident


@pytest.fixture(scope="session")
def kv_drill(tmp_path_factory: pytest.TempPathFactory) -> Drill:
    return _drill("kv-capacity", tmp_path_factory.mktemp("pm"))


@pytest.fixture(scope="session")
def ecc_drill(tmp_path_factory: pytest.TempPathFactory) -> Drill:
    return _drill("gpu-ecc", tmp_path_factory.mktemp("pm"))
