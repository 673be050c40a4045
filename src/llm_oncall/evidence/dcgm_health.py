"""``dcgmi health -c`` reports, DCGM health-watch messages (also as they appear in logs) and ``dcgmi diag``
result tables."""

from __future__ import annotations

import re

from llm_oncall.evidence import xid
from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines

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
# A lost GPU is the fallen-off-the-bus path (Xid 79): gpu-ecc's hardware path, not a hang. PCIe replays and clocks
# slowed by a thermal or power violation are the GPU's hardware too, as the diag table's PCIe and power tests say.
_AREA_HINT = {"memory": "gpu-ecc", "nvlink": "engine-hang", "gpu-lost": "gpu-ecc", "pcie": "gpu-ecc",
              "thermal-power": "gpu-ecc"}
_AREA_CATEGORY = {"memory": "gpu-memory", "nvlink": "nvlink", "gpu-lost": "gpu-hardware", "pcie": "gpu-hardware",
                  "thermal-power": "gpu-hardware"}
_WEAK_AREAS = ("pcie", "thermal-power")  # a warning even at Failure: a GPU that runs slow, not one that fails
_ORDER = ("memory", "gpu-lost", "nvlink", "xid", "pcie", "thermal-power", "other")


def _area(msg: str) -> str:
    for pattern, area in _AREAS:
        if pattern.search(msg):
            return area
    return "other"


def parse(text: str, name: str) -> Finding | None:
    if "Health" not in text and "DCGM" not in text and "dcgm" not in text and "|" not in text:
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
    if area in _WEAK_AREAS:
        confidence, failure = 0.45, False
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
        severity=("critical" if failure else "error") if hint and area not in _WEAK_AREAS else "warning",
        category=category if hint else "other-failure",
    )


# ---- dcgmi diag ---------------------------------------------------------------------------------------
# "| GPU Memory                | Fail - GPU: 0                |", a continuation row "|       | Pass - All |",
# message rows "| Error | GPU 3 has uncorrectable memory errors and row  |" wrapped over several rows.
_DIAG_ROW = re.compile(r"^\|\s{0,4}(?P<test>[A-Za-z][\w /.()-]{0,40}?|)\s*\|\s{0,4}(?P<result>Pass|Fail|Warn|Skip)\b"
                       r"(?P<rest>[^|]{0,200})", re.I)
# The label is "Warning"/"Error"/"Info", or with DCGM 4 the GPU it is about ("Warning: GPU5"). dcgmi cuts a message
# into cells of 45 characters with no regard for words (Diag::DisplayVerboseInfo, DATA_INFO_TAG_LEN): a full cell
# followed by one whose text starts right after the separator is one word cut in two ("thermal vi" + "olation").
_DIAG_MSG = re.compile(r"^\|\s{0,4}(?P<label>Warning|Error|Info|)(?::\s{0,2}GPU\s?\d{1,3})?\s*\|(?P<pad>\s{0,4})"
                       r"(?P<msg>\S[^|]{0,300}?)\s*\|?\s*$")
_DIAG_CELL = 45
_DIAG_HEADER = re.compile(r"\|\s{0,4}Diagnostic\s{1,40}\|\s{0,4}Result\b")
_DIAG_AREA = (
    (re.compile(r"memory|page retirement|row remap|ecc", re.I), "memory"),
    (re.compile(r"nvlink|nvbandwidth|nvswitch", re.I), "nvlink"),
    (re.compile(r"diagnostic|sm stress|targeted stress|targeted power|pulse|eud|memtest|hardware|software", re.I),
     "hardware"),
    (re.compile(r"pcie", re.I), "pcie"),
)
# DCGM's messages when a test cannot start on the GPU: "Error using CUDA API cuCtxCreate", "Unable to create CUDA
# context", "CUDA-capable device(s) is/are busy or unavailable"
_DIAG_UNAVAILABLE = re.compile(r"Unable to create CUDA context|Error using CUDA API cuCtxCreate|busy or unavailable",
                               re.I)
