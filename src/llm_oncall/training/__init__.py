"""On-call training: the simulated fleet pages a human, who is scored against the autopilot (docs/training.md)."""
