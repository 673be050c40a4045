"""The user-facing symptoms, computed before any runbook: TTFT and ITL p99 against the baseline and a configured
SLO, errors, throughput and availability. They say whether anything is wrong; the runbooks say why."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llm_oncall.runbooks.thresholds import ERROR_SYMPTOM_SHARE, ITL_SYMPTOM_RATIO, TTFT_SYMPTOM_RATIO

Value = float | bool | None


@dataclass(frozen=True)
class Slo:
    """Objectives the user may configure; any may be None (then only the baseline judges)."""

    ttft_p99_s: float | None = None
    itl_p99_s: float | None = None
    error_share: float | None = None


COMPARABLE_LOAD = 4.0
"""A latency baseline counts only if the fleet served at least a quarter of today's requests then."""
P99_MIN_REQUESTS = 100.0
"""Requests a window needs before its TTFT p99 is more than the largest of a handful of samples."""
P90_MIN_REQUESTS = 30.0
"""Requests a window needs before its TTFT p90 rests on at least three of them."""
THROUGHPUT_SYMPTOM_RATIO = 0.5
"""Successes at half their baseline while demand has not fallen."""


def mark(v: dict[str, Value], labels: dict[str, str], slo: Slo) -> None:
    """The user-facing symptoms, each True/False, or None when its data is missing."""

    def red(*parts: bool | None) -> bool | None:
        if any(p is True for p in parts):
            return True
        return None if all(p is None for p in parts) else False

    def at_least(name: str, limit: float | None) -> bool | None:
        x = v.get(name)
        return None if limit is None or not isinstance(x, float) else x >= limit

    def above(name: str, limit: float | None) -> bool | None:
        x = v.get(name)
        return None if limit is None or not isinstance(x, float) else x > limit

    v["ttft_slo"] = slo.ttft_p99_s
    v["itl_slo"] = slo.itl_p99_s
    v["symptom_ttft"] = red(at_least("ttft_symptom_ratio", TTFT_SYMPTOM_RATIO), above("ttft_p99", slo.ttft_p99_s))
    v["symptom_itl"] = red(at_least("itl_symptom_ratio", ITL_SYMPTOM_RATIO), above("itl_p99", slo.itl_p99_s))
    v["symptom_errors"] = at_least("error_share", slo.error_share if slo.error_share is not None
                                   else ERROR_SYMPTOM_SHARE)
    success, demand = v.get("success_ratio"), v.get("arrival_rate_ratio")
    if isinstance(success, float):
        v["symptom_throughput"] = success <= THROUGHPUT_SYMPTOM_RATIO and (
            not isinstance(demand, float) or demand >= 0.8)
    else:
        v["symptom_throughput"] = None
    # Availability: nothing serving, or pods down (still discovered, not answering) as many as half of those that
    # served before. A pod still starting never served; a pod scaled down leaves discovery: neither counts.
    total, up = v.get("pods_total") or 0.0, v.get("pods_up") or 0.0
    up_before = v.get("pods_up_baseline")
    lost = isinstance(up_before, float) and up_before > 0 and min(total - up, up_before - up) >= 0.5 * up_before
    v["symptom_availability"] = (up == 0 or lost) if isinstance(total, float) and total > 0 else None
    names = ("symptom_ttft", "symptom_itl", "symptom_errors", "symptom_throughput", "symptom_availability")
    v["symptom"] = red(*(x if isinstance(x := v[n], bool) else None for n in names))
    said = []
    if v["symptom_ttft"]:
        n = v.get("window_requests")
        which = ("p99" if isinstance(n, float) and n >= P99_MIN_REQUESTS
                 else "p90 and p99" if isinstance(n, float) and n >= P90_MIN_REQUESTS else "p50 and p99")
        said.append(f"TTFT {which} {_x(v.get('ttft_symptom_ratio'))}" + _slo_note(v.get("ttft_p99"), slo.ttft_p99_s))
    if v["symptom_itl"]:
        said.append(f"ITL p99 {_x(v.get('itl_symptom_ratio'))}" + _slo_note(v.get("itl_p99"), slo.itl_p99_s))
    if v["symptom_errors"]:
        said.append(f"errors {float(v.get('error_share') or 0.0):.0%}")
    if v["symptom_throughput"]:
        said.append(f"successes {_x(v.get('success_ratio'))}")
    if v["symptom_availability"]:
        before = f" of {up_before:.0f} before" if isinstance(up_before, float) else ""
        said.append(f"{up:.0f} pod(s) serving{before}")
    if said:
        labels["symptoms"] = ", ".join(said)


def _x(ratio: Value) -> str:
    return f"×{ratio:.1f} vs baseline" if isinstance(ratio, float) else "above its SLO"


def _slo_note(value: Value, slo: float | None) -> str:
    return f" ({value:.2f}s, SLO {slo:g}s)" if isinstance(value, float) and slo is not None and value > slo else ""


SYMPTOMS: tuple[tuple[str, str, str, str], ...] = (
    # (symptom flag, value feature, baseline feature, SLO feature)
    ("symptom_ttft", "ttft_p99", "ttft_p99_baseline", "ttft_slo"),
    ("symptom_itl", "itl_p99", "itl_p99_baseline", "itl_slo"),
    ("symptom_errors", "error_share", "", ""),
    ("symptom_throughput", "success_rate", "success_rate_baseline", ""),
    ("symptom_availability", "pods_up", "pods_total", ""),
)


def as_json(values: Mapping[str, Value]) -> list[dict[str, Any]]:
    """The user-facing symptoms (the diagnosis JSON's `symptoms`): every one, red or not, with its value and
    baseline."""
    out = []
    for flag, value, baseline, slo in SYMPTOMS:
        out.append({"signal": value, "value": json_number(values.get(value)),
                    "baseline": json_number(values.get(baseline)) if baseline else None,
                    "slo": json_number(values.get(slo)) if slo else None, "red": values.get(flag)})
    return out


def persisted(history: Sequence[Mapping[str, Value]], paging: bool = False) -> bool:
    """Red long enough to page as an unexplained symptom. To start a page: for longer than one window, since a burst
    shorter than a scrape interval lies inside every window that covers it (window / interval evaluations: 2 with
    the default window of two intervals), so the page starts at the evaluation after those. On a 4-pod fleet one slow
    prefill lifts a 30 s window's TTFT p99 ×3–4 while its p90 stays flat, for exactly two evaluations (docs/drills.md,
    the soak). ``paging``: the last diagnosis paged (the incident is real already), and 2 scrapes keep it paging as
    `unknown` when its runbook lets go. At least 3 when only availability is red: a pod that stops answering for a
    scrape or two is often leaving (a scale-down or rollout whose target has not left discovery yet)."""
    last = history[-1] if history else {}
    window, interval = last.get("window_s"), last.get("interval_s")
    spans = math.ceil(window / interval - 1e-9) if isinstance(window, float) and isinstance(interval, float) \
        and interval > 0 else 1
    n = 2 if paging else spans + 1
    only_availability = all(last.get(k) is not True for k in (
        "symptom_ttft", "symptom_itl", "symptom_errors", "symptom_throughput"))
    n = max(n, 3) if only_availability else n
    return len(history) >= n and all(v.get("symptom") is True for v in history[-n:])


def json_number(v: Any) -> Any:
    """A float for JSON: rounded, and None when it is not finite."""
    if isinstance(v, float):
        return None if not math.isfinite(v) else round(v, 4)
    return v
