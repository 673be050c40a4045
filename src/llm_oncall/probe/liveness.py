"""Forward-progress liveness: "did the engine take a step recently, given that it has work?".

Pure decision logic, fed one scrape at a time (`observe(t, page)`, `page=None` for a failed
scrape) and asked for a verdict (`status(now)`).  No I/O, no clock of its own, so the rules
are tested with plain numbers:

- progress is the engine-step heartbeat (`vllm:iteration_tokens_total` histogram count),
  falling back to the generated-token counter on versions without it; escaped
  (`vllm_…`) spellings are read through the catalog;
- an idle engine (running = 0 and waiting = 0) is never stalled, and going idle restarts
  the stall clock: work that arrives later is owed a full stall period;
- a slow engine whose heartbeat moves at least once per stall period is never stalled;
- a counter that goes back, a new process start time or a switch of the progress metric is
  an engine restart: the stall clock re-baselines instead of alarming;
- a failed scrape is "unreachable", which fails the probe only after its own grace
  period (a saturated pod often answers /metrics slowly); a stall already proven before
  the target stopped answering stays a stall.

Flat time is measured between scrape times (last scrape at which the heartbeat was seen to
change → latest scrape), so a verdict never extrapolates beyond what was observed: with
scrapes every `interval`, a freeze turns into "stalled" within `stall + interval`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from llm_oncall.signals.catalog import BY_KEY
from llm_oncall.signals.exposition import Page
from llm_oncall.signals.series import Scrape, gauge, resolve
from llm_oncall.signals.snapshot import progress_value

_EPS = 1e-6  # slot times are sums of floats: 2.0 may come out as 1.9999999999

OK, IDLE, STALLED, UNREACHABLE, STARTING = "ok", "idle", "stalled", "unreachable", "starting"
STATUSES: tuple[str, ...] = (OK, IDLE, STALLED, UNREACHABLE, STARTING)
"""Every status `/livez` can report; only `stalled` and an expired `unreachable` fail it."""


@dataclass(frozen=True, slots=True)
class LivenessConfig:
    stall_s: float = 30.0
    """Seconds without an engine step, while requests are present, before the probe fails."""
    unreachable_grace_s: float = 120.0
    """Seconds of failed scrapes before the probe fails."""

    def __post_init__(self) -> None:
        if self.stall_s <= 0 or self.unreachable_grace_s < 0:
            raise ValueError("stall must be > 0 and the unreachable grace >= 0")


@dataclass(frozen=True, slots=True)
class Verdict:
    status: str
    healthy: bool
    """False → `/livez` answers 503."""
    reason: str
    running: float | None
    waiting: float | None
    seconds_since_progress: float | None
    stall_threshold_seconds: float
    last_scrape_age_seconds: float | None
    unreachable_seconds: float | None
    unreachable_grace_seconds: float
    progress_metric: str | None
    progress_value: float | None
    restarts_seen: int

    @property
    def http_status(self) -> int:
        return 200 if self.healthy else 503

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = round(value, 3)
        return out


def _progress_metric(page: Page) -> str | None:
    beat = resolve(page, BY_KEY["iteration_tokens"])
    if beat is not None and beat.samples["_count"]:
        return beat.spelling + "_count"
    gen = resolve(page, BY_KEY["generation_tokens"])
    return gen.spelling if gen is not None else None


class LivenessTracker:
    """The state of one target's liveness, updated scrape by scrape."""

    def __init__(self, cfg: LivenessConfig | None = None, start: float = 0.0) -> None:
        self.cfg = cfg or LivenessConfig()
        self.start = start
        self.last_scrape_t: float | None = None
        self.last_ok_t: float | None = None
        self.first_fail_t: float | None = None
        """Start of the current run of failed scrapes (None while scrapes succeed)."""
        self.last_error: str | None = None
        self.running: float | None = None
        self.waiting: float | None = None
        self.metric: str | None = None
        self.value: float | None = None
        self.process_start: float | None = None
        self.moved_t: float | None = None
        """Last scrape time at which progress was seen (or owed from: baseline, idle, restart)."""
        self.restarts = 0
        self.stalled_when_lost = False
        self.scrapes = 0
        self.failures = 0

    # ---- input ------------------------------------------------------------------------------------------
    def observe(self, t: float, page: Page | None, error: str | None = None) -> Verdict:
        """Record one scrape at time `t`; `page=None` (with an optional error text) means it failed."""
        self.scrapes += 1
        self.last_scrape_t = t
        if page is not None and not self._usable(page):
            page, error = None, "no vLLM engine metrics on the page"
        if page is None:
            self.failures += 1
            if self.first_fail_t is None:
                self.first_fail_t = t
                self.stalled_when_lost = self._stalled()
            self.last_error = error or "scrape failed"
            return self.status(t)
        self.first_fail_t = None
        self.stalled_when_lost = False
        self.last_error = None
        self.last_ok_t = t
        was_idle = self._idle()
        self.running = gauge(page, BY_KEY["running"])
        self.waiting = gauge(page, BY_KEY["waiting"])
        metric = _progress_metric(page)
        value = progress_value(Scrape(t, page))
        start = gauge(page, BY_KEY["process_start"])
        restarted = (
            (self.process_start is not None and start is not None and start != self.process_start)
            or (self.value is not None and value is not None and value < self.value)
            or (self.metric is not None and metric != self.metric)
        )
        if restarted:
            self.restarts += 1
        if self.moved_t is None or restarted or value != self.value or self._idle() or was_idle:
            # Work that arrived after the last idle scrape is owed a full stall period from now.
            self.moved_t = t
        self.metric, self.value, self.process_start = metric, value, start
        return self.status(t)

    @staticmethod
    def _usable(page: Page) -> bool:
        return any(resolve(page, BY_KEY[k]) is not None
                   for k in ("running", "waiting", "iteration_tokens", "generation_tokens"))

    # ---- verdict ----------------------------------------------------------------------------------------
    def _idle(self) -> bool:
        return (self.running or 0.0) <= 0.0 and (self.waiting or 0.0) <= 0.0

    def _flat_for(self) -> float | None:
        if self.moved_t is None or self.last_ok_t is None:
            return None
        return self.last_ok_t - self.moved_t

    def _stalled(self) -> bool:
        flat = self._flat_for()
        return (flat is not None and self.value is not None and not self._idle()
                and flat >= self.cfg.stall_s - _EPS)

    def status(self, now: float) -> Verdict:
        cfg = self.cfg
        flat = self._flat_for()
        age = None if self.last_scrape_t is None else max(0.0, now - self.last_scrape_t)
        lost_for: float | None = None

        def verdict(status: str, healthy: bool, reason: str) -> Verdict:
            return Verdict(status, healthy, reason, self.running, self.waiting, flat, cfg.stall_s, age,
                           lost_for, cfg.unreachable_grace_s, self.metric, self.value, self.restarts)

        if self.last_scrape_t is None:
            return verdict(STARTING, True, "no scrape yet")
        if self.first_fail_t is not None:
            since = self.first_fail_t if self.last_ok_t is not None else self.start
            lost_for = max(0.0, now - since)
            if self.stalled_when_lost:
                return verdict(STALLED, False, f"stalled, then /metrics stopped answering ({self.last_error})")
            if lost_for >= cfg.unreachable_grace_s:
                return verdict(UNREACHABLE, False,
                               f"/metrics has not answered for {lost_for:.0f}s ({self.last_error})")
            return verdict(UNREACHABLE, True, f"/metrics not answering ({self.last_error}); "
                           f"failing after {cfg.unreachable_grace_s:.0f}s")
        if self._idle():
            return verdict(IDLE, True, "no running or waiting requests")
        if self.value is None:
            return verdict(OK, True, "page has no progress counter; cannot judge a stall")
        if flat is not None and flat >= cfg.stall_s - _EPS:
            return verdict(STALLED, False, f"{self.metric} flat for {flat:.0f}s with "
                           f"{self.running or 0:.0f} running and {self.waiting or 0:.0f} waiting")
        return verdict(OK, True, "engine stepping" if flat == 0 else f"no step for {flat:.0f}s (< stall)")
