"""Prometheus as a telemetry source: range queries built from the catalog.

We fetch the raw series of every catalog spelling (colon and underscore-escaped forms) over
the window and rebuild per-target pages, so the windowed arithmetic is the very same code
as for direct scraping.  `promql()` renders the equivalent version-robust expression for
evidence and docs.
"""

from __future__ import annotations

import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from llm_oncall.signals.catalog import SIGNALS, Exporter, Kind, Signal, escape
from llm_oncall.signals.exposition import Page, Sample
from llm_oncall.signals.source import Batch, Observation, Target, valid_name

_SELECTOR_RE = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"([^"\\]|\\.)*"\s*,?\s*)*$')
TARGET_LABELS = ("pod", "instance")
_DROP = frozenset({"__name__"})


class PrometheusError(Exception):
    pass


def validate_selector(selector: str) -> str:
    """Accept only label matchers (`job="vllm",namespace=~"prod.*"`): it is spliced into PromQL."""
    inner = selector.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1]
    if not _SELECTOR_RE.match(inner):
        raise ValueError(f"invalid selector {selector!r}: expected label matchers like job=\"vllm\"")
    return inner.strip().rstrip(",")


def name_regex(signals: Iterable[Signal]) -> str:
    names: set[str] = set()
    for sig in signals:
        names |= sig.sample_names()
    return "|".join(sorted(re.escape(n) for n in names))


_PROMQL_AGG = {"sum": "sum", "max": "max", "mean": "avg"}


def promql(sig: Signal, selector: str = "", by: str = "pod", window: str = "5m") -> str:
    """The version-robust expression for one signal: every spelling, `or`-chained."""
    sel = validate_selector(selector) if selector else ""
    parts: list[str] = []
    for spelling in sig.spellings:
        for name in dict.fromkeys((spelling.name, escape(spelling.name))):
            matchers = ",".join(x for x in (sel, 'model_name!=""' if name.startswith("vllm") else "") if x)
            vec = f'{{__name__="{name}"{"," + matchers if matchers else ""}}}'
            if sig.kind is Kind.COUNTER:
                parts.append(f"sum by ({by}) (rate({vec}[{window}]))")
            elif sig.kind is Kind.HISTOGRAM:
                bucket = f'{{__name__="{name}_bucket"{"," + matchers if matchers else ""}}}'
                parts.append(f"histogram_quantile(0.99, sum by ({by}, le) (rate({bucket}[{window}])))")
            else:
                parts.append(f"{_PROMQL_AGG[sig.agg.value]} by ({by}) ({vec})")
    return "\n  or ".join(parts)


def _kind_of(name: str) -> str:
    for sig in SIGNALS:
        if name in sig.sample_names():
            return {Exporter.DCGM: "dcgm", Exporter.KUBE: "kube"}.get(sig.exporter, "vllm")
    return "vllm"


