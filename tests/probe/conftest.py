"""Fixtures: simulated fleets served on free 127.0.0.1 ports, always stopped."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from llm_oncall.sim import Fleet, FleetConfig, scenario
from llm_oncall.sim.serve import SimServer


@pytest.fixture
def serve() -> Iterator[Callable[..., SimServer]]:
    """serve(fleet, **kw) → a started SimServer; stopped after the test."""
    started: list[SimServer] = []

    def start(fleet: Fleet, **kw: object) -> SimServer:
        server = SimServer(fleet, base_port=0, **kw)  # type: ignore[arg-type]
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.stop()


def small_fleet(pods: int = 2, **kw: object) -> Fleet:
    return Fleet(FleetConfig(pods=pods, rate_per_pod=4.0, dcgm_custom_csv=True, **kw), seed=3)  # type: ignore[arg-type]


def fault_fleet(incident: str, seed: int = 1, **overrides: object) -> Fleet:
    cfg, fault = scenario(incident, seed, **overrides)
    return Fleet(cfg, seed=seed, fault=fault)
