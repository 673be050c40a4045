"""Holds what sources delivered and turns it into Snapshots at any point in time."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from llm_oncall.signals.catalog import BY_KEY
from llm_oncall.signals.events import Event
from llm_oncall.signals.exposition import Labels, Page, family_of
from llm_oncall.signals.gpu import GpuSnapshot, gpu_snapshots
from llm_oncall.signals.series import Scrape, TargetSeries, vector
from llm_oncall.signals.snapshot import PodSnapshot, Snapshot, fleet_snapshot, pod_snapshot
from llm_oncall.signals.source import Batch, Observation, Target


@dataclass
class Store:
    interval_s: float = 15.0
    capacity: int = 240
    log_lines_kept: int = 2000
    """Lines kept per log file (the tail; the diagnosis classifies its own tail as lines arrive)."""
    series: dict[str, TargetSeries] = field(default_factory=dict)
    targets: dict[str, Target] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    logs: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def add(self, batch: Batch) -> None:
        for obs in sorted(batch.observations, key=lambda o: o.t):
            self.observe(obs)
        if batch.events:
            events = self.events
            start = max(1, len(events))
            events.extend(batch.events)
            # Events nearly always arrive in time order; sort (stable, so the same order) only when they do not.
            if any(events[i - 1].t > events[i].t for i in range(start, len(events))):
                events.sort(key=lambda e: e.t)
        for name, lines in batch.logs.items():
            kept = self.logs.setdefault(name, [])
            kept.extend(lines)
            if len(kept) > self.log_lines_kept:
                del kept[:len(kept) - self.log_lines_kept]
        self.problems.extend(batch.problems)

    def observe(self, obs: Observation) -> None:
        target = obs.target
        series = self.series.get(target.name)
        if series is None:
            series = TargetSeries(target.name, {**target.labels, "kind": target.kind}, self.capacity)
            self.series[target.name] = series
            self.targets[target.name] = target
        series.add(Scrape(obs.t, obs.page, obs.error))

    def prune(self, before: float, events_before: float | None = None) -> list[str]:
        """Forget targets with no scrape since `before` and their logs (bounded memory for long live runs).

        With `events_before`, also forget events older than that, except each known target's latest restart
        (whether a pod that is down now has ever restarted does not depend on when).  Returns the targets
        forgotten.
        """
        gone = [n for n, s in self.series.items() if not s.scrapes or s.scrapes[-1].t < before]
        for name in gone:
            del self.series[name]
            del self.targets[name]
        if gone:
            names = set(gone)
            for log in [log for log in self.logs if log.split("/", 1)[0] in names]:
                del self.logs[log]
        if events_before is not None:
            self.prune_events(events_before)
        return gone

    def prune_events(self, before: float) -> int:
        """Forget events older than `before`, except the latest restart of each target still known."""
        events = self.events
        if not events or events[0].t >= before:
            return 0
        latest_restart: dict[str, int] = {}
        for i, e in enumerate(events):
            if e.kind == "restart":
                pod = restarted_pod(e)
                if pod in self.series:
                    latest_restart[pod] = i
        keep_old = set(latest_restart.values())
        kept = [e for i, e in enumerate(events) if e.t >= before or i in keep_old]
        dropped = len(events) - len(kept)
        self.events = kept
        return dropped

    def times(self) -> list[float]:
        """Distinct scrape times of vLLM targets, ascending (the replay clock)."""
        ts: set[float] = set()
        for name, s in self.series.items():
            if self.targets[name].kind == "vllm":
                ts.update(x.t for x in s.scrapes)
        return sorted(ts)

    def latest_time(self) -> float | None:
        ts = [s.scrapes[-1].t for s in self.series.values() if s.scrapes]
        return max(ts) if ts else None

    def snapshot(self, at: float | None = None, window_s: float | None = None) -> Snapshot:
        end = self.latest_time() if at is None else at
        if end is None:
            raise ValueError("no observations yet")
        window = window_s if window_s is not None else 4 * self.interval_s
        stale_after = max(2.5 * self.interval_s, 1e-9)
        pods: list[PodSnapshot] = []
        gpus: list[GpuSnapshot] = []
        extra: dict[str, dict[Labels, float]] = {}
        derived: list[Event] = []
        forget_before = end - FORGET_AFTER_INTERVALS * self.interval_s
        for name in sorted(self.series):
            series = self.series[name]
            last = series.latest(end)
            if last is None or last.t < forget_before:
                # Not (or no longer) in service discovery: a scaled-down or replaced pod is gone, not down.
                # A target that is down still yields failed scrapes and stays in the snapshot.
                continue
            kind = self.targets[name].kind
            if kind == "vllm":
                pods.append(pod_snapshot(series, end, window, stale_after))
            elif kind == "dcgm":
                gpus.extend(gpu_snapshots(series, end, window))
            elif kind == "kube":
                derived.extend(kube_events(series.scrapes, end))
            else:
                for family, values in counter_rates(series, end, window).items():
                    extra.setdefault(family, {}).update(values)
        events = tuple(sorted((e for e in [*self.events, *derived] if e.t <= end), key=lambda e: e.t))
        return Snapshot(
            t=end,
            window_s=window,
            pods=tuple(pods),
            fleet=fleet_snapshot(pods),
            gpus=tuple(gpus),
            events=events,
            extra=extra,
        )


def restarted_pod(e: Event) -> str:
    """The pod a restart event names (events from the cluster say `pod`, derived ones `object`)."""
    return str(e.attrs.get("pod") or e.attrs.get("object") or "")


FORGET_AFTER_INTERVALS = 4.0
"""A target with no scrape at all (not even a failed one) for this many intervals has left discovery."""


def counter_rates(series: TargetSeries, end: float, window_s: float) -> dict[str, dict[Labels, float]]:
    """Per-second increases of every counter family (by label set) on a small custom page.

    Gauges are reported as their latest value.  Used for gateway and prober pages, whose
    families are not in the catalog.
    """
    scrapes = series.ok_in_window(end - window_s, end)
    if not scrapes:
        return {}
    last = scrapes[-1].page
    assert last is not None
    out: dict[str, dict[Labels, float]] = {}
    span = scrapes[-1].t - scrapes[0].t
    for name, samples in last.samples.items():
        family = family_of(name)
        kind = last.types.get(family) or last.types.get(name) or ("counter" if name.endswith("_total") else "gauge")
        if name.endswith("_created") or kind in ("histogram", "summary"):
            continue
        values: dict[Labels, float] = {}
        if kind == "counter":
            if span <= 0:
                continue
            first = scrapes[0].page
            assert first is not None
            before = {s.labels: s.value for s in first.get(name)}
            for s in samples:
                prev = before.get(s.labels, 0.0)
                inc = s.value - prev if s.value >= prev else s.value
                values[s.labels] = inc / span
        else:
            for s in samples:
                if not math.isnan(s.value):
                    values[s.labels] = s.value
        out[name] = values
    return out


def kube_events(scrapes: Iterable[Scrape], end: float) -> list[Event]:
    """Changes in kube-state-metrics series, as events (what a live diagnosis can name)."""
    events: list[Event] = []
    prev: Page | None = None
    for s in scrapes:
        if s.t > end or s.page is None:
            continue
        if prev is not None:
            events.extend(_diff_kube(prev, s.page, s.t))
        prev = s.page
    return events


_KUBE_CHANGES: tuple[tuple[str, str, str, str], ...] = (
    ("configmap_version", "configmap", "config_change",
     "ConfigMap {name} changed (resource version {a:.0f} → {b:.0f})"),
    ("deployment_generation", "deployment", "rollout", "Deployment {name} spec changed (generation {a:.0f} → {b:.0f})"),
    ("container_restarts", "pod", "restart", "pod {name} restarted (restart count {a:.0f} → {b:.0f})"),
)


def _diff_kube(a: Page, b: Page, t: float) -> list[Event]:
    out: list[Event] = []
    for key, label, kind, text in _KUBE_CHANGES:
        before = _by_label(vector(a, BY_KEY[key]), label)
        after = _by_label(vector(b, BY_KEY[key]), label)
        for name, value in after.items():
            old = before.get(name)
            if old is not None and value != old:
                out.append(Event(t, kind, text.format(name=name, a=old, b=value),
                                 {"object": name, "source": BY_KEY[key].spellings[0].name}))
    return out


def _by_label(vec: Mapping[Labels, float] | None, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for labels, value in (vec or {}).items():
        name = dict(labels).get(label)
        if name is not None:
            out[name] = out.get(name, 0.0) + value
    return out
