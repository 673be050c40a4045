"""Helpers that read the simulator only through its rendered telemetry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from llm_oncall.sim import Fleet, scenario


def parse(page: str) -> dict[str, float]:
    """Sum of every sample per sample name (labels folded), plus `name{k=v,...}` keys for labelled ones."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(page):
        for s in fam.samples:
            name = s.name
            if name.endswith("_total") and not any(c.islower() for c in name[:-6]):
                name = name[:-6]  # the parser appends `_total` to upper-case DCGM counter names
            out[name] = out.get(name, 0.0) + s.value
            if s.labels:
                key = name + "{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}"
                out[key] = s.value
    return out


class Lazy(list[dict[str, Any]]):
    """Pages are kept as text and parsed on first access: tests read a handful of the scrapes they take."""

    def __init__(self) -> None:
        super().__init__()
        self.raw: list[Any] = []

    def add(self, raw: Any) -> None:
        self.raw.append(raw)
        super().append({})

    def __getitem__(self, i: Any) -> Any:
        item = super().__getitem__(i)
        if not item:
            raw = self.raw[i]
            item.update(_parse_any(raw))
        return item


def _parse_any(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        return parse(raw)
    return {k: (parse(v) if isinstance(v, str) else v) for k, v in raw.items()}


@dataclass
class Timeline:
    """Scrapes of every surface at a fixed interval."""

    fleet: Fleet
    times: list[float] = field(default_factory=list)
    pods: Lazy = field(default_factory=Lazy)
    gateway: Lazy = field(default_factory=Lazy)
    kube: Lazy = field(default_factory=Lazy)
    dcgm: Lazy = field(default_factory=Lazy)
    logs: dict[str, list[tuple[float, str]]] = field(default_factory=dict)

    def run(self, until: float, interval: float = 15.0) -> Timeline:
        f = self.fleet
        t = self.times[-1] if self.times else 0.0
        while t < until:
            t = min(until, t + interval)
            f.advance(t)
            self.times.append(t)
            snap: dict[str, str | None] = {}
            for name in f.targets():
                snap[name] = f.render_metrics(name)
                for line in f.new_log_lines(name):
                    self.logs.setdefault(name, []).append((t, line))
            self.pods.add(snap)
            self.gateway.add(f.render_gateway())
            self.kube.add(f.render_kube_state())
            self.dcgm.add({n: f.render_dcgm(n) for n in f.nodes()})
        return self

    def index(self, t: float) -> int:
        return min(range(len(self.times)), key=lambda i: abs(self.times[i] - t))

    def fleet_delta(self, metric: str, t0: float, t1: float) -> float:
        """Increase of a counter summed over pods scraped at both ends (pods that restarted count from 0)."""
        a, b = self.pods[self.index(t0)], self.pods[self.index(t1)]
        total = 0.0
        for name, end in b.items():
            if end is None:
                continue
            start = a.get(name)
            v0 = start.get(metric, 0.0) if start else 0.0
            v1 = end.get(metric, 0.0)
            total += v1 - v0 if v1 >= v0 else v1
        return total

    def pod_delta(self, pod: str, metric: str, t0: float, t1: float) -> float:
        a, b = self.pods[self.index(t0)].get(pod), self.pods[self.index(t1)].get(pod)
        if a is None or b is None:
            return float("nan")
        return b.get(metric, 0.0) - a.get(metric, 0.0)

    def gauge_sum(self, metric: str, t: float) -> float:
        return sum((d or {}).get(metric, 0.0) for d in self.pods[self.index(t)].values())

    def gauge_max(self, metric: str, t: float) -> float:
        return max((d or {}).get(metric, 0.0) for d in self.pods[self.index(t)].values())

    def quantile(self, metric: str, q: float, t0: float, t1: float) -> float:
        """Fleet-wide histogram quantile (upper bucket bound) of the increase between two scrapes."""
        a, b = self.pods[self.index(t0)], self.pods[self.index(t1)]
        counts: dict[float, float] = {}
        for name, end in b.items():
            if end is None:
                continue
            start = a.get(name) or {}
            for k, v in end.items():
                if k.startswith(metric + "_bucket{"):
                    le = float(k.split("le=")[1].split(",")[0].rstrip("}"))
                    counts[le] = counts.get(le, 0.0) + v - start.get(k, 0.0)
        bounds = sorted(counts)
        total = counts[bounds[-1]]
        for le in bounds:
            if counts[le] >= q * total:
                return le
        return bounds[-1]

    def hit_rate(self, t0: float, t1: float) -> float:
        q = self.fleet_delta("vllm:prefix_cache_queries_total", t0, t1)
        return self.fleet_delta("vllm:prefix_cache_hits_total", t0, t1) / q if q else 0.0

    def gw_delta(self, metric: str, t0: float, t1: float) -> float:
        """Increase of a gateway counter summed over its label sets."""
        a, b = self.gateway[self.index(t0)], self.gateway[self.index(t1)]
        return b.get(metric, 0.0) - a.get(metric, 0.0)


def run_scenario(incident: str, seed: int = 1, until: float = 300.0, at: float = 150.0,
                 **overrides: object) -> Timeline:
    cfg, fault = scenario(incident, seed, at=at, **overrides)
    return Timeline(Fleet(cfg, seed=seed, fault=fault)).run(until)
