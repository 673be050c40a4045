"""Postmortem tests: one seeded `drill --act` record per incident used (module-scoped, ~10 s each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_oncall.drills.act import ActResult, _run_args


@pytest.fixture(scope="session")
def kv_drill(tmp_path_factory: pytest.TempPathFactory) -> tuple[ActResult, Path]:
    out = tmp_path_factory.mktemp("pm") / "kv-capacity"
    return _run_args(("kv-capacity", 7, out)), out


@pytest.fixture(scope="session")
def ecc_drill(tmp_path_factory: pytest.TempPathFactory) -> tuple[ActResult, Path]:
    out = tmp_path_factory.mktemp("pm") / "gpu-ecc"
    return _run_args(("gpu-ecc", 7, out)), out
