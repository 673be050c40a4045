"""The on-call loop, once: `serve` runs it on the wall clock, `drill --act` on the simulator's virtual clock."""

from llm_oncall.respond.responder import Case, Responder

__all__ = ["Case", "Responder"]
