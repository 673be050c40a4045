"""Per-GPU signals from dcgm-exporter pages: ECC, row remapping, last Xid, NVLink errors, utilisation.

A field the exporter does not export (ECC and NVLink are off in its default CSV) is unknown
(None), never zero.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from llm_oncall.signals.catalog import BY_KEY
from llm_oncall.signals.exposition import Page
from llm_oncall.signals.series import Scrape, TargetSeries, counter_increase, gauge, vector


def json_safe(d: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN/Infinity: turn them into null."""
    for k, v in d.items():
        if isinstance(v, float) and not math.isfinite(v):
            d[k] = None
    return d


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    node: str
    gpu: str
    uuid: str | None
    pod: str | None
    util_percent: float | None = None
    xid_last: float | None = None
    xid_changed: bool = False
    ecc_sbe_volatile: float | None = None
    ecc_sbe_increase: float | None = None
    ecc_dbe_volatile: float | None = None
    ecc_dbe_increase: float | None = None
    remapped_rows_uncorrectable: float | None = None
    remapped_rows_correctable: float | None = None
    row_remap_failure: float | None = None
    row_remap_pending: float | None = None
    nvlink_crc_increase: float | None = None
    nvlink_replay_increase: float | None = None
    nvlink_recovery_increase: float | None = None

    def to_json(self) -> dict[str, Any]:
        return json_safe(asdict(self))



_BY_GPU = "by-gpu"


def _by_gpu(page: Page) -> dict[str, Page]:
    """The page's samples split by their `gpu` label (samples without one belong to no GPU); read-only: the split
    is kept in the page's memo, so each GPU's sub-page (and what readers derive from it, in its own memo) is
    built once however many windows the page falls in."""
    hit: dict[str, Page] | None = page.memo.get(_BY_GPU)
    if hit is not None:
        return hit
    out: dict[str, Page] = {}
    for name, samples in page.samples.items():
        for sample in samples:
            for key, gpu in sample.labels:
                if key == "gpu":
                    out.setdefault(gpu, Page()).samples.setdefault(name, []).append(sample)
                    break
    page.memo[_BY_GPU] = out
    return out


def gpu_snapshots(series: TargetSeries, end: float, window_s: float) -> list[GpuSnapshot]:
    """One GpuSnapshot per GPU on a dcgm-exporter page; absent fields stay unknown (None)."""
    latest = series.latest_ok(end)
    if latest is None or latest.page is None:
        return []
    page = latest.page
    scrapes = series.ok_in_window(end - window_s, end)
    node = series.labels.get("node", series.name)
    gpus: dict[str, dict[str, str]] = {}
    for sig in (BY_KEY["gpu_util"], BY_KEY["xid_last"], BY_KEY["remapped_rows_uncorrectable"]):
        vec = vector(page, sig)
        for labels in vec or {}:
            d = dict(labels)
            gpus.setdefault(d.get("gpu", "?"), d)
    # Each page split once by GPU: reading a GPU's fields from its own sub-page is the same as matching
    # `gpu="<id>"` on the whole page, without scanning every GPU's samples for each GPU.
    latest_by_gpu = _by_gpu(page)
    window_by_gpu = [(s.t, _by_gpu(s.page)) for s in scrapes if s.page is not None]
    out: list[GpuSnapshot] = []
    for gpu_id, ident in sorted(gpus.items(), key=lambda kv: (len(kv[0]), kv[0])):
        own = latest_by_gpu.get(gpu_id, Page())
        own_scrapes = [Scrape(t, split.get(gpu_id, Page())) for t, split in window_by_gpu]

        def g(key: str, own: Page = own) -> float | None:
            return gauge(own, BY_KEY[key])

        def inc(key: str, own: Page = own, own_scrapes: list[Scrape] = own_scrapes) -> float | None:
            # A field this GPU does not report (or reports as a DCGM sentinel) is unknown,
            # even when a sibling GPU on the same page has it.
            if gauge(own, BY_KEY[key]) is None:
                return None
            return counter_increase(own_scrapes, BY_KEY[key])

        xids = [x for s in own_scrapes if s.page is not None
                and (x := gauge(s.page, BY_KEY["xid_last"])) is not None]
        out.append(GpuSnapshot(
            node=ident.get("Hostname") or ident.get("hostname") or node,
            gpu=gpu_id,
            uuid=ident.get("UUID") or ident.get("uuid"),
            pod=ident.get("pod") or ident.get("pod_name") or None,
            util_percent=g("gpu_util"),
            xid_last=g("xid_last"),
            xid_changed=len(set(xids)) > 1,
            ecc_sbe_volatile=g("ecc_sbe_volatile"),
            ecc_sbe_increase=inc("ecc_sbe_volatile"),
            ecc_dbe_volatile=g("ecc_dbe_volatile"),
            ecc_dbe_increase=inc("ecc_dbe_volatile"),
            remapped_rows_uncorrectable=g("remapped_rows_uncorrectable"),
            remapped_rows_correctable=g("remapped_rows_correctable"),
            row_remap_failure=g("row_remap_failure"),
            row_remap_pending=g("row_remap_pending"),
            nvlink_crc_increase=inc("nvlink_crc_errors"),
            nvlink_replay_increase=inc("nvlink_replay_errors"),
            nvlink_recovery_increase=inc("nvlink_recovery_errors"),
        ))
    return out
