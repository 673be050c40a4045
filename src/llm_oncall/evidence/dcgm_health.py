"""``dcgmi health -c`` reports, DCGM health-watch messages (also as they appear in logs) and ``dcgmi diag``
result tables."""

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
# A lost GPU is the fallen-off-the-bus path (Xid 79): gpu-ecc's hardware path, not a hang.
_AREA_HINT = {"memory": "gpu-ecc", "nvlink": "engine-hang", "gpu-lost": "gpu-ecc"}
_AREA_CATEGORY = {"memory": "gpu-memory", "nvlink": "nvlink", "gpu-lost": "gpu-hardware"}
_ORDER = ("memory", "gpu-lost", "nvlink", "xid", "pcie", "thermal-power", "other")


def _area(msg: str) -> str:
    for pattern, area in _AREAS:
        if pattern.search(msg):
            return area
    return "other"


def parse(text: str, name: str) -> Finding | None:
    if "Health" not in text and "DCGM" not in text and "dcgm" not in text and "Diagnostic" not in text:
        return None
    diag = _diag(split_lines(text), name)
    health = _health(text, name)
    if diag is None or health is None:
        return diag or health
    return max((diag, health), key=lambda f: (not f.benign, f.confidence))


def _health(text: str, name: str) -> Finding | None:
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
            severity="info",
            category="benign",
        )
    areas = {_area(msg) for _, msg in messages}
    areas |= {_AREA_FROM_SUBSYSTEM.get(b["system"].lower(), "other") for b in bad_systems}
    xid_codes = sorted({int(x.group("code")) for _, msg in messages for x in [_XID_IN_MSG.search(msg)] if x})
    area = next((a for a in _ORDER if a in areas), "other")
    hint = _AREA_HINT.get(area)
    category = _AREA_CATEGORY.get(area, "other-failure")
    if area == "xid" and xid_codes:
        worst = xid.worst(xid_codes)
        hint = worst.incident
        category = worst.category if worst.category not in ("benign", "unknown") else "other-failure"
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
        severity=("critical" if failure else "error") if hint else "warning",
        category=category if hint else "other-failure",
    )


# ---- dcgmi diag ---------------------------------------------------------------------------------------
_DIAG_ROW = re.compile(r"^\|\s{0,4}(?P<test>[A-Za-z][\w /.()-]{0,40}?)\s*\|\s{0,4}(?P<result>Pass|Fail|Warn|Skip)\b"
                       r"(?P<rest>[^|]{0,200})", re.I)
_DIAG_MSG = re.compile(r"^\|\s{0,4}(?P<label>Warning|Error|Info|)\s*\|\s{0,4}(?P<msg>\S[^|]{0,300}?)\s*\|?\s*$")
_DIAG_AREA = (
    (re.compile(r"memory|page retirement|row remap|ecc", re.I), "memory"),
    (re.compile(r"nvlink|nvbandwidth|nvswitch", re.I), "nvlink"),
    (re.compile(r"diagnostic|sm stress|targeted stress|pulse|eud|memtest|hardware|software", re.I), "hardware"),
    (re.compile(r"pcie", re.I), "pcie"),
)
_DIAG_KIND = {"memory": ("gpu-memory", "gpu-ecc", 0.75), "nvlink": ("nvlink", "engine-hang", 0.6),
              "hardware": ("gpu-hardware", "gpu-ecc", 0.6), "pcie": ("gpu-hardware", "gpu-ecc", 0.45)}


def _diag(lines: tuple[str, ...], name: str) -> Finding | None:
    if not any("Diagnostic" in line and "|" in line for line in lines[:80]):
        return None
    results: list[tuple[int, str, str, str]] = []  # (line, test, result, rest)
    messages: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = _DIAG_ROW.match(line)
        if m:
            results.append((i, m.group("test").strip(), m.group("result").capitalize(), m.group("rest").strip()))
            continue
        mm = _DIAG_MSG.match(line)
        if mm and results and results[-1][2] in ("Fail", "Warn"):
            messages.append((i, mm.group("msg")))
    if not results:
        return None
    failed = [r for r in results if r[2] == "Fail"]
    facts: dict[str, object] = {"tests": len(results), "failed": [f"{r[1]}: {r[3]}".strip(": ") for r in failed][:10],
                                "warned": [r[1] for r in results if r[2] == "Warn"][:10],
                                "messages": [m for _, m in messages][:10]}
    if not failed:
        return Finding(name, "dcgm_diag_pass", True, None, 0.7, facts, (), "dcgm_health", severity="info",
                       category="benign")
    areas = []
    for _, test, _, _ in failed:
        areas.append(next((a for rx, a in _DIAG_AREA if rx.search(test)), "setup"))
    text = " ".join(m for _, m in messages)
    if "memory" not in areas and re.search(r"uncorrectable|row remap|retire|double.bit", text, re.I):
        areas.append("memory")
    area = next((a for a in ("memory", "nvlink", "hardware", "pcie") if a in areas), "setup")
    category, hint, conf = _DIAG_KIND.get(area, ("other-failure", None, 0.5))
    return Finding(name, f"dcgm_diag_{area}_fail", False, hint, conf, facts,
                   line_numbers([r[0] for r in failed] + [i for i, _ in messages]), "dcgm_health",
                   severity="critical" if area == "memory" else "error", category=category)
