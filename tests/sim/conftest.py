"""Helpers that read the simulator only through its rendered telemetry."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from llm_oncall.sim import Fleet, scenario


def parse(page: str) -> dict[str, float]:
    """Sum of every sample per sample name (labels folded), plus `name{k=v,...}` keys for labelled ones."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(page):
        for s in fam.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
            if s.labels:
                key = s.name + "{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}"
                out[key] = s.value
    return out


@dataclass
class Timeline:
    """Scrapes of every surface at a fixed interval."""

    fleet: Fleet
    times: list[float] = field(default_factory=list)
    pods: list[dict[str, dict[str, float] | None]] = field(default_factory=list)
    gateway: list[dict[str, float]] = field(default_factory=list)
    kube: list[dict[str, float]] = field(default_factory=list)
    dcgm: list[dict[str, dict[str, float]]] = field(default_factory=list)
    logs: dict[str, list[tuple[float, str]]] = field(default_factory=dict)

    def run(self, until: float, interval: float = 15.0) -> Timeline:
        f = self.fleet
        t = self.times[-1] if self.times else 0.0
        while t < until:
            t = min(until, t + interval)
            f.advance(t)
            self.times.append(t)
            snap: dict[str, dict[str, float] | None] = {}
            for name in f.targets():
                page = f.render_metrics(name)
                snap[name] = parse(page) if page is not None else None
                for line in f.new_log_lines(name):
                    self.logs.setdefault(name, []).append((t, line))
            self.pods.append(snap)
            self.gateway.append(parse(f.render_gateway()))
            self.kube.append(parse(f.render_kube_state()))
            self.dcgm.append({n: parse(f.render_dcgm(n)) for n in f.nodes()})
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

    def hit_rate(self, t0: float, t1: float) -> float:
        q = self.fleet_delta("vllm:prefix_cache_queries_total", t0, t1)
        return self.fleet_delta("vllm:prefix_cache_hits_total", t0, t1) / q if q else 0.0

    def gw_delta(self, prefix: str, t0: float, t1: float) -> float:
        a, b = self.gateway[self.index(t0)], self.gateway[self.index(t1)]
        return sum(v - a.get(k, 0.0) for k, v in b.items() if k.startswith(prefix))


def run_scenario(incident: str, seed: int = 1, until: float = 300.0, at: float = 150.0,
                 **overrides: object) -> Timeline:
    cfg, fault = scenario(incident, seed, at=at, **overrides)
    return Timeline(Fleet(cfg, seed=seed, fault=fault)).run(until)
