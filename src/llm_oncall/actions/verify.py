"""Did the fix help? Each incident's user-visible signal, before the action, after its verification window and at
the pre-incident baseline: helped (recovered, or most of the way back) / no effect / harmful (worse)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from llm_oncall.actions.model import Verification
from llm_oncall.diagnosis.features import Features
from llm_oncall.runbooks.expr import Expr, compile_expr
from llm_oncall.runbooks.loader import load_registry
from llm_oncall.runbooks.thresholds import RECOVERY_SYMPTOMS
from llm_oncall.signals.snapshot import Snapshot

Obs = Mapping[str, Any]
"""The signals at one scrape: the diagnosis features plus a few Snapshot values (`t` included)."""


def observe(f: Features, snap: Snapshot | None) -> dict[str, Any]:
    out: dict[str, Any] = dict(f.values)
    out["t"] = f.t
    if snap is not None:
        out["ttft_p50"] = snap.fleet.ttft_p50
    return out


@dataclass(frozen=True)
class RecoverySignal:
    """A runbook's recovery signal (its `recovery:` section): when is it back?"""

    name: str
    lower_is_better: bool
    doc: str
    back: Expr | None = None
    missing: float | None = None
    baseline_if_none: float | None = None

    def value(self, f: Obs) -> float | None:
        v = f.get(self.name)
        if v is None:
            return self.missing  # nothing to count is zero for a count (no crash-looping pod, no mismatch)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def recovered(self, v: float | None, baseline: float | None) -> bool:
        if v is None:
            return False
        if baseline is None:
            baseline = self.baseline_if_none
        if self.back is not None:
            return self.back.holds({"value": v, "baseline": baseline})
        if baseline is None:
            return False
        return v <= 2.0 * baseline if self.lower_is_better else v >= 0.75 * baseline


@cache
def _signals(incident: str) -> tuple[RecoverySignal, ...]:
    rb = load_registry().get(incident)
    if rb is None:
        return ()
    return tuple(RecoverySignal(r.signal, r.better == "lower", r.doc.get("en"),
                                compile_expr(r.back) if r.back else None, r.missing, r.baseline_if_none)
                 for r in rb.recovery)


def signals(incident: str) -> tuple[RecoverySignal, ...]:
    """The incident's recovery signals, from its runbook (none for an incident without a runbook)."""
    return _signals(incident)


def baseline(history: Sequence[Obs], sig: RecoverySignal, until: float) -> float | None:
    vals = [v for f in history if f["t"] < until and (v := sig.value(f)) is not None]
    return statistics.median(vals) if vals else None


@cache
def users(incident: str) -> tuple[str, ...]:
    """The user-facing symptoms the incident's recovery is judged on (its runbook's `recovery_users`)."""
    rb = load_registry().get(incident)
    return tuple(rb.recovery_users) if rb is not None else tuple(f.removeprefix("symptom_")
                                                                  for f, _, _ in RECOVERY_SYMPTOMS)


def slo_state(f: Obs, incident: str | None = None) -> dict[str, bool | None]:
    """Each user-facing recovery symptom (runbooks/thresholds.py RECOVERY_SYMPTOMS; those of the incident's runbook):
    True back (below its baseline-relative bound, or within the configured SLO), False still red, None no data."""
    out: dict[str, bool | None] = {}
    judged = users(incident) if incident is not None else None
    for flag, value, slo in RECOVERY_SYMPTOMS:
        if judged is not None and flag.removeprefix("symptom_") not in judged:
            continue
        red = f.get(flag)
        v, lim = f.get(value), f.get(slo) if slo else None
        if isinstance(v, float) and isinstance(lim, float) and v <= lim:
            out[flag] = True  # within the SLO the user configured, whatever the ratio to the baseline
        else:
            out[flag] = None if red is None else not red
    return out


def slo_back(f: Obs, incident: str | None = None) -> bool:
    """The user-facing symptoms back: none red, at least one measured."""
    states = slo_state(f, incident).values()
    return all(s is not False for s in states) and any(s is True for s in states)


def signal_back(incident: str, f: Obs, baselines: dict[str, float | None]) -> bool:
    """The incident's own recovery signals (its runbook's `recovery:` section) back."""
    sigs = signals(incident)
    return bool(sigs) and all(s.recovered(s.value(f), baselines.get(s.name)) for s in sigs)


