"""Drill tests: the `slow` marker tags tests that run the simulator for minutes (they still run in CI)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: runs simulated drills for tens of seconds to minutes (never skipped)")
