"""User-facing impact, estimated from the telemetry of the incident window (the method is part of the output).

- SLO minutes burned: the scrape intervals, from the first symptom to the resolution (or the end of the record), in
  which the SLO was violated — also after the actions' recovery signal came back, if users still saw it.  The SLO
  is the configured one where given (TTFT p99 seconds, error share) and otherwise llm-oncall's default objectives,
  the user-facing symptoms of diagnosis/symptoms.py: TTFT/ITL p99 at 3×/2× the pre-incident baseline, ≥ 5 % errors,
  successes at half the baseline with demand intact, or pods lost.
- Requests affected: requests that arrived (fleet arrival rate × interval) in violating intervals — an upper bound,
  since the record keeps quantiles, not every request's latency.
- Requests failed: Σ error share × arrival rate × interval over the window (5xx, engine errors, aborts).
- Retries among the requests: Σ retry share × arrival rate × interval (the same users' requests counted again;
  in a retry storm most failed requests are retries a rate limit turned away).
- Requests on the scope: when the diagnosis scoped pods, the requests they finished (Σ per-pod rate × interval)
  from the first symptom to the first executed action — the requests exposed to a wrong-answer incident (ECC, a bad
  revision) that the latency/error objectives cannot see; × the worst revision's quality-violation share, the
  estimated bad outputs.
- SLO back: the first scrape after the first executed action from which the SLO held for two scrapes in a row.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from llm_oncall.diagnosis.symptoms import Slo
from llm_oncall.postmortem.moments import Moments
from llm_oncall.postmortem.record import Record


@dataclass(frozen=True)
class Impact:
    known: bool
    window_start: float
    window_end: float
    slo_minutes_burned: float
    requests_total: int
    requests_affected: int
    requests_failed: int
    bad_intervals: int
    intervals: int
    ttft_p99_peak: float | None
    ttft_p99_baseline: float | None
    error_share_peak: float | None
    slo: Slo
    slo_configured: bool
    slo_back: float | None = None
    """The first scrape after the first action from which the SLO held for two scrapes; None: not in the record."""
    after_recovery_minutes: float = 0.0
    scope_pods: tuple[str, ...] = ()
    requests_on_scope: int | None = None
    quality_violations: int | None = None
    retries: int | None = None
    """SLO minutes burned after the recorded recovery signal came back."""

    def to_json(self) -> dict[str, object]:
        return {"known": self.known, "slo_minutes_burned": round(self.slo_minutes_burned, 2),
                "requests_total": self.requests_total, "requests_affected": self.requests_affected,
                "requests_failed": self.requests_failed, "bad_intervals": self.bad_intervals,
                "intervals": self.intervals, "ttft_p99_peak": self.ttft_p99_peak,
                "ttft_p99_baseline": self.ttft_p99_baseline, "error_share_peak": self.error_share_peak,
                "retries": self.retries, "requests_on_scope": self.requests_on_scope,
                "quality_violations": self.quality_violations,
                "slo_back": self.slo_back, "after_recovery_minutes": round(self.after_recovery_minutes, 2),
                "slo": {"ttft_p99_s": self.slo.ttft_p99_s, "error_share": self.slo.error_share,
                        "configured": self.slo_configured}}


def violated(v: Mapping[str, float], slo: Slo | None = None) -> bool:
    """The SLO violated at one scrape: a user-facing symptom red, or a configured objective exceeded."""
    slo = slo or Slo()
    if v.get("symptom", 0.0) >= 1.0:
        return True
    ttft, err = v.get("ttft_p99"), v.get("error_share")
    if slo.ttft_p99_s is not None and ttft is not None and ttft > slo.ttft_p99_s:
        return True
    return slo.error_share is not None and err is not None and err >= slo.error_share


def estimate(rec: Record, m: Moments, slo: Slo | None = None) -> Impact:
    cfg = slo is not None and (slo.ttft_p99_s is not None or slo.error_share is not None)
    slo = slo or Slo()
    last = max(rec.times(), default=rec.end)
    end = min(rec.resolved_at, last) if rec.resolved_at is not None else last
    start = m.start
    by_t: dict[float, dict[str, float]] = {}
    for s in rec.samples:
        if s.scope == "fleet":
            by_t.setdefault(s.t, {})[s.signal] = s.value
    times = sorted(by_t)
    bad = n = 0
    minutes = total = affected = failed = retried = 0.0
    saw_retries = False
    peak_ttft: float | None = None
    peak_err: float | None = None
    after = 0.0
    green: list[float] = []
    slo_back: float | None = None
    acted = m.first_action
    for prev, t in itertools.pairwise(times):
        if t < start - 1e-6 or t > end + 1e-6:
            continue
        v, dt = by_t[t], t - prev
        n += 1
        rate = v.get("arrival_rate") or v.get("finished_rate") or 0.0
        total += rate * dt
        failed += (v.get("error_share") or 0.0) * rate * dt
        if "retry_share" in v:
            saw_retries = True
            retried += v["retry_share"] * rate * dt
        if "ttft_p99" in v:
            peak_ttft = max(peak_ttft or 0.0, v["ttft_p99"])
        if "error_share" in v:
            peak_err = max(peak_err or 0.0, v["error_share"])
        if violated(v, slo):
            bad += 1
            minutes += dt / 60.0
            affected += rate * dt
            after += dt / 60.0 if m.recovery is not None and t > m.recovery + 1e-6 else 0.0
            green = []
        elif acted is not None and t > acted + 1e-6:
            green.append(t)
            if len(green) == 2 and slo_back is None:
                slo_back = green[0]
    pods = tuple(str(p) for p in (rec.decided().get("scope") or {}).get("pods") or [])
    on_scope = bad_out = None
    if pods:
        until = m.first_action if m.first_action is not None else end
        pod_rate: dict[float, float] = {}
        for smp in rec.samples:
            if smp.scope in pods and smp.signal == "requests_per_s":
                pod_rate[smp.t] = pod_rate.get(smp.t, 0.0) + smp.value
        served = quality = 0.0
        for prev, t in itertools.pairwise(times):
            if start - 1e-6 <= t <= until + 1e-6 and t in pod_rate:
                served += pod_rate[t] * (t - prev)
                quality += pod_rate[t] * (t - prev) * by_t[t].get("bad_rev_quality", 0.0)
        on_scope = round(served)
        bad_out = round(quality) if any("bad_rev_quality" in by_t[t] for t in times) else None
    base = [v["ttft_p99"] for t, v in by_t.items() if t < start and "ttft_p99" in v]
    baseline = sorted(base)[len(base) // 2] if base else None
    return Impact(known=n > 0, window_start=start, window_end=end, slo_minutes_burned=minutes,
                  requests_total=round(total), requests_affected=round(affected), requests_failed=round(failed),
                  bad_intervals=bad, intervals=n, ttft_p99_peak=peak_ttft, ttft_p99_baseline=baseline,
                  error_share_peak=peak_err, slo=slo, slo_configured=cfg, slo_back=slo_back,
                  after_recovery_minutes=after, scope_pods=pods, requests_on_scope=on_scope,
                  quality_violations=bad_out, retries=round(retried) if saw_retries else None)
