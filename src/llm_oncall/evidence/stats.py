"""Periodic engine stats lines: vLLM V0 ``metrics.py`` / V1 ``loggers.py`` and SGLang's prefill/decode
batch lines. KV pressure and stalls need several lines, so this is code; the thresholds are relative.

vLLM V1 (loggers.py): ``Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f
tokens/s, Running: %d reqs, Waiting: %d reqs, [Preemptions: %d, ]GPU KV cache usage: %.1f%%, Prefix cache
hit rate: %.1f%%`` (older V1: no engine prefix, "Prefix cache hit rate: GPU: %.2f%%"; aggregated:
"N Engines Aggregated: ..."). vLLM V0 (metrics.py): ``Avg prompt throughput: ..., Running: %d reqs, Swapped:
%d reqs, Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV cache usage: %.1f%%.``
SGLang (scheduler.py): ``Prefill batch. #new-seq: %d, #new-token: %d, #cached-token: %d, token usage: %.2f,
#running-req: %d, #queue-req: %d`` and ``Decode batch. #running-req: %d, #token: %d, token usage: %.2f,
[cuda graph: %s, ]gen throughput (token/s): %.2f, #queue-req: %d`` (newer: "Prefill batch, ..." with commas).

Readings, per engine (stream) over its latest lines:
- KV pressure: requests wait while the cache is (nearly) full — waiting > 0 and usage >= 0.9, or a queue at
  least as long as the running batch with usage >= 0.8 — or V1 reports preemptions in the interval. Physics,
  not a tuned scale: a full cache with a queue means admission is blocked on KV blocks.
- stalled: requests running but zero tokens generated (and no prefill) over STALL_LINES consecutive lines.
- not admitting: requests waiting, none running and the KV cache empty over STALL_LINES consecutive lines (an
  engine hung while idle: its scheduler has room and takes nothing).
- corrupted outputs: vLLM V1 with VLLM_COMPUTE_NANS_IN_LOGITS appends "Corrupted: %d reqs", the requests whose
  logits held NaNs in the interval; any above zero means outputs were computed from NaNs (bad output).
- otherwise healthy: a benign reading of the stats.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines

KV_FULL = 0.9
KV_HIGH = 0.8
IDLE_KV = 0.05
"""At most this share of the KV cache in use counts as an empty cache (a few blocks of prefix cache stay held)."""
STALL_LINES = 3
RECENT_LINES = 6

_VLLM_PAIR = re.compile(r"(?P<k>[A-Za-z][A-Za-z ]{0,40}?): (?P<v>\d{1,15}(?:\.\d{1,6})?)\s?(?P<u>tokens/s|reqs|%)?")
_SGL_PAIR = re.compile(r"(?P<k>#?[A-Za-z][A-Za-z /()\-]{0,40}?): (?P<v>\d{1,15}(?:\.\d{1,6})?)")
_ENGINE_ID = re.compile(r"Engine (?P<id>\d{1,4}):|(?P<agg>\d{1,4}) Engines Aggregated:")
_SGL_RANK = re.compile(r"\b(?P<rank>(?:DP\d{1,4} )?(?:PP\d{1,4} )?TP\d{1,4}(?: EP\d{1,4})?)\]")
_SGL_GPU = re.compile(r"\[gpu=(?P<gpu>\d{1,4})\]")

_VLLM_KEYS = {
    "avg prompt throughput": "prompt_tps",
    "avg generation throughput": "gen_tps",
    "running": "running",
    "waiting": "waiting",
    "pending": "waiting",
    "swapped": "swapped",
    "preemptions": "preemptions",
    "gpu kv cache usage": "kv_usage",
    "kv cache usage": "kv_usage",
    "cpu kv cache usage": "cpu_kv_usage",
    "prefix cache hit rate": "prefix_hit_rate",
    "gpu": "prefix_hit_rate",
    "corrupted": "corrupted",
}
_SGL_KEYS = {
    "#running-req": "running",
    "#queue-req": "waiting",
    "token usage": "kv_usage",
    "full token usage": "kv_usage",
    "gen throughput (token/s)": "gen_tps",
    "input throughput (token/s)": "prompt_tps",
    "#new-token": "new_tokens",
    "#retracted-req": "retracted",
}


@dataclass
class _Stream:
    engine: str
    rows: list[tuple[int, dict[str, float]]] = field(default_factory=list)


def _vllm(line: str) -> dict[str, float]:
    return dict(_vllm_cached(line))


def _sglang(line: str) -> dict[str, float]:
    return dict(_sglang_cached(line))


@lru_cache(maxsize=16384)
def _vllm_cached(line: str) -> tuple[tuple[str, float], ...]:
    """Cached: the diagnosis re-reads a sliding log tail every scrape, the same lines again and again."""
    out: dict[str, float] = {}
    body = line[line.find("Avg prompt throughput"):]
    for m in _VLLM_PAIR.finditer(body):
        key = _VLLM_KEYS.get(m.group("k").strip().lower())
        if key is None or key in out:
            continue
        val = float(m.group("v"))
        out[key] = val / 100.0 if m.group("u") == "%" else val
    return tuple(out.items())


@lru_cache(maxsize=16384)
def _sglang_cached(line: str) -> tuple[tuple[str, float], ...]:
    out: dict[str, float] = {}
    for m in _SGL_PAIR.finditer(line):
        key = _SGL_KEYS.get(m.group("k").strip().lower())
        if key is None or key in out:
            continue
        out[key] = float(m.group("v"))
    if "Prefill batch" in line:
        out.setdefault("gen_tps", -1.0)  # a prefill line says nothing about decode throughput
        out["prefill"] = 1.0
    return tuple(out.items())


def _rejoined(lines: tuple[str, ...], i: int, read: Callable[[str], dict[str, float]]) -> dict[str, float]:
    """A stats line cut before its KV field (a terminal or a quote wrapped it, mid-word: "GPU KV cache u" /
    "sage: 98.7%") read together with the line after it; the line as it is when that adds nothing."""
    st = read(lines[i])
    if "kv_usage" in st or i + 1 >= len(lines):
        return st
    nxt = lines[i + 1].strip()
    if not nxt or "Avg prompt throughput" in nxt or "#running-req" in nxt:
        return st
    for sep in ("", " "):
        joined = read(lines[i].rstrip() + sep + nxt)
        if "kv_usage" in joined:
            return joined
    return st


def _streams(lines: tuple[str, ...]) -> tuple[dict[str, _Stream], str]:
    streams: dict[str, _Stream] = {}
    engine_kind = ""
    for i, line in enumerate(lines):
        if "Avg prompt throughput" in line:
            st = _rejoined(lines, i, _vllm)
            e = _ENGINE_ID.search(line)
            key = f"engine {e.group('id')}" if e and e.group("id") else "aggregated" if e else "engine"
            engine_kind = engine_kind or "vllm"
        elif "#running-req" in line and ("Decode batch" in line or "Prefill batch" in line):
            st = _rejoined(lines, i, _sglang)
            r = _SGL_RANK.search(line) or _SGL_GPU.search(line)
            key = r.group(1) if r else "TP0"
            engine_kind = engine_kind or "sglang"
        else:
            continue
        if "running" not in st:
            continue
        streams.setdefault(key, _Stream(key)).rows.append((i, st))
    return streams, engine_kind


def pressured(st: dict[str, float]) -> bool:
    waiting, running, kv = st.get("waiting", 0.0), st.get("running", 0.0), st.get("kv_usage")
    if st.get("preemptions", 0.0) > 0:
        return True  # V1 prints "Preemptions: N" only when requests were preempted in the interval: KV ran out
    if kv is None or waiting <= 0:
        return False
    return kv >= KV_FULL or (waiting >= max(running, 1.0) and kv >= KV_HIGH)


def admits_nothing(st: dict[str, float]) -> bool:
    """Requests wait, none runs, and the KV cache is (nearly) empty: the scheduler has room and takes nothing."""
    kv = st.get("kv_usage")
    return st.get("waiting", 0.0) > 0 and st.get("running", -1.0) == 0 and kv is not None and kv <= IDLE_KV


def stalled(st: dict[str, float]) -> bool:
    return (st.get("running", 0.0) > 0 and st.get("gen_tps", 1.0) == 0.0 and st.get("prompt_tps", 0.0) == 0.0
            and "prefill" not in st)


# An engine that makes no progress, read over STALL_LINES consecutive lines: (held on every line, kind, reading).
_STALLS: tuple[tuple[Callable[[dict[str, float]], bool], str, str], ...] = (
    (admits_nothing, "not_admitting", "requests wait while nothing runs and the KV cache is empty in consecutive "
                                      "stats lines: the scheduler admits nothing although it has room"),
    (stalled, "stalled", "requests running but zero tokens generated in consecutive stats lines"),
)


def parse(text: str, name: str) -> Finding | None:
    if "Avg prompt throughput" not in text and "#running-req" not in text:
        return None
    streams, engine = _streams(split_lines(text))
    if not streams:
        return None
    rows = [r for s in streams.values() for r in s.rows]
    facts: dict[str, object] = compact({
        "engine": engine,
        "stats_lines": len(rows),
        "streams": len(streams) if len(streams) > 1 else None,
        "last_stats": {k: round(v, 4) for k, v in rows[-1][1].items() if v >= 0},
        "max_waiting": max(st.get("waiting", 0.0) for _, st in rows),
        "max_kv_usage": round(max(st.get("kv_usage", 0.0) for _, st in rows), 4),
        "preemptions": max((st.get("preemptions", 0.0) for _, st in rows), default=0.0) or None,
    })
    corrupted = [i for i, st in rows if st.get("corrupted", 0.0) > 0]
    if corrupted:
        facts["corrupted_reqs"] = max(st.get("corrupted", 0.0) for _, st in rows)
        facts["reading"] = ("vLLM counted requests whose logits held NaNs (\"Corrupted: N reqs\"): their outputs "
                            "were sampled from NaNs")
        return Finding(name, "vllm_stats_corrupted", False, "bad-model-rollout", 0.6, facts,
                       line_numbers(corrupted[:5]), "stats", severity="error", category="bad-output")
    for s in streams.values():
        tail = s.rows[-STALL_LINES:]
        for held, what, reading in _STALLS:
            if len(tail) == STALL_LINES and all(held(st) for _, st in tail):
                facts["reading"] = reading
                facts["stream"] = s.engine
                return Finding(name, f"{'vllm' if engine == 'vllm' else 'engine'}_stats_{what}", False,
                               "engine-hang", 0.45, facts, line_numbers(i for i, _ in tail), "stats",
                               severity="error", category="hang")
    best: tuple[float, _Stream, list[int]] | None = None
    for s in streams.values():
        recent = s.rows[-RECENT_LINES:]
        hot = [i for i, st in recent if pressured(st)]
        share = len(hot) / len(recent)
        # A full cache with a queue in most recent lines of a stream, or in the one or two lines there are.
        if hot and (share >= 0.5 or len(hot) >= 2):
            score = share + 0.05 * len(hot)
            if best is None or score > best[0]:
                best = (score, s, hot)
    if best is None:
        # The queue is not in the lines (an excerpt cut before "#queue-req"): a cache that stays full over
        # consecutive lines is still KV pressure, said with less confidence. Unknown is not zero. A stream of
        # only two lines (a short excerpt) counts when both are full, with less confidence still.
        for s in streams.values():
            tail = s.rows[-STALL_LINES:]
            short = len(tail) == len(s.rows) == STALL_LINES - 1
            if (len(tail) == STALL_LINES or short) and all("waiting" not in st and st.get("kv_usage", 0.0) >= KV_FULL
                                                           for _, st in tail):
                facts["reading"] = (f"the KV cache stays >= {KV_FULL:.0%} full over {len(tail)} stats lines "
                                    "(the queue length is not in these lines)")
                facts["stream"] = s.engine
                kind = "vllm_stats_kv_pressure" if engine == "vllm" else "sglang_stats_kv_pressure"
                return Finding(name, kind, False, "kv-capacity", 0.35 if short else 0.4, facts,
                               line_numbers(i for i, _ in tail),
                               "stats", severity="warning", category="kv-pressure")
    if best is not None:
        _, s, hot = best
        conf = min(0.75, 0.45 + 0.05 * len(hot) + (0.1 if len(hot) == len(s.rows[-RECENT_LINES:]) else 0.0))
        facts["reading"] = (f"requests wait while the KV cache is full (usage >= {KV_FULL:.0%} with a queue) in "
                            f"{len(hot)} of the last {len(s.rows[-RECENT_LINES:])} stats lines")
        facts["stream"] = s.engine
        kind = "vllm_stats_kv_pressure" if engine == "vllm" else "sglang_stats_kv_pressure"
        return Finding(name, kind, False, "kv-capacity", conf, facts, line_numbers(hot), "stats",
                       severity="error", category="kv-pressure")
    kind = "vllm_stats" if engine == "vllm" else "sglang_stats"
    facts["reading"] = "stats lines without KV pressure or a stall"
    return Finding(name, kind, True, None, 0.6, facts, (), "stats", severity="info", category="benign")
