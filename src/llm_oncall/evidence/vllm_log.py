"""vLLM server logs: CUDA-graph capture failures and their look-alikes, preemption warnings, periodic stats
lines, engine-dead errors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines

_CAPTURE_PROGRESS = re.compile(r"Capturing (?:CUDA graph|cudagraphs)", re.I)
_CAPTURE_DONE = re.compile(r"Graph capturing finished|100%\|")
_CAPTURE_FRAME = re.compile(r"capture_model|capture_begin|capture_end|torch/cuda/graphs\.py|cuda_graph|cudagraph", re.I)
_CAPTURE_ERR = re.compile(
    r"cudaErrorStreamCapture\w{0,30}|operation not permitted when stream is capturing|"
    r"operation failed due to a previous error during capture|capture cuda graph failed|"
    r"CUDA graph capture failed|Error while capturing|CUDA error: [^\n]{1,80}|CUDA out of memory|"
    r"OutOfMemoryError",
    re.I,
)
_PEER_CLOSED = re.compile(r"Connection closed by peer|connection closed|Connection reset by peer|ECONNRESET", re.I)
_INVALID_ARG = re.compile(r"invalid argument", re.I)
_CUSTOM_AR = re.compile(r"custom_all_reduce|custom_ar\b|CustomAllreduce", re.I)
_PREEMPT = re.compile(
    r"Sequence group (?P<seq>\S{1,80}) is preempted by PreemptionMode\.(?P<mode>[A-Z]{1,20}) mode "
    r"because there is not enough KV cache space"
)
_CUMULATIVE = re.compile(r"total_num_cumulative_preemption=(?P<n>\d{1,12})")
_ENGINE_DEAD = re.compile(
    r"EngineDeadError|AsyncEngineDeadError|EngineCore encountered a fatal error|"
    r"EngineCore encountered an issue|"
    r"Engine core proc \S{1,40} died unexpectedly|Engine loop has died"
)
_STATS_PAIR = re.compile(r"(?P<k>[A-Za-z][A-Za-z ]{0,40}): (?P<v>\d{1,15}(?:\.\d{1,6})?)\s?(?P<u>tokens/s|reqs|%)?")
_ENGINE_ID = re.compile(r"Engine (?P<id>\d{1,4}):")

# Lines after a capture frame in which an error still belongs to that capture's traceback.
_TRACEBACK_WINDOW = 80
STALL_LINES = 3


@dataclass
class _Scan:
    capture_lines: list[int] = field(default_factory=list)
    capture_done_at: int | None = None
    capture_frame_at: list[int] = field(default_factory=list)
    capture_errors: list[tuple[int, str]] = field(default_factory=list)
    peer_closed: list[int] = field(default_factory=list)
    custom_ar: list[int] = field(default_factory=list)
    invalid_arg: list[tuple[int, bool]] = field(default_factory=list)  # (line, after capture completed)
    preempt: list[int] = field(default_factory=list)
    preempt_modes: set[str] = field(default_factory=set)
    cumulative_preemptions: int = 0
    engine_dead: list[int] = field(default_factory=list)
    stats: list[tuple[int, dict[str, float]]] = field(default_factory=list)

    def in_capture(self, i: int) -> bool:
        started = bool(self.capture_lines) and self.capture_lines[0] <= i
        live = started and (self.capture_done_at is None or self.capture_done_at > i)
        recent_frame = any(0 <= i - f <= _TRACEBACK_WINDOW for f in self.capture_frame_at[-8:])
        return live or recent_frame


def _stats(line: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for m in _STATS_PAIR.finditer(line):
        key = m.group("k").strip().lower().replace(" ", "_")
        key = {"pending": "waiting"}.get(key, key)
        val = float(m.group("v"))
        out[key] = val / 100.0 if m.group("u") == "%" else val
    e = _ENGINE_ID.search(line)
    if e:
        out["engine"] = float(e.group("id"))
    return out


def _scan(lines: tuple[str, ...]) -> _Scan:
    s = _Scan()
    for i, line in enumerate(lines):
        if _CAPTURE_PROGRESS.search(line):
            s.capture_lines.append(i)
            # A multi-phase capture (PIECEWISE, then FULL) restarts the bar: only the latest phase counts.
            s.capture_done_at = i if _CAPTURE_DONE.search(line) else None
            continue
        if "Graph capturing finished" in line:
            s.capture_done_at = i
            continue
        if "Avg prompt throughput" in line:
            st = _stats(line)
            if st:
                s.stats.append((i, st))
            continue
        if "preempted by PreemptionMode" in line:
            m = _PREEMPT.search(line)
            if m:
                s.preempt.append(i)
                s.preempt_modes.add(m.group("mode"))
                c = _CUMULATIVE.search(line)
                if c:
                    s.cumulative_preemptions = max(s.cumulative_preemptions, int(c.group("n")))
            continue
        if _CAPTURE_FRAME.search(line):
            s.capture_frame_at.append(i)
        if _CUSTOM_AR.search(line):
            s.custom_ar.append(i)
        if _INVALID_ARG.search(line):
            s.invalid_arg.append((i, s.capture_done_at is not None and s.capture_done_at < i))
        if _PEER_CLOSED.search(line):
            s.peer_closed.append(i)
        e = _CAPTURE_ERR.search(line)
        if e and s.in_capture(i):
            s.capture_errors.append((i, e.group(0)[:120]))
        if _ENGINE_DEAD.search(line):
            s.engine_dead.append(i)
    return s


def _near(i: int, others: list[int], window: int = 40) -> bool:
    return any(abs(i - o) <= window for o in others)


def parse(text: str, name: str) -> Finding | None:
    lines = split_lines(text)
    s = _scan(lines)
    common = compact(
        {
            "capture_started": bool(s.capture_lines) or None,
            "capture_completed": s.capture_done_at is not None if s.capture_lines else None,
        }
    )

    def finding(kind: str, hint: str | None, conf: float, facts: dict[str, object], ev: list[int]) -> Finding:
        return Finding(name, kind, False, hint, conf, {**common, **facts}, line_numbers(ev), "vllm_log")

    car = [(i, after) for i, after in s.invalid_arg if i in s.custom_ar or _near(i, s.custom_ar)]
    if car:
        after = any(a for _, a in car)
        return finding(
            "custom_allreduce_error",
            None,
            0.8 if after else 0.7,
            {
                "after_capture": after,
                "fix": "--disable-custom-all-reduce",
                "not_fix": "--enforce-eager",
                "reading": "vLLM's custom all-reduce kernel failed (P2P/IPC buffer registration), "
                "not CUDA-graph capture",
            },
            [i for i, _ in car],
        )
    capture_peer = [i for i in s.peer_closed if s.in_capture(i) or _near(i, [e for e, _ in s.capture_errors])]
    if capture_peer or (s.peer_closed and not s.capture_errors and s.engine_dead):
        ev = capture_peer or s.peer_closed
        return finding(
            "peer_process_died",
            None,
            0.7,
            {
                "during_capture": bool(capture_peer),
                "reading": "a peer worker's connection closed: the peer died first (OOM, crash on another "
                "rank); "
                "this is not a CUDA-graph bug",
                "next_step": "read the first error in the other ranks' logs; restart the whole group",
            },
            ev + [e for e, _ in s.capture_errors][:5],
        )
    if s.capture_errors:
        errors = sorted({msg for _, msg in s.capture_errors})
        oom = any("out of memory" in e.lower() or "OutOfMemory" in e for e in errors)
        return finding(
            "cuda_graph_capture_error",
            "cuda-graph-crash",
            0.85,
            compact(
                {
                    "errors": errors[:6],
                    "out_of_memory": oom or None,
                    "fix": "--enforce-eager (about 30% slower) or roll back the vLLM version",
                    "also_try": "lower --gpu-memory-utilization or --max-num-seqs" if oom else None,
                }
            ),
            [i for i, _ in s.capture_errors] + s.capture_lines[-1:],
        )
    if s.engine_dead:
        return finding(
            "engine_dead",
            "engine-hang",
            0.45,
            {"reading": "the engine core process died; the first error above it is the root cause"},
            s.engine_dead,
        )
    if s.preempt:
        n = len(s.preempt)
        return finding(
            "kv_cache_preemption",
            "kv-capacity",
            min(0.75, 0.4 + 0.035 * n),
            compact(
                {
                    "preemptions_logged": n,
                    "modes": sorted(s.preempt_modes),
                    "cumulative_preemptions": s.cumulative_preemptions or None,
                    **_stats_facts(s),
                }
            ),
            s.preempt,
        )
    return _stats_finding(name, s, common)


def _stats_facts(s: _Scan) -> dict[str, object]:
    if not s.stats:
        return {}
    last = s.stats[-1][1]
    return {
        "stats_lines": len(s.stats),
        "last_stats": {k: round(v, 4) for k, v in last.items()},
        "max_waiting": max(st.get("waiting", 0.0) for _, st in s.stats),
        "max_kv_usage": round(max(st.get("gpu_kv_cache_usage", 0.0) for _, st in s.stats), 4),
    }


def _stats_finding(name: str, s: _Scan, common: dict[str, object]) -> Finding | None:
    if not s.stats and not s.capture_lines:
        return None
    facts = {**common, **_stats_facts(s)}
    tail = [st for _, st in s.stats[-STALL_LINES:]]
    if len(tail) == STALL_LINES:
        stalled = all(st.get("running", 0) > 0 and st.get("avg_generation_throughput", 1) == 0 for st in tail)
        pressured = all(st.get("waiting", 0) > 10 and st.get("gpu_kv_cache_usage", 0) >= 0.9 for st in tail)
        ev = line_numbers(i for i, _ in s.stats[-STALL_LINES:])
        if stalled:
            facts["reading"] = "requests running but zero tokens generated in consecutive stats lines"
            return Finding(name, "vllm_stats_stalled", False, "engine-hang", 0.45, facts, ev, "vllm_log")
        if pressured:
            facts["reading"] = "waiting queue > 10 with KV cache >= 90% in consecutive stats lines"
            return Finding(name, "vllm_stats_kv_pressure", False, "kv-capacity", 0.4, facts, ev, "vllm_log")
    kind = "vllm_stats" if s.stats else "cuda_graph_capture_progress"
    return Finding(name, kind, True, None, 0.6, facts, (), "vllm_log")