_DIAG_MEMORY_MSG = re.compile(r"uncorrectable|row remap|retire|double.{0,2}bit|\bDBE\b|ECC", re.I)
# DCGM_FR_CLOCKS_EVENT_THERMAL / _POWER, DCGM_FR_THERMAL_VIOLATIONS (dcgm_errors.h): the GPU slowed its clocks
_DIAG_THERMAL_MSG = re.compile(r"clocks event due to (?:thermal|power) violation|thermal violations totaling", re.I)
_DIAG_KIND = {"memory": ("gpu-memory", "gpu-ecc", 0.75), "nvlink": ("nvlink", "engine-hang", 0.6),
              "hardware": ("gpu-hardware", "gpu-ecc", 0.6), "pcie": ("gpu-hardware", "gpu-ecc", 0.45)}


# DCGM's DCGM_FR_NVLINK_DOWN ("GPU %u's NvLink link %u is currently down"), and a report that the system has no
# NVLink at all ("on any GPU system without NvLink", "there is no NVLink", "NVLink is not present")
_NVLINK_DOWN_MSG = re.compile(r"NvLink link \d{1,2} is currently down", re.I)
_NO_NVLINK = re.compile(r"(?i)\b(?:without|no|not have|doesn't have|does not have|lacks?)\s{1,3}"
                        r"(?:an?\s{1,3}|any\s{1,3})?NV ?Links?\b"
                        r"|\bNV ?Link (?:is |are )?(?:not|never) (?:present|available|installed|fitted)\b")


def _nvlink_absent(lines: tuple[str, ...], messages: list[list[object]]) -> bool:
    """Every message of the failed PCIe test is an NvLink link reported down, and the prose says there is no
    NVLink on the system."""
    if not messages or not all(_NVLINK_DOWN_MSG.search(str(m[2])) for m in messages):
        return False
    return any(_NO_NVLINK.search(line) for line in lines if not line.lstrip().startswith("|"))


def _diag(lines: tuple[str, ...], name: str) -> Finding | None:
    results: list[tuple[int, str, str, str]] = []  # (line, test, result, rest)
    messages: list[list[object]] = []  # [line, label, text]
    last_cell = 0  # the length of the message cell read last (a full one may go on in the next row)
    test = ""
    header = False
    for i, line in enumerate(lines):
        if _DIAG_HEADER.search(line):
            header = True
            continue
        m = _DIAG_ROW.match(line)
        if m:
            test = m.group("test").strip() or test
            results.append((i, test, m.group("result").capitalize(), m.group("rest").strip(" -")))
            continue
        mm = _DIAG_MSG.match(line)
        if mm and (header or results):
            label = mm.group("label")
            if label:
                messages.append([i, label, mm.group("msg")])
            elif messages and messages[-1][0] == i - 1:
                # a wrapped cell goes on in the next row: a full cell whose next starts at once was cut in a word
                glue = "" if last_cell >= _DIAG_CELL and len(mm.group("pad")) <= 1 else " "
                messages[-1][0] = i
                messages[-1][2] = f"{messages[-1][2]}{glue}{mm.group('msg')}"
            last_cell = len(mm.group("msg"))
    if not results and not (header and messages):
        return None
    failed = [r for r in results if r[2] == "Fail"]
    errors = [m for m in messages if m[1] == "Error"]
    facts: dict[str, object] = compact({
        "tests": len(results),
        "failed": [f"{r[1]}: {r[3]}".strip(": ") for r in failed][:10],
        "warned": [r[1] for r in results if r[2] == "Warn"][:10],
        "messages": [f"{m[1]}: {m[2]}" for m in messages][:10],
    })
    if not failed and not errors:
        return Finding(name, "dcgm_diag_pass", True, None, 0.7, facts, (), "dcgm_health", severity="info",
                       category="benign")
    areas = [next((a for rx, a in _DIAG_AREA if rx.search(r[1])), "setup") for r in failed]
    # what the messages of a failed run say outranks the name of the test that printed them
    said = [str(m[2]) for m in (messages if failed else errors) if m[1] in ("Error", "Warning")]
    if any(_DIAG_MEMORY_MSG.search(m) for m in said):
        areas.append("memory")
    elif any(_NVLINK_DOWN_MSG.search(m) for m in said) and not _nvlink_absent(lines, messages):
        areas.append("nvlink")
    elif any(_DIAG_THERMAL_MSG.search(m) for m in said):
        areas.append("hardware")
    elif "memory" in areas and not any(_DIAG_MEMORY_MSG.search(str(m[2])) for m in messages) and any(
            _DIAG_UNAVAILABLE.search(str(m[2])) for m in messages):
        # the memory test never ran: the GPU would not take a CUDA context (busy or unavailable), no memory error
        areas = ["hardware" if a == "memory" else a for a in areas]
    area = next((a for a in ("memory", "nvlink", "hardware", "pcie") if a in areas), "setup")
    if area == "pcie" and not errors and _nvlink_absent(lines, messages):
        facts["reading"] = ("the PCIe test failed only on NvLink links reported down, on a system the report says has "
                            "no NVLink: the diagnostic checks links that are not there, not a fault")
        return Finding(name, "dcgm_diag_nvlink_absent", True, None, 0.5, facts, line_numbers([r[0] for r in failed]),
                       "dcgm_health", severity="info", category="benign")
    category, hint, conf = _DIAG_KIND.get(area, ("other-failure", None, 0.5))
    lines_ = [r[0] for r in failed] + [int(str(m[0])) for m in errors]
    return Finding(name, f"dcgm_diag_{area}_fail", False, hint, conf, facts, line_numbers(lines_), "dcgm_health",
                   severity="critical" if area == "memory" else "error", category=category)


