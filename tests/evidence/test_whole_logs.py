"""A long log: every finding is reported with its line numbers, and the file is classified by the most severe."""

from __future__ import annotations

import time

from llm_oncall.evidence import classify

STATS = ("(APIServer pid=1) INFO 10-02 11:40:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 900.0 "
         "tokens/s, Avg generation throughput: 400.0 tokens/s, Running: 20 reqs, Waiting: 0 reqs, GPU KV cache "
         "usage: 31.5%, Prefix cache hit rate: 40.0%")
NCCL_INFO = "vllm-0:2231:2598 [2] NCCL INFO Channel 03/0 : 6[2] -> 2[2] [receive] via NET/IB/2/GDRDMA"
SHM = ("(VllmWorker TP1 pid=2332) INFO 10-02 11:52:00 [shm_broadcast.py:542] No available shared memory broadcast "
       "block found in 60 seconds. This typically happens when some processes are hanging.")
WATCHDOG = ("[rank1]:[E1002 11:55:00.1 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=5653, OpType=ALLREDUCE, NumelIn=58720256, NumelOut=58720256, "
            "Timeout(ms)=600000) ran for 600028 milliseconds before timing out.")
ENGINE_DEAD = ("(APIServer pid=1) ERROR 10-02 11:55:02 [async_llm.py:485] vllm.v1.engine.exceptions.EngineDeadError: "
               "EngineCore encountered an issue. See stack trace (above) for the root cause.")


def _log(n: int) -> tuple[str, dict[str, int]]:
    lines = [NCCL_INFO] * 50
    at: dict[str, int] = {}
    for i in range(n):
        lines.append(STATS.format(s=i % 60))
        if i == n // 2:
            lines.extend([SHM, SHM])
            at["shm"] = len(lines) - 1
        if i == 3 * n // 4:
            lines.append(WATCHDOG)
            at["watchdog"] = len(lines)
            lines.append(ENGINE_DEAD)
            at["dead"] = len(lines)
    return "\n".join(lines) + "\n", at


def test_every_finding_with_its_lines_and_the_most_severe_wins() -> None:
    text, at = _log(2000)
    f = classify.classify_text(text, "worker.log")
    assert (f.kind, f.incident_hint, f.severity) == ("nccl_watchdog_timeout", "engine-hang", "critical")
    assert f.lines == (at["watchdog"],)
    by_kind = {x.kind: x for x in f.findings}
    assert by_kind["shm_broadcast_wait"].lines == (at["shm"], at["shm"] + 1)
    assert by_kind["engine_dead"].lines == (at["dead"],)
    assert by_kind["nccl_info"].benign and by_kind["vllm_stats"].benign
    assert [x.severity for x in f.findings] == sorted((x.severity for x in f.findings),
                                                      key=["critical", "error", "warning", "info"].index)
    j = f.to_json()
    assert {"file", "kind", "benign", "incident_hint", "confidence", "facts", "findings"} <= j.keys()
    assert all({"kind", "incident_hint", "benign", "severity", "lines"} <= x.keys() for x in j["findings"])


def _cpu_s(text: str) -> float:
    """CPU seconds to classify ``text`` cold (no line remembered from an earlier call), the best of two."""
    from llm_oncall.evidence import matcher

    best = float("inf")
    for _ in range(2):
        matcher._LINE_CACHE.clear()
        start = time.process_time()
        classify.classify_text(text, "big.log")
        best = min(best, time.process_time() - start)
    return best


def test_a_long_log_costs_in_proportion_to_its_length() -> None:
    """Ten times the lines, about ten times the work: a step that grew with the square of the length would take
    a hundred. Measured side by side as a ratio (the machine's speed cancels out); the absolute figure for a
    20,000-line log is in docs/evidence.md, "Cost", not a test's business."""
    small, _ = _log(2_000)
    big, _ = _log(20_000)
    ratio = _cpu_s(big) / max(_cpu_s(small), 1e-3)
    assert ratio < 40.0, ratio