class PrometheusSource:
    """Reads the last `window_s` of raw catalog series from a Prometheus server."""

    def __init__(self, url: str, selector: str = "", window_s: float = 300.0, step_s: float = 15.0,
                 timeout_s: float = 30.0, clock: Callable[[], float] = time.time,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"Prometheus URL must start with http:// or https:// (got {url!r})")
        self.url = url.rstrip("/")
        self.selector = validate_selector(selector) if selector else ""
        self.window_s = window_s
        self.step_s = step_s
        self.clock = clock
        self.client = httpx.Client(timeout=timeout_s, transport=transport)

    def _get(self, path: str, params: dict[str, str]) -> Any:
        try:
            resp = self.client.get(self.url + path, params=params)
        except httpx.HTTPError as exc:
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {exc}") from exc
        try:
            body = resp.json()
        except ValueError as exc:
            raise PrometheusError(f"{self.url}{path}: HTTP {resp.status_code}, not JSON") from exc
        if body.get("status") != "success":
            raise PrometheusError(f"{self.url}{path}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self._get("/api/v1/query", params)
        result: list[dict[str, Any]] = data.get("result", [])
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        data = self._get("/api/v1/query_range", {
            "query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})
        result: list[dict[str, Any]] = data.get("result", [])
        return result

    def collect(self) -> Batch:
        end = math.floor(self.clock() / self.step_s) * self.step_s
        start = end - self.window_s
        sel = f",{self.selector}" if self.selector else ""
        series = self.query_range(f'{{__name__=~"{name_regex(SIGNALS)}"{sel}}}', start, end, self.step_s)
        up = self.query_range(f"up{{{self.selector}}}", start, end, self.step_s)
        return self._to_batch(series, up)

    def _to_batch(self, series: list[dict[str, Any]], up: list[dict[str, Any]]) -> Batch:
        pages: dict[tuple[str, str], dict[float, Page]] = defaultdict(dict)
        labels_of: dict[str, dict[str, str]] = {}
        problems: list[str] = []
        for s in series:
            metric = {str(k): str(v) for k, v in s.get("metric", {}).items()}
            name = metric.get("__name__", "")
            kind = _kind_of(name)
            tname = _target_name(metric, kind)
            if tname is None:
                continue
            if not valid_name(tname):
                problems.append(f"series {name}: target {tname!r} skipped (invalid name)")
                continue
            labels_of.setdefault(tname, _target_labels(metric))
            sample_labels = tuple(sorted((k, v) for k, v in metric.items() if k not in _DROP))
            for ts, value in s.get("values", []):
                page = pages[(tname, kind)].setdefault(float(ts), Page())
                try:
                    v = float(value)
                except ValueError:
                    page.errors += 1
                    continue
                page.samples.setdefault(name, []).append(Sample(name, sample_labels, v))
        down: dict[str, set[float]] = defaultdict(set)
        down_labels: dict[str, dict[str, str]] = {}
        for s in up:
            metric = {str(k): str(v) for k, v in s.get("metric", {}).items()}
            tname = _target_name(metric, "vllm")
            if tname is None or not valid_name(tname):
                continue
            down_labels.setdefault(tname, _target_labels(metric))
            for ts, value in s.get("values", []):
                if value == "0":
                    down[tname].add(float(ts))
        batch = Batch(problems=problems)
        # A target that was down for the whole window left no series, only `up == 0`: it is a
        # pod we cannot see (crash-looping, never Ready), not a pod that does not exist.  Count
        # it when it belongs to the selected targets or to a job whose other targets are vLLM.
        seen = {tname for tname, _ in pages}
        vllm_jobs = {labels_of.get(tname, {}).get("job") for tname, kind in pages if kind == "vllm"}
        for tname in sorted(set(down) - seen):
            labels = down_labels.get(tname, {})
            if self.selector or labels.get("job") in vllm_jobs:
                target = Target(tname, None, "vllm", labels)
                batch.observations.extend(Observation(target, ts, None, "up == 0 in Prometheus")
                                          for ts in sorted(down[tname]))
        for (tname, kind), by_t in pages.items():
            target = Target(tname, None, kind, labels_of.get(tname, {}))
            times = sorted(set(by_t) | down.get(tname, set()))
            for ts in times:
                if ts in down.get(tname, set()):
                    batch.observations.append(Observation(target, ts, None, "up == 0 in Prometheus"))
                else:
                    batch.observations.append(Observation(target, ts, by_t[ts]))
        return batch


def _target_name(metric: dict[str, str], kind: str) -> str | None:
    if kind == "kube":
        return "kube-state-metrics"
    if kind == "dcgm":
        host = metric.get("Hostname") or metric.get("hostname") or metric.get("node") or metric.get("instance")
        return _safe(host)
    for key in TARGET_LABELS:
        if metric.get(key):
            return _safe(metric[key])
    return None


def _safe(name: str | None) -> str | None:
    if name is None:
        return None
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._-") or None


def _target_labels(metric: dict[str, str]) -> dict[str, str]:
    keep = ("pod", "node", "namespace", "instance", "job", "revision", "group", "deployment")
    return {k: metric[k] for k in keep if k in metric}
