"""The user-facing symptom thresholds, once: the diagnosis (diagnosis/symptoms.py) and the exported alerts
(runbooks/promrules.py) read the same numbers, so a fleet pages on the same condition in both."""

from __future__ import annotations

TTFT_SYMPTOM_RATIO = 3.0
"""TTFT p99 at 3× its baseline is red: the alert most vLLM on-call rotations page on."""
ITL_SYMPTOM_RATIO = 2.0
"""Inter-token latency at 2×: every token of every stream is twice as slow, which users see as a stutter."""
ERROR_SYMPTOM_SHARE = 0.05
"""5 % of requests failing is red unless an SLO says otherwise."""

RECOVERY_SYMPTOMS: tuple[tuple[str, str, str], ...] = (
    # (symptom flag, value feature, SLO feature): the user-facing symptoms an incident must bring back before it
    # counts as recovered, on top of its runbook's own `recovery:` signals (actions/verify.py)
    ("symptom_ttft", "ttft_p99", "ttft_slo"),
    ("symptom_itl", "itl_p99", "itl_slo"),
    ("symptom_errors", "error_share", ""),
)
"""TTFT p99, ITL p99 and the error share: each back within its baseline-relative bound above (or, when an SLO is
configured, within the SLO) — a drained queue with TTFT still ×4 is not a recovery."""
