"""PyTorch ProcessGroupNCCL watchdog timeouts, NCCL WARN/error lines and NCCL INFO start-up chatter."""

from __future__ import annotations

import re
from collections import defaultdict

from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines

# "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE,
#  NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
# Older PyTorch omits NumelIn/NumelOut; newer ones prefix "[PG ID 0 PG GUID 0(default_pg) Rank 1]".
_WATCHDOG = re.compile(
    r"Rank (?P<rank>\d{1,6})\] Watchdog caught collective operation timeout: "
    r"WorkNCCL\(SeqNum=(?P<seq>\d{1,20}), OpType=(?P<op>[A-Z_]{1,40})"
    r"(?:, NumelIn=(?P<nin>\d{1,20}), NumelOut=(?P<nout>\d{1,20}))?"
    r"(?:, [A-Za-z]{1,20}=[^,)]{0,40}){0,4}"
    r", Timeout\(ms\)=(?P<timeout>\d{1,12})\) ran for (?P<ran>\d{1,15}) milliseconds"
)
_LAST_WORK = re.compile(
    r"Rank (?P<rank>\d{1,6})\] (?:Exception \(either an error or timeout\) detected by watchdog at work|"
    r"Timeout at NCCL work): (?P<work>\d{1,20}), last enqueued NCCL work: (?P<enq>-?\d{1,20}), "
    r"last completed NCCL work: (?P<done>-?\d{1,20})"
)
# "host:pid:tid [local_rank] NCCL WARN <message>"
_NCCL_WARN = re.compile(r"NCCL WARN (?P<msg>.{0,300})")
_NCCL_INFO = re.compile(r"\bNCCL INFO\b")
_NCCL_ERROR = re.compile(
    r"(?:DistBackendError|NCCL error(?: in)?:|ncclSystemError|ncclRemoteError|ncclInternalError|"
    r"ncclUnhandledCudaError|NCCL communicator was aborted|ProcessGroupNCCL's watchdog got stuck|"
    r"Watchdog thread terminated with exception|NCCL watchdog thread terminated)"
)
_PG_NOT_DESTROYED = re.compile(r"process group has NOT been destroyed before we destruct ProcessGroupNCCL")

# Strings in a WARN line that point at the fabric (NIC, NVLink, socket) rather than at the program.
_TRANSPORT_HINTS = ("NET/IB", "NET/Socket", "ibv_", "NVLink", "nvlink", "Connection", "connection", "peer")


def parse(text: str, name: str) -> Finding | None:
    lines = split_lines(text)
    timeouts: list[dict[str, int | str | None]] = []
    timeout_lines: list[int] = []
    last_work: dict[int, dict[str, int]] = {}
    warn_lines: list[int] = []
    warn_msgs: list[str] = []
    error_lines: list[int] = []
    info_lines = 0
    benign_lines: list[int] = []

    for i, line in enumerate(lines):
        if "Watchdog caught" in line:
            m = _WATCHDOG.search(line)
            if m:
                timeouts.append(
                    {
                        "rank": int(m.group("rank")),
                        "seq": int(m.group("seq")),
                        "op": m.group("op"),
                        "numel_in": int(m.group("nin")) if m.group("nin") else None,
                        "timeout_ms": int(m.group("timeout")),
                        "ran_ms": int(m.group("ran")),
                    }
                )
                timeout_lines.append(i)
                continue
        if "NCCL work" in line:
            m2 = _LAST_WORK.search(line)
            if m2:
                last_work[int(m2.group("rank"))] = {
                    "work": int(m2.group("work")),
                    "last_enqueued": int(m2.group("enq")),
                    "last_completed": int(m2.group("done")),
                }
                timeout_lines.append(i)
                continue
        if "NCCL" not in line and "nccl" not in line:
            continue
        if _PG_NOT_DESTROYED.search(line):
            benign_lines.append(i)
            continue
        mw = _NCCL_WARN.search(line)
        if mw:
            warn_lines.append(i)
            if len(warn_msgs) < 10:
                warn_msgs.append(mw.group("msg").strip())
            continue
        if _NCCL_ERROR.search(line):
            error_lines.append(i)
            continue
        if _NCCL_INFO.search(line):
            info_lines += 1

    if timeouts:
        return _timeout_finding(name, timeouts, timeout_lines, last_work, warn_msgs)
    if warn_lines or error_lines:
        transport = any(h in m for m in warn_msgs for h in _TRANSPORT_HINTS)
        return Finding(
            file=name,
            kind="nccl_error" if error_lines else "nccl_warn",
            benign=False,
            incident_hint="engine-hang",
            confidence=0.55 if (error_lines and transport) else 0.45 if error_lines else 0.35,
            facts=compact(
                {
                    "warn_count": len(warn_lines),
                    "error_count": len(error_lines),
                    "warnings": warn_msgs,
                    "transport_related": transport,
                }
            ),
            lines=line_numbers(error_lines + warn_lines),
            parser="nccl",
        )
    if benign_lines:
        return Finding(
            file=name,
            kind="pg_not_destroyed_warning",
            benign=True,
            incident_hint=None,
            confidence=0.9,
            facts={"note": "shutdown-order warning printed at process exit; not a hang"},
            lines=line_numbers(benign_lines),
            parser="nccl",
        )
    if info_lines:
        return Finding(
            file=name,
            kind="nccl_info",
            benign=True,
            incident_hint=None,
            confidence=0.5,
            facts={"info_lines": info_lines},
            parser="nccl",
        )
    return None


def _timeout_finding(
    name: str,
    timeouts: list[dict[str, int | str | None]],
    lines: list[int],
    last_work: dict[int, dict[str, int]],
    warn_msgs: list[str],
) -> Finding:
    ops_by_seq: dict[int, set[str]] = defaultdict(set)
    for t in timeouts:
        ops_by_seq[int(t["seq"] or 0)].add(str(t["op"]))
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
    if warn_msgs:
        facts["nccl_warnings"] = warn_msgs
    return Finding(
        file=name,
        kind="nccl_collective_mismatch" if mismatched else "nccl_watchdog_timeout",
        benign=False,
        incident_hint="engine-hang",
        confidence=0.6 if mismatched else 0.8,
        facts=facts,
        lines=line_numbers(lines),
        parser="nccl",
    )