# ``dcgmi nvlink -s`` / ``--link-status``: one row of link states per GPU (and per NvSwitch), under
#     GPUs:
#         gpuId 0:
#             U U U U D D _ _
# with the key "Up=U, Down=D, Disabled=X, Not Supported=_" (DCGM dcgmi/Nvlink.cpp).
_NVLINK_STATUS = re.compile(r"NvLink Link Status|Key: Up=U, Down=D")
_NVLINK_ENTITY = re.compile(r"^\s{0,12}(?P<kind>gpuId|physicalId) (?P<id>\d{1,4}):\s*$")
_NVLINK_ROW = re.compile(r"^\s{0,16}(?P<links>[UDX_](?: [UDX_]){0,63})\s*$")


def parse_nvlink_status(text: str, name: str) -> Finding | None:
    """``dcgmi nvlink --link-status``: any NVLink Down on a GPU or switch is an NVLink fault; all Up is healthy.
    Disabled (X) and Not Supported (_) links are configuration, not faults."""
    if not _NVLINK_STATUS.search(text):
        return None
    entity: str | None = None
    down: dict[str, int] = {}
    total: dict[str, int] = {}
    up = 0
    ev: list[int] = []
    for i, line in enumerate(split_lines(text)):
        if m := _NVLINK_ENTITY.match(line):
            entity = ("gpu " if m.group("kind") == "gpuId" else "nvswitch ") + m.group("id")
            continue
        if entity is not None and (r := _NVLINK_ROW.match(line)):
            states = r.group("links").split()
            supported = [s for s in states if s != "_"]
            total[entity] = len(supported)
            up += states.count("U")
            if states.count("D"):
                down[entity] = states.count("D")
                ev.append(i)
            entity = None
    if not total:
        return None
    facts = compact({
        "entities": len(total),
        "links_up": up,
        "links_down": {e: n for e, n in list(down.items())[:32]},
        "all_down": sorted(e for e, n in down.items() if n == total[e])[:32] or None,
    })
    if down:
        every = all(n == total[e] for e, n in down.items())
        facts["reading"] = ("NVLink links report Down (dcgmi nvlink --link-status): collectives fall back to PCIe "
                            "or hang; the fabric or the GPU's links are faulty")
        facts["next_step"] = "nvidia-smi nvlink -s / -e on the node; check fabric manager; drain and field-diagnose"
        return Finding(name, "nvlink_link_down", False, "engine-hang", 0.6 if every else 0.5, facts,
                       line_numbers(ev), "dcgm_nvlink", severity="error", category="nvlink")
    facts["reading"] = "every supported NVLink link is Up (or disabled/not supported): no NVLink fault"
    return Finding(name, "nvlink_links_up", True, None, 0.6, facts, (), "dcgm_nvlink", severity="info",
                   category="benign")
