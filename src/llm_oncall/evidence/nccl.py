"""PyTorch ProcessGroupNCCL watchdog timeouts: which ranks timed out in which collective at which SeqNum.

Code, not a signature: the reading comes from comparing lines across ranks. Ranks blocked in *different*
collectives at the *same* sequence number disagree about the program (a code-path mismatch); ranks in the
same collective wait for a peer that never joined (stuck, dead, or a link fault). The other c10d and NCCL
lines (watchdog stuck, NCCL WARN, ncclRemoteError, INFO chatter) are signatures in catalog/signatures/nccl.yaml.
"""

from __future__ import annotations

import re
from collections import defaultdict

from llm_oncall.evidence.model import Finding, line_numbers, split_lines

# "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE,
#  NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
# PyTorch 1.x: "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000)" (no SeqNum) or with "TensorShape=[1]";
# newer ones prefix "[PG ID 0 PG GUID 0(default_pg) Rank 1]".
_WATCHDOG = re.compile(
    r"Rank (?P<rank>\d{1,6})\] Watchdog caught collective operation timeout: "
    r"WorkNCCL\((?:SeqNum=(?P<seq>\d{1,20}), )?OpType=(?P<op>[A-Z_]{1,40})"
    r"(?P<rest>[^)]{0,300}?)Timeout\(ms\)=(?P<timeout>\d{1,12})\)(?: ran for (?P<ran>\d{1,15}) milliseconds)?"
)
_NUMEL = re.compile(r"NumelIn=(?P<nin>\d{1,20})")
_LAST_WORK = re.compile(
    r"Rank (?P<rank>\d{1,6})\] (?:Exception \(either an error or timeout\) detected by watchdog at work|"
    r"Timeout at NCCL work): (?P<work>\d{1,20}), last enqueued NCCL work: (?P<enq>-?\d{1,20}), "
    r"last completed NCCL work: (?P<done>-?\d{1,20})"
)


def parse(text: str, name: str) -> Finding | None:
    if "Watchdog caught" not in text and "NCCL work" not in text:
        return None
    timeouts: list[dict[str, int | str | None]] = []
    lines: list[int] = []
    last_work: dict[int, dict[str, int]] = {}
    rows = split_lines(text)
    for i, line in enumerate(rows):
        if "Watchdog caught" in line:
            # A terminal may have hard-wrapped the line (mid-number even): try it joined with the next two.
            m = _WATCHDOG.search(line) or _WATCHDOG.search("".join(rows[i:i + 3]))
            if m:
                n = _NUMEL.search(m.group("rest") or "")
                timeouts.append({
                    "rank": int(m.group("rank")),
                    "seq": int(m.group("seq")) if m.group("seq") else None,
                    "op": m.group("op"),
                    "numel_in": int(n.group("nin")) if n else None,
                    "timeout_ms": int(m.group("timeout")),
                    "ran_ms": int(m.group("ran")) if m.group("ran") else None,
                })
                lines.append(i)
                continue
        if "NCCL work" in line:
            m2 = _LAST_WORK.search(line)
            if m2:
                last_work[int(m2.group("rank"))] = {
                    "work": int(m2.group("work")),
                    "last_enqueued": int(m2.group("enq")),
                    "last_completed": int(m2.group("done")),
                }
                lines.append(i)
    if not timeouts:
        return None
    return _timeout_finding(name, timeouts, lines, last_work)


def _timeout_finding(
    name: str,
    timeouts: list[dict[str, int | str | None]],
    lines: list[int],
    last_work: dict[int, dict[str, int]],
) -> Finding:
    ops_by_seq: dict[int, set[str]] = defaultdict(set)
    for t in timeouts:
        if t["seq"] is not None:
            ops_by_seq[int(t["seq"])].add(str(t["op"]))
    # Ranks blocked in different collectives at the same sequence number disagree about the program,
    # so they can never match up: a code-path divergence, which no amount of hardware swapping fixes.
    mismatched = {seq: sorted(ops) for seq, ops in ops_by_seq.items() if len(ops) > 1}
    ranks = sorted({int(t["rank"] or 0) for t in timeouts})
    first = timeouts[0]
    facts: dict[str, object] = {
        "ranks": ranks,
        "collectives": sorted({str(t["op"]) for t in timeouts}),
        "seq_nums": sorted(ops_by_seq)[:20],
        "timeout_ms": first["timeout_ms"],
        "ran_ms_max": max(int(t["ran_ms"] or 0) for t in timeouts),
        "mismatch": bool(mismatched),
    }
    if mismatched:
        facts["mismatch_at"] = {str(seq): ops for seq, ops in sorted(mismatched.items())[:10]}
        facts["reading"] = (
            "ranks wait in different collectives at the same SeqNum: a code-path mismatch between ranks "
            "(e.g. data-dependent branch, uneven batch), not a hardware fault"
        )
    else:
        facts["reading"] = "ranks timed out in the same collective: a peer never joined (stuck, dead or link fault)"
    if last_work:
        facts["last_work"] = {str(r): w for r, w in sorted(last_work.items())[:16]}
    return Finding(
        file=name,
        kind="nccl_collective_mismatch" if mismatched else "nccl_watchdog_timeout",
        benign=False,
        incident_hint="engine-hang",
        confidence=0.6 if mismatched else 0.8,
        facts=facts,
        lines=line_numbers(lines),
        parser="nccl",
        severity="critical",
        category="hang",
    )
