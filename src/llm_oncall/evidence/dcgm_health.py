"""``dcgmi health -c`` reports and DCGM health-watch messages (also as they appear in logs)."""

from __future__ import annotations

import re

from llm_oncall.evidence import xid
from llm_oncall.evidence.model import Finding, line_numbers, split_lines

_OVERALL = re.compile(
    r"Overall Health\s{0,40}\|?\s{0,40}:?\s{0,4}(?P<status>Healthy|Warning|Failure|Incompatible)", re.I
)
_SUBSYSTEM = re.compile(
    r"->\s{1,4}(?P<sys>[A-Za-z][A-Za-z /]{1,30}?)\s{1,60}\|\s{0,4}"
    r"(?P<status>Healthy|Warning|Failure|Incompatible)\b",
    re.I,
)
_GPU_ROW = re.compile(r"->\s{1,4}(?P<gpu>\d{1,3})\s{1,60}\|")
_MESSAGE_CELL = re.compile(r"^\|\s{3,}\|\s{1,4}(?P<msg>\S.{0,200}?)\s*\|?\s*$")
_XID_IN_MSG = re.compile(r"\bXID (?P<code>\d{1,4})\b", re.I)

# (message pattern, area) — DCGM's failure-reason texts, matched loosely because wording drifts by release.
_AREAS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"double-bit|\bDBE|uncorrectable|row remap|pending page|retire|\bECC\b|SRAM", re.I),
        "memory",
    ),
    (re.compile(r"nvlink|nvswitch", re.I), "nvlink"),
    (re.compile(r"fell off the bus|fallen off|GPU is lost|lost GPU", re.I), "gpu-lost"),
    (re.compile(r"PCIe|replay", re.I), "pcie"),
    (re.compile(r"thermal|temperature|throttl|power", re.I), "thermal-power"),
    (re.compile(r"\bXID\b", re.I), "xid"),
)
_AREA_FROM_SUBSYSTEM = {
    "memory": "memory",
    "memory system": "memory",
    "nvlink": "nvlink",
    "nvlink system": "nvlink",
    "pcie system": "pcie",
    "nvswitch": "nvlink",
    "pcie": "pcie",
    "pci": "pcie",
    "thermal": "thermal-power",
    "power": "thermal-power",
}
_AREA_HINT = {"memory": "gpu-ecc", "nvlink": "engine-hang", "gpu-lost": "engine-hang"}
_ORDER = ("memory", "gpu-lost", "nvlink", "xid", "pcie", "thermal-power", "other")


def _area(msg: str) -> str:
    for pattern, area in _AREAS:
        if pattern.search(msg):
            return area
    return "other"


def parse(text: str, name: str) -> Finding | None:
    if "Health" not in text and "DCGM" not in text and "dcgm" not in text:
        return None
    lines = split_lines(text)
    overall: str | None = None
    gpu = ""
    bad_systems: list[dict[str, str]] = []
    messages: list[tuple[int, str]] = []
    evidence: list[int] = []
    in_report = False
    for i, line in enumerate(lines):
        m = _OVERALL.search(line)
        if m:
            overall = m.group("status").capitalize()
            in_report = True
            continue
        if not in_report:
            continue
        g = _GPU_ROW.search(line)
        if g:
            gpu = g.group("gpu")
            continue
        s = _SUBSYSTEM.search(line)
        if s:
            status = s.group("status").capitalize()
            if status in ("Warning", "Failure"):
                bad_systems.append({"gpu": gpu, "system": s.group("sys").strip(), "status": status})
                evidence.append(i)
            continue
        c = _MESSAGE_CELL.match(line)
        if c:
            messages.append((i, c.group("msg")))
            evidence.append(i)
    if overall is None:
        return None
    if overall == "Healthy" and not bad_systems:
        return Finding(
            file=name,
            kind="dcgm_healthy",
            benign=True,
            incident_hint=None,
            confidence=0.8,
            facts={"overall": overall},
            parser="dcgm_health",
        )
    areas = {_area(msg) for _, msg in messages}
    areas |= {_AREA_FROM_SUBSYSTEM.get(b["system"].lower(), "other") for b in bad_systems}
    xid_codes = sorted({int(x.group("code")) for _, msg in messages for x in [_XID_IN_MSG.search(msg)] if x})
    area = next((a for a in _ORDER if a in areas), "other")
    hint = _AREA_HINT.get(area)
    if area == "xid" and xid_codes:
        worst = max((xid.info(c) for c in xid_codes), key=lambda x: xid.SEVERITY_RANK[x.severity])
        hint = worst.incident
    failure = overall == "Failure" or any(b["status"] == "Failure" for b in bad_systems)
    confidence = (0.8 if failure else 0.55) if hint else 0.45
    facts: dict[str, object] = {
        "overall": overall,
        "area": area,
        "systems": bad_systems[:16],
        "messages": [msg for _, msg in messages][:10],
    }
    if xid_codes:
        facts["xids"] = xid_codes
    return Finding(
        file=name,
        kind=f"dcgm_health_{area.replace('-', '_')}",
        benign=False,
        incident_hint=hint,
        confidence=confidence,
        facts=facts,
        lines=line_numbers(evidence),
        parser="dcgm_health",
    )
