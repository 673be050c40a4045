"""Kernel ``NVRM: Xid`` lines (dmesg, journalctl -k, syslog): code → meaning, severity, action, incident."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from llm_oncall.evidence.model import Finding, line_numbers, split_lines

_XID = re.compile(
    r"NVRM: Xid \((?P<pci>PCI:[0-9A-Fa-f:.]{4,24})\): (?P<code>\d{1,4}),"
    r"(?: pid=(?P<pid>'?<?[\w ]{0,20}>?'?),)?(?: name=(?P<name>[^,]{0,80}),)?(?P<msg>.{0,300})"
)
# Newer drivers report a lost GPU in prose, sometimes without an Xid line at all.
_FELL_OFF = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]{4,16})")
_RECOVERY = re.compile(
    r"recovery action changed from [^()]{0,20}\((?P<old>[^)]{0,40})\) to [^()]{0,20}\((?P<new>[^)]{0,40})\)"
)

SEVERITY_RANK = {"low": 0, "medium": 1, "high": 2, "critical": 3}


@dataclass(frozen=True)
class XidInfo:
    code: int
    meaning: str
    severity: str  # low | medium | high | critical
    action: str
    incident: str | None
    scope: str = "gpu"  # process | gpu | node


_H = "engine-hang"
_E = "gpu-ecc"
_NVL = "NVLink error: TP collectives stall; restart the TP group, check links (nvidia-smi nvlink -e)"

XID_TABLE: dict[int, XidInfo] = {
    x.code: x
    for x in (
        XidInfo(
            8,
            "GPU stopped making progress (driver-detected)",
            "high",
            "restart the engine; reset if recurs",
            _H,
        ),
        XidInfo(13, "graphics/compute engine exception", "low", "usually a kernel bug in the app", None, "process"),
        XidInfo(
            31,
            "GPU MMU page fault (illegal memory access)",
            "low",
            "usually software; check the app",
            None,
            "process",
        ),
        XidInfo(32, "corrupted push-buffer stream", "medium", "check driver and PCIe", None),
        XidInfo(38, "driver firmware fault", "high", "reset the GPU", None),
        XidInfo(43, "channel halted after a user fault", "low", "process-scoped; no action", None, "process"),
        XidInfo(44, "fault during context switch", "high", "reset the GPU", None),
        XidInfo(
            45,
            "preemptive cleanup after earlier errors or a killed process",
            "low",
            "secondary: find the root Xid",
            None,
            "process",
        ),
        XidInfo(46, "GPU stopped processing", "high", "restart the engine; reset if it recurs", _H),
        XidInfo(
            48,
            "uncorrectable double-bit ECC error",
            "critical",
            "cordon; remap/retire then reset the GPU",
            _E,
        ),
        XidInfo(56, "display engine error", "low", "rarely relevant for inference", None),
        XidInfo(61, "on-board microcontroller warning", "medium", "watch; firmware", None),
        XidInfo(62, "on-board microcontroller halt", "high", "reset the GPU", None),
        XidInfo(63, "page retirement or row remap recorded", "medium", "drain and reset the GPU to apply", _E),
        XidInfo(64, "page retirement or row remap failed to record", "critical", "cordon; GPU needs service", _E),
        XidInfo(74, "NVLink error", "high", _NVL, _H),
        XidInfo(
            79,
            "GPU has fallen off the bus",
            "critical",
            "cordon the node; reset/reboot; pods on it are lost",
            _H,
            "node",
        ),
        XidInfo(
            92,
            "high single-bit (correctable) ECC rate",
            "medium",
            "early warning: schedule service, cordon",
            _E,
        ),
        XidInfo(
            94,
            "contained uncorrectable ECC error",
            "high",
            "restart the affected engine; cordon if it recurs",
            _E,
        ),
        XidInfo(95, "uncontained uncorrectable ECC error", "critical", "cordon; GPU reset required", _E),
        XidInfo(109, "context-switch timeout", "high", "reset the GPU", _H),
        XidInfo(110, "security fault", "high", "reset the GPU", None),
        XidInfo(119, "GSP firmware RPC timeout", "high", "GPU unresponsive: reset the GPU", _H),
        XidInfo(120, "GSP firmware error", "high", "reset the GPU", _H),
        XidInfo(121, "chip-to-chip (C2C) link error", "high", "reset; check the superchip link", _H),
        XidInfo(136, "NVLink link training failed", "high", _NVL, _H),
        XidInfo(140, "unrecoverable ECC error", "critical", "cordon; reset/service the GPU", _E),
        XidInfo(143, "GPU initialisation failed", "critical", "GPU unusable: cordon and service", None),
        XidInfo(144, "NVLink-family error", "high", _NVL, _H),
        XidInfo(145, "NVLink-family error", "high", _NVL, _H),
        XidInfo(149, "NVLink-family error", "high", _NVL, _H),
        XidInfo(
            154,
            "driver changed the required recovery action",
            "high",
            "do what it names (reset, reboot)",
            None,
            "node",
        ),
        XidInfo(155, "NVLink-family error", "high", _NVL, _H),
    )
}
APP_FAULT_CODES = frozenset({13, 31, 43, 45})


def info(code: int) -> XidInfo:
    return XID_TABLE.get(
        code, XidInfo(code, "unlisted Xid", "medium", "look up the code in the NVIDIA Xid catalog", None)
    )


def _confidence(x: XidInfo, count: int) -> float:
    base = {"critical": 0.85, "high": 0.7, "medium": 0.5, "low": 0.3}[x.severity]
    return base + (0.05 if count > 1 else 0.0)


def parse(text: str, name: str) -> Finding | None:
    if "NVRM" not in text:
        return None
    events: list[tuple[int, int, str, str]] = []  # (line, code, pci, message)
    recovery: str | None = None
    last_pci = "?"
    for i, line in enumerate(split_lines(text)):
        if "NVRM" not in line:
            continue
        m = _XID.search(line)
        if m:
            events.append((i, int(m.group("code")), m.group("pci"), m.group("msg").strip()))
            r = _RECOVERY.search(line)
            if r:
                recovery = r.group("new").strip()
            continue
        fm = _FELL_OFF.search(line)
        if fm:
            last_pci = fm.group("pci")
        # The prose form repeats an Xid 79 already logged; count it only when no Xid line reported the loss.
        if "fallen off the bus" in line and not any(code == 79 for _, code, _, _ in events):
            events.append((i, 79, last_pci, "GPU has fallen off the bus"))
    if not events:
        return None
    counts = Counter(code for _, code, _, _ in events)
    codes = sorted(counts)
    worst = max(codes, key=lambda c: (SEVERITY_RANK[info(c).severity], info(c).incident is not None, counts[c]))
    wi = info(worst)
    by_gpu: dict[str, list[int]] = {}
    for _, code, pci, _ in events:
        by_gpu.setdefault(pci, [])
        if code not in by_gpu[pci]:
            by_gpu[pci].append(code)
    facts: dict[str, object] = {
        "xids": {str(c): counts[c] for c in codes},
        "worst": {
            "code": wi.code,
            "meaning": wi.meaning,
            "severity": wi.severity,
            "action": wi.action,
            "scope": wi.scope,
        },
        "gpus": by_gpu,
        "last_message": events[-1][3][:200],
    }
    if recovery:
        facts["recovery_action"] = recovery
    evidence = [i for i, code, _, _ in events if code == worst] or [i for i, _, _, _ in events]
    if set(codes) <= APP_FAULT_CODES:
        # Only process-scoped faults: the application crashed the context (bad kernel, illegal address).
        facts["reading"] = "process-scoped application faults only (Xid 13/31/43/45): software, not hardware"
        return Finding(
            file=name,
            kind="xid_app_fault",
            benign=True,
            incident_hint=None,
            confidence=0.6,
            facts=facts,
            lines=line_numbers(evidence),
            parser="xid",
        )
    return Finding(
        file=name,
        kind=f"xid_{worst}",
        benign=False,
        incident_hint=wi.incident,
        confidence=_confidence(wi, counts[worst]) if wi.incident else 0.6,
        facts=facts,
        lines=line_numbers(evidence),
        parser="xid",
    )
