"""The manual baseline of `drill --act`: the same seeded incident worked by a simulated on-call human who follows the
same runbook through the same loop (respond/), so the two recoveries differ only by how the fix was decided.

The human (docs/drills.md gives the assumptions):
- acknowledges the page after a delay drawn from a log-normal distribution (default median 5 min, the night-time
  figure; seeded, so a drill is repeatable);
- runs the runbook's triage steps, each at a time cost (a PromQL query in Grafana, a command on a node or pod);
- then approves the emergency actions the plan shows approvable, the way `serve` in approve mode takes them.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from llm_oncall.incidents import IncidentStore
from llm_oncall.respond import Responder
from llm_oncall.runbooks.loader import load_registry

ACTOR = "on-call (simulated)"


@dataclass(frozen=True)
class Human:
    ack_median_s: float = 300.0
    """Page to acknowledgement, median (night)."""
    ack_sigma: float = 0.6
    """Log-normal spread of the acknowledgement: about one page in ten takes over 10 minutes."""
    query_s: float = 120.0
    """One triage query (open the dashboard, write or find the PromQL, read it)."""
    command_s: float = 180.0
    """One triage command on a node or pod (find it, exec in, run, read the output)."""
    decide_s: float = 120.0
    """Decide on the fix and take it (find the runbook's step, type or click the change)."""

    def delay_s(self, incident: str, seed: int) -> float:
        """Page → the approval of the emergency actions, for this incident's runbook."""
        rng = random.Random(seed * 7919 + 17)  # noqa: S311 - a simulation, not cryptography
        ack = self.ack_median_s * math.exp(rng.gauss(0.0, self.ack_sigma))
        rb = load_registry().get(incident)
        triage = sum(self.command_s if c.command else self.query_s for c in (rb.triage if rb else ()))
        return ack + triage + self.decide_s


class ManualApprover:
    """Approves every approvable waiting action of an incident once `delay_s` has passed since it opened (the
    approve mode of `serve`, with a person behind it)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.approved: list[str] = []

    def __call__(self, store: IncidentStore, responder: Responder) -> None:
        now = responder.clock()
        for c in (responder.cases or {}).values():
            if c.plan is None or now < c.opened_at + self.delay_s:
                continue
            status = (store.get(c.id, timeline=False) or {}).get("status")
            if status not in ("open", "mitigating"):
                continue
            decided = store.decisions(c.plan.id)
            for a in c.plan.actions:
                if a.id in decided or a.status not in ("planned", "dry_run"):
                    continue
                if a.guard is not None and a.guard.approvable:
                    store.decide(c.id, c.plan.id, a.id, "approved", ACTOR)
                    self.approved.append(a.id)
