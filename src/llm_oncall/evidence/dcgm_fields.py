"""DCGM field values: dcgm-exporter pages (``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu="0",...} 3``), field dumps and
tables that name the fields (``DCGM_FI_DEV_ROW_REMAP_PENDING: 1``, markdown ``| DCGM_FI_... | 0 |``) and
``dcgmi dmon -e`` tables (columns by the fields' short tags: ESVTL, EDVTL, ...).

What the ECC / retirement / row-remap / Xid / NVLink fields say per GPU: uncorrectable (DBE) counts, a
pending or failed remap, pending retirement → gpu-memory; the last Xid → the Xid catalogue; NVLink error
counters → nvlink. Zero everywhere → a benign reading; N/A is no value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llm_oncall.evidence import xid
from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines

VOLATILE_SBE_ALERT = 100  # as nvidia_smi.VOLATILE_CORRECTABLE_ALERT: a handful a year is normal HBM
AGGREGATE_SBE_ALERT = 1000
NVLINK_ERRORS_ALERT = 100

# field name → meaning; dmon tag → field name (dcgmlib/src/dcgm_fields.cpp short names)
FIELDS: dict[str, str] = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "dbe_volatile",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "dbe_aggregate",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "sbe_volatile",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": "sbe_aggregate",
    "DCGM_FI_DEV_RETIRED_DBE": "retired_dbe",
    "DCGM_FI_DEV_RETIRED_SBE": "retired_sbe",
    "DCGM_FI_DEV_RETIRED_PENDING": "retired_pending",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "remapped_uncorrectable",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "remapped_correctable",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "remap_failure",
    "DCGM_FI_DEV_ROW_REMAP_PENDING": "remap_pending",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
    # the names DCGM 4 gives fields 390-395 (dcgm_fields.h keeps the older ones above as aliases)
    "DCGM_FI_DEV_PAGE_RETIRED_SBE_TOTAL": "retired_sbe",
    "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL": "retired_dbe",
    "DCGM_FI_DEV_PAGE_RETIRED_PENDING": "retired_pending",
    "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL": "remapped_uncorrectable",
    "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL": "remapped_correctable",
    "DCGM_FI_DEV_ROW_REMAP_FAILED": "remap_failure",
}
DMON_TAGS: dict[str, str] = {
    "EDVTL": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "EDATL": "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "ESVTL": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "ESATL": "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "RPDBE": "DCGM_FI_DEV_RETIRED_DBE",
    "RPPEN": "DCGM_FI_DEV_RETIRED_PENDING",
    "URMPS": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "CRMPS": "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "RRF": "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "RRP": "DCGM_FI_DEV_ROW_REMAP_PENDING",
}
_NVLINK_ERR = re.compile(r"^DCGM_FI_DEV_NVLINK_(?:\w*ERROR\w*|COUNT_LINK_RECOVERY_FAILED\w*|COUNT_TX_DISCARDS\w*)$")
_NVLINK_SKIP = re.compile(r"BER|THROUGHPUT|BANDWIDTH|SUCCESSFUL|_BYTES|_PACKETS$")

_EXPO = re.compile(r"^(?P<name>DCGM_FI_[A-Z0-9_]{2,80})(?:\{(?P<labels>[^}]{0,2000})\})?\s+(?P<value>\S{1,40})")
# A field named in prose or a table: "DCGM_FI_DEV_ROW_REMAP_PENDING: 1", "| `DCGM_FI_..._TOTAL` | 54,731,746,511 |"
_INLINE = re.compile(r"(?P<name>DCGM_FI_[A-Z0-9_]{2,80})[`'\"*]{0,2}\s{0,8}(?:[:=|]|\s)[\s`'\"*|]{0,8}"
                     r"(?P<value>-?\d{1,3}(?:,\d{3}){1,6}|-?\d{1,20}(?:\.\d{1,6})?(?:[eE][+-]?\d{1,3})?|N/A)(?![\w.])")
_GPU_LABEL = re.compile(r'\bgpu="(?P<gpu>[^"]{1,40})"')
_DMON_ROW = re.compile(r"^\s{0,4}(?P<entity>GPU|GPU-I|GPU-CI)\s{1,8}(?P<id>\d{1,4})\s+(?P<rest>.{0,4000})$")


@dataclass
class _Gpu:
    values: dict[str, float] = field(default_factory=dict)
    nvlink: dict[str, float] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)


def _num(value: str) -> float | None:
    try:
        v = float(value)
    except ValueError:
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) else None


def _record(gpus: dict[str, _Gpu], gpu: str, name: str, value: float, line: int) -> bool:
    g = gpus.setdefault(gpu, _Gpu())
    meaning = FIELDS.get(name)
    if meaning is not None:
        # A page can repeat a field (several scrapes pasted): keep the largest, counters only grow.
        g.values[meaning] = max(value, g.values.get(meaning, value))
        if value:
            g.lines.append(line)
        return True
    if _NVLINK_ERR.match(name) and not _NVLINK_SKIP.search(name):
        short = name.removeprefix("DCGM_FI_DEV_NVLINK_").lower()
        g.nvlink[short] = max(value, g.nvlink.get(short, value))
        if value:
            g.lines.append(line)
        return True
    return False


def _read(lines: tuple[str, ...]) -> tuple[dict[str, _Gpu], int]:
    gpus: dict[str, _Gpu] = {}
    relevant = 0
    columns: list[str] = []
    for i, line in enumerate(lines):
        if "DCGM_FI_" in line:
            m = _EXPO.match(line.strip())
            if m:
                v = _num(m.group("value"))
                g = _GPU_LABEL.search(m.group("labels") or "")
                if v is not None and _record(gpus, g.group("gpu") if g else "?", m.group("name"), v, i):
                    relevant += 1
                continue
            for mi in _INLINE.finditer(line):
                v = _num(mi.group("value").replace(",", ""))
                if v is not None and _record(gpus, "?", mi.group("name"), v, i):
                    relevant += 1
            continue
        stripped = line.strip()
        if stripped.startswith("#Entity"):
            columns = [DMON_TAGS.get(t, "") for t in stripped.split()[1:]]
            continue
        if columns:
            r = _DMON_ROW.match(line)
            if r:
                cells = r.group("rest").split()
                for name, cell in zip(columns, cells, strict=False):
                    v = _num(cell)
                    if name and v is not None and _record(gpus, r.group("id"), name, v, i):
                        relevant += 1
    return gpus, relevant


def parse(text: str, name: str) -> Finding | None:
    if "DCGM_FI_" not in text and "#Entity" not in text:
        return None
    gpus, relevant = _read(split_lines(text))
    if not relevant:
        return None
    results: list[tuple[str, float, str, str, str | None, _Gpu]] = []  # (kind, conf, severity, category, ...)
    for gpu, g in gpus.items():
        v = g.values
        checks = [
            ("row_remap_failure", 0.9, "critical", v.get("remap_failure", 0) > 0),
            ("ecc_uncorrectable", 0.85, "critical", v.get("dbe_volatile", 0) > 0),
            ("row_remap_pending", 0.8, "critical", v.get("remap_pending", 0) > 0),
            ("page_retirement_pending", 0.75, "error", v.get("retired_pending", 0) > 0),
            ("ecc_uncorrectable", 0.65, "error", v.get("dbe_aggregate", 0) > 0 or v.get("retired_dbe", 0) > 0),
            ("ecc_correctable_storm", 0.6, "warning", v.get("sbe_volatile", 0) >= VOLATILE_SBE_ALERT
             or v.get("sbe_aggregate", 0) >= AGGREGATE_SBE_ALERT),
            ("remapped_rows_uncorrectable", 0.55, "warning", v.get("remapped_uncorrectable", 0) > 0),
        ]
        for kind, conf, sev, hit in checks:
            if hit:
                results.append((kind, conf, sev, "gpu-memory", gpu, g))
                break
        code = int(v.get("xid", 0))
        if code > 0:
            x = xid.info(code)
            if not x.node_benign and x.incident is not None:
                sev = "critical" if x.severity == "critical" else "warning"
                results.append((f"xid_{code}", 0.75 if x.severity == "critical" else 0.55, sev, x.category, gpu, g))
        nv_total = sum(g.nvlink.values())
        if nv_total > 0:
            strong = nv_total >= NVLINK_ERRORS_ALERT or any(
                "recovery_failed" in k or "recovery_error" in k for k, val in g.nvlink.items() if val)
            results.append(("nvlink_errors", 0.6 if strong else 0.35, "error" if strong else "warning", "nvlink",
                            gpu, g))
    base = {"gpus": {gpu: compact({**g.values, **{f"nvlink_{k}": val for k, val in g.nvlink.items()}})
                     for gpu, g in list(gpus.items())[:16]}, "fields_read": relevant}
    if not results:
        return Finding(name, "dcgm_fields_clean", True, None, 0.6, base, (), "dcgm_fields", severity="info",
                       category="benign")
    rank = {"critical": 3, "error": 2, "warning": 1}
    kind, conf, sev, category, _gpu, _g = max(results, key=lambda r: (rank[r[2]], r[1]))
    hint = {"gpu-memory": "gpu-ecc", "gpu-hardware": "gpu-ecc", "nvlink": "engine-hang"}.get(category)
    bad = sorted({r[4] or "?" for r in results if r[0] == kind})
    facts = {**base, "bad_gpus": bad, "findings": sorted({r[0] for r in results})}
    if kind == "xid_" + str(int(_g.values.get("xid", 0))):
        facts["xid"] = int(_g.values["xid"])
    lines = [i for r in results for i in r[5].lines]
    return Finding(name, kind, False, hint, conf, facts, line_numbers(lines), "dcgm_fields", severity=sev,
                   category=category)
