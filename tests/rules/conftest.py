"""Shared by the rules tests: the export into a temp directory, and promtool."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from llm_oncall.runbooks import promrules
from llm_oncall.runbooks.loader import builtin

PROMTOOL = shutil.which("promtool")


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run the real promtool (Debian package `prometheus`); skip without it, fail on CI."""
    if PROMTOOL is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing (Debian package `prometheus`) and CI is set")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return subprocess.run([PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture()
def exported(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "rules"
    return out, promrules.export(out, builtin())
