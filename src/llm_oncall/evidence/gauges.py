"""A pasted snapshot of an engine's /metrics gauges (``vllm:num_requests_waiting{...} 6.0``): what the queue,
the running batch and the KV cache say together. Names come from the signals catalogue (every spelling across
vLLM and SGLang versions); labels are not needed and may be elided as users do (``{...}``).

Readings, on the sum over the pasted series (data-parallel engines, models), the KV usage at its maximum:
- KV pressure: requests wait while the cache is (nearly) full — the stats lines' rule (``stats.pressured``).
- admits nothing: requests wait while nothing runs and the KV cache is empty (``stats.admits_nothing``) — the
  scheduler takes no request although it has room: a stuck engine (or one request larger than the whole cache).
Anything else is no evidence either way: a snapshot of healthy gauges clears nothing.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from llm_oncall.evidence import stats
from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines
from llm_oncall.signals.catalog import SIGNALS

_KEYS = ("running", "waiting", "kv_usage")
_SAMPLE = re.compile(r"^\s{0,8}(?P<name>[A-Za-z_:][\w:]{0,120})(?:\{[^}\n]{0,2000}\})?\s{1,8}"
                     r"(?P<v>[-+]?\d{1,15}(?:\.\d{0,12})?(?:[eE][-+]?\d{1,3})?)\s*$")


@lru_cache(maxsize=1)
def _names() -> dict[str, str]:
    """Wire sample name → signal key, for the gauges read here."""
    return {n: s.key for s in SIGNALS if s.key in _KEYS for n in s.sample_names()}


def parse(text: str, name: str) -> Finding | None:
    if "num_requests_waiting" not in text and "num_queue_reqs" not in text:
        return None
    names = _names()
    got: dict[str, list[float]] = {}
    rows: list[int] = []
    for i, line in enumerate(split_lines(text)):
        m = _SAMPLE.match(line)
        key = names.get(m.group("name")) if m else None
        if m is None or key is None:
            continue
        v = float(m.group("v"))
        if math.isfinite(v):
            got.setdefault(key, []).append(v)
            rows.append(i)
    if "waiting" not in got or "running" not in got:
        return None
    st = {"waiting": sum(got["waiting"]), "running": sum(got["running"])}
    if "kv_usage" in got:
        st["kv_usage"] = max(got["kv_usage"])
    facts: dict[str, object] = compact({"gauges": {k: round(v, 4) for k, v in st.items()}, "samples": len(rows)})
    if stats.pressured(st):
        facts["reading"] = "requests wait while the KV cache is full (a snapshot of the engine's gauges)"
        return Finding(name, "gauges_kv_pressure", False, "kv-capacity", 0.4, facts, line_numbers(rows), "gauges",
                       severity="warning", category="kv-pressure")
    if stats.admits_nothing(st):
        facts["reading"] = ("requests wait while nothing runs and the KV cache is empty: the scheduler admits "
                            "nothing although it has room (a stuck engine, or one request larger than the cache)")
        return Finding(name, "gauges_not_admitting", False, "engine-hang", 0.4, facts, line_numbers(rows), "gauges",
                       severity="warning", category="hang")
    return None
