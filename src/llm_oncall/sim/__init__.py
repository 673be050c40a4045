"""Fleet simulator: vLLM engines, router, gateway, autoscaler, clients and faults on a virtual clock.

Telemetry comes out of simulated behaviour, rendered exactly as vLLM, dcgm-exporter and kube-state-metrics
write it; the injected fault is only visible through `Fleet.ground_truth`.
"""

from llm_oncall.incident_ids import FAULTS
from llm_oncall.sim.clients import ClientSpec
from llm_oncall.sim.config import FaultSpec, FleetConfig, GroundTruth, Spike
from llm_oncall.sim.engine import EngineConfig, StepModel
from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.scenarios import scenario

__all__ = [
    "FAULTS",
    "ClientSpec",
    "EngineConfig",
    "FaultSpec",
    "Fleet",
    "FleetConfig",
    "GroundTruth",
    "Spike",
    "StepModel",
    "scenario",
]
