"""nvidia-smi output: ``-q`` (ECC, retired pages, remapped rows) as text or ``-x`` XML, the default summary
table, and ``nvidia-smi nvlink -e`` error counters."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from llm_oncall.evidence import nvsmi_xml
from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines, to_int

_GPU_HEADER = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_BUS_ID = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]")
_NVLINK_GPU = re.compile(r"^GPU (?P<idx>\d{1,3}): (?P<model>[^(]{1,80}?)\s*\(UUID")
_NVLINK_ERR = re.compile(r"^\s+Link (?P<link>\d{1,3}): (?P<what>[A-Za-z ]{1,40}?) Errors?: (?P<val>\S{1,24})")
# nvidia-smi nvlink -s: "\t Link 0: 26.562 GB/s" or "\t Link 1: <inactive>"
_NVLINK_STATE = re.compile(r"^\s+Link (?P<link>\d{1,3}): (?P<state><inactive>|[\d.]{1,12} ?[GM]B/s)\s*$")

# Volatile correctable counts above these mean the GPU is degrading even with zero uncorrectable errors:
# healthy HBM sees a handful of corrected bits per year, not thousands since the last driver load.
VOLATILE_CORRECTABLE_ALERT = 100
AGGREGATE_CORRECTABLE_ALERT = 1000
NVLINK_ERRORS_ALERT = 100


@dataclass
class GpuEcc:
    gpu: str
    volatile_correctable: int = 0
    volatile_uncorrectable: int = 0
    aggregate_correctable: int = 0
    aggregate_uncorrectable: int = 0
    retired_sbe: int = 0
    retired_dbe: int = 0
    retirement_pending: bool = False
    remapped_correctable: int = 0
    remapped_uncorrectable: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    sram_threshold_exceeded: bool = False
    ecc_disabled: bool = False
    fields: int = 0
    lines: list[int] = field(default_factory=list)

    def facts(self) -> dict[str, object]:
        skip = {"lines", "fields"}
        return {k: v for k, v in self.__dict__.items() if k not in skip and v not in (0, False)} | {"gpu": self.gpu}


def _yes(value: str) -> bool:
    return value.strip().lower() in {"yes", "true", "1"}


def _notable(value: str) -> bool:
    return bool(to_int(value)) or _yes(value)


def _apply(g: GpuEcc, path: str, value: str) -> bool:
    """Fold one ``section/.../key = value`` pair into g; True when it is an ECC-relevant field."""
    p = path.lower().replace(" ", "_").replace("-", "_")
    n = to_int(value) or 0
    scope = "volatile" if "/volatile/" in f"/{p}/" else "aggregate" if "/aggregate/" in f"/{p}/" else ""
    if "/" not in p and _GREPPED_LEAF.match(path.strip()) and "bit" not in p:
        p, scope = f"ecc_errors/aggregate/{p}", "aggregate"  # a grep kept the leaf, not its section
    if p.startswith("ecc_errors/") and scope:
        leaf = p.rsplit("/", 1)[-1]
        old_style = "/single_bit/" in p or "/double_bit/" in p
        if leaf == "sram_threshold_exceeded":
            g.sram_threshold_exceeded |= _yes(value)
        elif old_style and leaf != "total":
            return False  # per-location rows are already summed in the "Total" row
        elif "uncorrectable" in leaf or "/double_bit/" in p:
            setattr(g, f"{scope}_uncorrectable", getattr(g, f"{scope}_uncorrectable") + n)
        elif "correctable" in leaf or "/single_bit/" in p:
            setattr(g, f"{scope}_correctable", getattr(g, f"{scope}_correctable") + n)
        else:
            return False
        return True
    if p.startswith("ecc_mode/current"):
        g.ecc_disabled = value.strip().lower() == "disabled"
        return True
    if p.startswith("retired_pages/"):
        if "pending" in p:
            g.retirement_pending |= _yes(value)
        elif "single_bit" in p and (p.endswith("retired_count") or p.endswith("single_bit_ecc")):
            g.retired_sbe += n
        elif "double_bit" in p and (p.endswith("retired_count") or p.endswith("double_bit_ecc")):
            g.retired_dbe += n
        else:
            return False
        return True
    if p.startswith("remapped_rows/"):
        leaf = p.rsplit("/", 1)[-1]
        if leaf.endswith("pending"):
            g.remap_pending |= _yes(value)
        elif "fail" in leaf:
            g.remap_failure |= _yes(value)
        elif leaf in {"correctable_error", "remapped_row_corr"}:
            g.remapped_correctable += n
        elif leaf in {"uncorrectable_error", "remapped_row_unc"}:
            g.remapped_uncorrectable += n
        else:
            return False
        return True
    return False


# Sections of `nvidia-smi -q` a user pastes on their own (without the "GPU 0000..." header), and leaf names
# that survive a `nvidia-smi -q | grep -i correctable`.
_SECTIONS = frozenset({"ecc errors", "remapped rows", "retired pages", "ecc mode", "page retirement"})
_GREPPED_LEAF = re.compile(r"^(?:sram|dram)? ?(?:un)?correctable\b|^(?:single|double) bit ecc$", re.I)


def _query_text(lines: tuple[str, ...]) -> list[GpuEcc]:
    out: list[GpuEcc] = []
    g: GpuEcc | None = None
    stack: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = _GPU_HEADER.match(line)
        if m:
            g = GpuEcc(m.group("bus"))
            out.append(g)
            stack = []
            continue
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        key0, sep0, value0 = line.strip().partition(":")
        if (g is None or g.gpu == "?") and (
                (key0.strip().lower() in _SECTIONS and not value0.strip())
                or (g is None and sep0 and value0.strip() and _GREPPED_LEAF.match(key0.strip()))):
            if g is None:
                g = GpuEcc("?")  # an excerpt: one GPU, unnamed
                out.append(g)
            if indent == 0:
                indent = 1
        if g is None:
            continue
        if indent == 0:
            g = None  # back at top level: a new command's output or unrelated text
            continue
        key, sep, value = line.strip().partition(":")
        key = key.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if not sep or not value.strip():
            stack.append((indent, key))
            continue
        path = "/".join([s for _, s in stack] + [key])
        if _apply(g, path, value):
            g.fields += 1
            if _notable(value):
                g.lines.append(i)
    return out


def _query_xml(text: str) -> list[GpuEcc]:
    out: list[GpuEcc] = []
    for gpu, leaves in nvsmi_xml.gpus(text).items():
        g = GpuEcc(gpu)
        for path, (value, line) in leaves.items():
            if _apply(g, path, value):
                g.fields += 1
                if _notable(value):
                    g.lines.append(line)
        out.append(g)
    return out


def _summary(lines: tuple[str, ...]) -> tuple[list[tuple[str, str]], list[int]]:
    """(bus id, "Volatile Uncorr. ECC" cell) per GPU row of the default nvidia-smi table."""
    if not any("Uncorr. ECC" in line for line in lines):
        return [], []
    rows: list[tuple[str, str]] = []
    idx: list[int] = []
    for i, line in enumerate(lines):
        if not line.startswith("|") or line.count("|") < 4:
            continue
        cells = line.split("|")
        first = cells[1].strip().split(" ", 1)[0]
        bus = _BUS_ID.search(cells[2])
        if first.isdigit() and bus:
            rows.append((bus.group(0), cells[3].strip()))
            idx.append(i)
    return rows, idx


def _link_lines(lines: tuple[str, ...]) -> Iterator[tuple[int, str, str]]:
    """(index, GPU index, line) for the lines under a `GPU N: <model> (UUID: ...)` header of nvidia-smi nvlink."""
    gpu = ""
    for i, line in enumerate(lines):
        m = _NVLINK_GPU.match(line)
        if m:
            gpu = m.group("idx")
        elif gpu:
            yield i, gpu, line


def _nvlink(lines: tuple[str, ...]) -> tuple[dict[str, dict[str, int]], list[int]]:
    out: dict[str, dict[str, int]] = {}
    idx: list[int] = []
    for i, gpu, line in _link_lines(lines):
        e = _NVLINK_ERR.match(line)
        if e:
            n = to_int(e.group("val"))
            what = e.group("what").strip().lower().replace(" ", "_")
            per = out.setdefault(gpu, {})
            per[what] = per.get(what, 0) + (n or 0)
            if n:
                idx.append(i)
    return out, idx


# Words without which no nvidia-smi reading applies: a cheap exit for every other file.
_MARKERS = ("ECC", "Remapped", "Retired", "retired", "Link ", "nvidia_smi_log", "Uncorr", "ecc.errors",
            "remapped_rows", "correctable", "Correctable")


def parse(text: str, name: str) -> Finding | None:
    if not any(m in text for m in _MARKERS):
        return None
    lines = split_lines(text)
    ecc = _query_xml(text) if nvsmi_xml.is_nvsmi_xml(text) else _query_text(lines) + _query_csv(lines)
    summary, summary_idx = _summary(lines)
    nvlink, nvlink_idx = _nvlink(lines)
    ecc_finding = _ecc_finding(name, ecc, summary, summary_idx)
    nvlink_finding = _nvlink_finding(name, nvlink, nvlink_idx) if nvlink else None
    states_finding = _link_states_finding(name, lines)
    candidates = [f for f in (ecc_finding, nvlink_finding, states_finding) if f is not None]
    if not candidates:
        return None
    return max(candidates, key=lambda f: (not f.benign, f.confidence))


def _ecc_finding(
    name: str, gpus: list[GpuEcc], summary: list[tuple[str, str]], summary_idx: list[int]
) -> Finding | None:
    gpus = [g for g in gpus if g.fields]
    if not gpus and not summary:
        return None
    summary_bad = [(bus, cell) for bus, cell in summary if (to_int(cell) or 0) > 0]
    facts: dict[str, object] = {}
    if summary:
        facts["summary_volatile_uncorr_ecc"] = {bus: cell for bus, cell in summary}
    kind, confidence, hint = "ecc_clean", 0.85 if gpus else 0.5, None
    bad: list[GpuEcc] = []
    rules: list[tuple[str, float, bool]] = []
    for g in gpus:
        checks = [
            ("row_remap_failure", 0.9, g.remap_failure),
            ("ecc_uncorrectable", 0.85, g.volatile_uncorrectable > 0),
            ("row_remap_pending", 0.8, g.remap_pending),
            ("page_retirement_pending", 0.75, g.retirement_pending),
            ("ecc_correctable_storm", 0.65, g.sram_threshold_exceeded),
            ("ecc_uncorrectable", 0.65, g.aggregate_uncorrectable > 0 or g.retired_dbe > 0),
            (
                "ecc_correctable_storm",
                0.6,
                g.volatile_correctable >= VOLATILE_CORRECTABLE_ALERT
                or g.aggregate_correctable >= AGGREGATE_CORRECTABLE_ALERT,
            ),
            # Rows already remapped after uncorrectable errors: repaired, but the GPU did return bad data.
            ("remapped_rows_uncorrectable", 0.55, g.remapped_uncorrectable > 0),
        ]
        hit = [(k, c, True) for k, c, cond in checks if cond]
        if hit:
            bad.append(g)
            rules.extend(hit)
    if summary_bad and not bad:
        rules.append(("ecc_uncorrectable", 0.75, True))
    if rules:
        kind, confidence, _ = max(rules, key=lambda r: r[1])
        hint = "gpu-ecc"
        facts["gpus"] = [compact(g.facts()) for g in bad][:16]
        if summary_bad:
            facts["summary_nonzero"] = [bus for bus, _ in summary_bad]
        if summary and not summary_bad and bad:
            # The table's one ECC column is volatile *uncorrectable* only; pending remaps, retirements and
            # correctable storms never show there.
            facts["summary_hides_fault"] = True
        if kind == "ecc_correctable_storm" and not any(
            g.volatile_uncorrectable or g.aggregate_uncorrectable for g in bad
        ):
            facts["reading"] = "correctable errors at this rate mean failing HBM even with zero uncorrectable"
        if kind in ("row_remap_pending", "page_retirement_pending"):
            facts["action"] = "drain and reset the GPU to apply the remap; cordon the node until then"
    else:
        corr = sum(g.volatile_correctable + g.aggregate_correctable for g in gpus)
        if corr:
            kind, confidence = "ecc_correctable_low", 0.5
            facts["correctable_total"] = corr
            facts["reading"] = "a few corrected bits are normal; watch the rate"
        if not gpus:
            kind = "nvidia_smi_summary"
            facts["note"] = "the summary shows volatile uncorrectable ECC only; run nvidia-smi -q -d ECC,ROW_REMAPPER"
        facts["gpus_checked"] = len(gpus)
        if any(g.ecc_disabled for g in gpus):
            facts["ecc_disabled_on"] = [g.gpu for g in gpus if g.ecc_disabled]
    lines = [i for g in (bad or gpus) for i in g.lines] + summary_idx
    return Finding(
        file=name,
        kind=kind,
        benign=hint is None,
        incident_hint=hint,
        confidence=confidence,
        facts=facts,
        lines=line_numbers(lines),
        parser="nvidia_smi",
        severity="info" if hint is None else _SEVERITY.get((kind, confidence), _SEVERITY.get((kind, 0.0), "error")),
        category="benign" if hint is None else "gpu-memory",
    )


_SEVERITY = {
    ("row_remap_failure", 0.0): "critical",
    ("ecc_uncorrectable", 0.85): "critical",
    ("ecc_uncorrectable", 0.75): "critical",
    ("ecc_uncorrectable", 0.0): "error",
    ("row_remap_pending", 0.0): "critical",
    ("page_retirement_pending", 0.0): "error",
    ("ecc_correctable_storm", 0.0): "warning",
    ("remapped_rows_uncorrectable", 0.0): "warning",
}


def _nvlink_finding(name: str, per_gpu: dict[str, dict[str, int]], idx: list[int]) -> Finding:
    nonzero = {gpu: {k: v for k, v in errs.items() if v} for gpu, errs in per_gpu.items()}
    nonzero = {gpu: errs for gpu, errs in nonzero.items() if errs}
    if not nonzero:
        return Finding(
            file=name,
            kind="nvlink_clean",
            benign=True,
            incident_hint=None,
            confidence=0.8,
            facts={"gpus_checked": len(per_gpu)},
            parser="nvidia_smi",
            severity="info",
            category="benign",
        )
    total = sum(sum(e.values()) for e in nonzero.values())
    recovery = sum(e.get("recovery", 0) for e in nonzero.values())
    strong = recovery > 0 or total >= NVLINK_ERRORS_ALERT
    return Finding(
        file=name,
        kind="nvlink_errors",
        benign=False,
        incident_hint="engine-hang",
        confidence=0.6 if strong else 0.35,
        facts={
            "errors_by_gpu": nonzero,
            "total": total,
            "recovery_errors": recovery,
            "reading": "NVLink errors stall tensor-parallel collectives; compare a second reading for growth",
        },
        lines=line_numbers(idx),
        parser="nvidia_smi",
        severity="error" if strong else "warning",
        category="nvlink",
    )


# ---- nvidia-smi --query-gpu=... --format=csv ------------------------------------------------------------
_CSV_FIELDS = (
    ("ecc.errors.uncorrected.volatile", "volatile_uncorrectable"),
    ("ecc.errors.uncorrected.aggregate", "aggregate_uncorrectable"),
    ("ecc.errors.corrected.volatile", "volatile_correctable"),
    ("ecc.errors.corrected.aggregate", "aggregate_correctable"),
    ("retired_pages.double_bit", "retired_dbe"),
    ("retired_pages.dbe", "retired_dbe"),
    ("retired_pages.single_bit", "retired_sbe"),
    ("retired_pages.sbe", "retired_sbe"),
    ("retired_pages.pending", "retirement_pending"),
    ("remapped_rows.uncorrectable", "remapped_uncorrectable"),
    ("remapped_rows.correctable", "remapped_correctable"),
    ("remapped_rows.pending", "remap_pending"),
    ("remapped_rows.failure", "remap_failure"),
)


def _query_csv(lines: tuple[str, ...]) -> list[GpuEcc]:
    out: list[GpuEcc] = []
    if not any(("ecc.errors" in ln or "retired_pages" in ln or "remapped_rows" in ln) for ln in lines):
        return out
    columns: list[str | None] = []
    bus_col: int | None = None
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.split(",")]
        lowered = [c.lower().split(" [", 1)[0] for c in cells]
        if any(c.startswith(("ecc.errors", "retired_pages", "remapped_rows")) for c in lowered):
            columns = [next((f for prefix, f in _CSV_FIELDS if c.startswith(prefix)), None) for c in lowered]
            bus_col = next((k for k, c in enumerate(lowered) if c in ("pci.bus_id", "gpu_bus_id")), None)
            continue
        if not columns or len(cells) != len(columns):
            continue
        g = GpuEcc(cells[bus_col] if bus_col is not None else f"gpu{len(out)}")
        for cell, fname in zip(cells, columns, strict=True):
            if fname is None:
                continue
            g.fields += 1
            if fname in ("retirement_pending", "remap_pending", "remap_failure"):
                setattr(g, fname, _yes(cell) or (to_int(cell) or 0) > 0)
            else:
                setattr(g, fname, to_int(cell) or 0)
            if _notable(cell):
                g.lines.append(i)
        out.append(g)
    return out


def _link_states_finding(name: str, lines: tuple[str, ...]) -> Finding | None:
    """nvidia-smi nvlink -s: a link that is down carries no traffic; TP collectives fall back or stall."""
    states: dict[str, dict[str, bool]] = {}
    idx: list[int] = []
    for i, gpu, line in _link_lines(lines):
        st = _NVLINK_STATE.match(line)
        if st:
            up = st.group("state") != "<inactive>"
            states.setdefault(gpu, {})[st.group("link")] = up
            if not up:
                idx.append(i)
    if not states:
        return None
    down = {g: sorted((k for k, up in links.items() if not up), key=int) for g, links in states.items()}
    down = {g: ks for g, ks in down.items() if ks}
    facts: dict[str, object] = {"gpus_checked": len(states), "links_down": down}
    if not down:
        return Finding(name, "nvlink_links_up", True, None, 0.7, facts, (), "nvidia_smi", severity="info",
                       category="benign")
    partial = any(any(states[g].values()) for g in down)
    facts["reading"] = ("some NVLinks of a GPU are down while others are up" if partial else
                        "every NVLink of these GPUs is inactive (fabric manager down, or the links failed)")
    return Finding(name, "nvlink_links_down", False, "engine-hang", 0.55 if partial else 0.45, facts,
                   line_numbers(idx), "nvidia_smi", severity="warning", category="nvlink")