def recovered(incident: str, f: Obs, baselines: dict[str, float | None]) -> bool:
    """Recovered at this scrape: the incident's own signals back *and* the user-facing symptoms (TTFT p99, ITL p99,
    errors) within their baseline-relative bounds or the SLO. One rule for mitigation, verification and drills."""
    return signal_back(incident, f, baselines) and slo_back(f, incident)


def judge(incident: str, before: Obs, after: Obs, baselines: dict[str, float | None],
          previous: Obs | None = None) -> Verification:
    """`previous` (the scrape before `after`): worse than before counts as harmful only while still worsening."""
    sigs = signals(incident)
    if not sigs:
        return Verification(verdict="unverified", signal="", detail=f"no recovery signal for {incident}")
    s = sigs[0]
    b, a, base = s.value(before), s.value(after), baselines.get(s.name)
    if recovered(incident, after, baselines):
        return Verification(verdict="helped", signal=s.name, before=b, after=a, baseline=base,
                            detail=f"recovered: {s.doc}; the user-facing symptoms back")
    if a is None or b is None:
        return Verification(verdict="no_effect", signal=s.name, before=b, after=a, baseline=base,
                            detail="the signal is unknown (no data) after the window")
    if signal_back(incident, after, baselines):
        red = ", ".join(k.removeprefix("symptom_") for k, v in slo_state(after, incident).items() if v is False)
        if not signal_back(incident, before, baselines):
            # Out before the action, back after it: the fix did its part. The users' p99 trails over its own
            # quantile window, and a signal half way back with the users red counts as helped below: all the way
            # back cannot count for less.
            return Verification(verdict="helped", signal=s.name, before=b, after=a, baseline=base,
                                detail=f"{s.doc}; the user-facing symptoms not yet back ({red or 'no data'})")
        # back before the action too (a queue of 0.08 after one of 0 is not "worse"): it changed nothing visible
        return Verification(verdict="no_effect", signal=s.name, before=b, after=a, baseline=base,
                            detail=f"{s.doc}, but the user-facing symptoms are not back ({red or 'no data'})")
    worse = a > b * 1.25 + 1e-9 if s.lower_is_better else a < b * 0.8 - 1e-9
    p = s.value(previous) if previous is not None else None
    if worse and p is not None:
        worse = a > p if s.lower_is_better else a < p
    if worse:
        return Verification(verdict="harmful", signal=s.name, before=b, after=a, baseline=base,
                            detail=f"{s.name} got worse: {b:.3g} → {a:.3g}")
    if base is not None and b != base and abs(a - base) <= 0.5 * abs(b - base):
        users = "" if slo_back(after, incident) else "; the user-facing symptoms not yet back"
        return Verification(verdict="helped", signal=s.name, before=b, after=a, baseline=base,
                            detail=f"{s.name} moved more than half way back to its baseline{users}")
    return Verification(verdict="no_effect", signal=s.name, before=b, after=a, baseline=base,
                        detail=f"{s.name} {b:.3g} → {a:.3g} (baseline {base if base is None else round(base, 3)})")


MISS_FACTOR = 2.0
"""The twin's prediction (respond/twin.py) misses when observed and predicted seconds from the action to recovery
differ by more than this factor ..."""
MISS_SLACK_S = 30.0
"""... and by more than this (two scrapes at 15 s: the grid on which both are measured)."""


def prediction_miss(predicted_s: float | None, observed_s: float | None, horizon_s: float,
                    waited_s: float) -> str | None:
    """Why a predicted time to recovery missed (None: it held). `observed_s` None: no recovery after `waited_s`."""
    if predicted_s is None:
        if observed_s is not None and observed_s < horizon_s:
            return (f"the twin predicted no recovery within {horizon_s:.0f} s; recovered {observed_s:.0f} s after "
                    "the action")
        return None
    if observed_s is None:
        if waited_s > MISS_FACTOR * predicted_s and waited_s - predicted_s > MISS_SLACK_S:
            return f"predicted recovery {predicted_s:.0f} s after the action; none after {waited_s:.0f} s"
        return None
    lo, hi = sorted((predicted_s, observed_s))
    if hi - lo > MISS_SLACK_S and hi > MISS_FACTOR * max(lo, 1.0):
        return (f"predicted recovery {predicted_s:.0f} s after the action, observed {observed_s:.0f} s (more than "
                f"×{MISS_FACTOR:g} and {MISS_SLACK_S:.0f} s apart)")
    return None
