"""The incident ids (README: The incidents): stable strings used in JSON, tests, runbook files and faults.

At the bottom of the package so every layer (evidence, runbooks, simulator) reads the same list.
"""

from __future__ import annotations

FAULTS: tuple[str, ...] = (
    "kv-capacity",
    "engine-hang",
    "prefix-cache-drop",
    "retry-storm",
    "bad-model-rollout",
    "gpu-ecc",
    "cuda-graph-crash",
    "long-context-starvation",
    "pod-outlier",
)
"""What can go wrong (and what the simulator can inject)."""

ALL: tuple[str, ...] = (*FAULTS, "healthy", "unknown")
"""Every answer a diagnosis can give: `unknown` is a red user-facing symptom that no runbook explains."""

SEVERITIES: tuple[str, ...] = ("page", "warn", "none")
"""`page`: user-visible now; `warn`: a trend that will become visible; `none`: nothing to do."""
