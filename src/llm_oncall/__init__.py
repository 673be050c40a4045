"""llm-oncall: an on-call autopilot for vLLM inference fleets."""

__version__ = "0.1.0"
