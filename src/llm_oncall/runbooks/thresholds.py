"""The user-facing symptom thresholds, once: the diagnosis (diagnosis/symptoms.py) and the exported alerts
(runbooks/promrules.py) read the same numbers, so a fleet pages on the same condition in both."""

from __future__ import annotations

TTFT_SYMPTOM_RATIO = 3.0
"""TTFT p99 at 3× its baseline is red: the alert most vLLM on-call rotations page on."""
ITL_SYMPTOM_RATIO = 2.0
"""Inter-token latency at 2×: every token of every stream is twice as slow, which users see as a stutter."""
ERROR_SYMPTOM_SHARE = 0.05
"""5 % of requests failing is red unless an SLO says otherwise."""
