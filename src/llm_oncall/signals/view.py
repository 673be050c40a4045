"""Rich rendering of a Snapshot: the fleet line and one row per pod."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from llm_oncall.signals.snapshot import Snapshot
from llm_oncall.termtable import Column, FitTable


def fmt(value: float | None, kind: str = "num") -> str:
    if value is None:
        return "–"
    if kind == "pct":
        return f"{value * 100:.0f}%"
    if kind == "s":
        return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"
    if kind == "rate":
        return f"{value:.2f}" if value < 10 else f"{value:.0f}"
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2f}"


_COLUMNS: tuple[tuple[str, str, str, int], ...] = (
    # (attribute, header, format, priority: 0 always shown, higher leaves a narrow table first)
    ("running", "run", "num", 0),
    ("waiting", "wait", "num", 0),
    ("kv_usage", "KV", "pct", 0),
    ("preemptions_per_s", "preempt/s", "rate", 1),
    ("requests_per_s", "req/s", "rate", 0),
    ("generation_tokens_per_s", "gen tok/s", "rate", 3),
    ("prefix_hit_rate", "prefix hit", "pct", 2),
    ("ttft_p99", "TTFT p99", "s", 0),
    ("itl_p99", "ITL p99", "s", 2),
    ("e2e_p99", "e2e p99", "s", 4),
    ("prompt_len_p99", "prompt p99", "num", 3),
)


def snapshot_table(snap: Snapshot) -> RenderableType:
    """The fleet row, then one row per pod; numbers that do not fit the width are left out (noted), a pod's scrape
    error goes below its row."""
    cols = [Column("pod", no_wrap=True)]
    cols += [Column(header, justify="right", no_wrap=True, priority=prio, stack=False)
             for _, header, _, prio in _COLUMNS]
    cols += [Column("restarts", justify="right", no_wrap=True, priority=2, stack=False),
             Column("scrape", min_width=12, priority=1, quiet=("ok",))]
    table = FitTable(*cols, title=f"Snapshot at t={snap.t:.1f}s (window {snap.window_s:.0f}s)")
    fleet = snap.fleet
    table.add_row(Text("FLEET", style="bold"), *[fmt(getattr(fleet, "kv_usage_max" if k == "kv_usage" else k, None), f)
                                                 for k, _, f, _ in _COLUMNS],
                  str(fleet.restarts), f"{fleet.pods_up}/{fleet.pods_total} up")
    for pod in snap.pods:
        status = "ok" if pod.up else Text(f"down: {pod.error}", style="red")
        table.add_row(pod.name, *[fmt(getattr(pod, k), f) for k, _, f, _ in _COLUMNS], str(pod.restarts), status)
    parts: list[RenderableType] = [table]
    if snap.gpus:
        def num(header: str, priority: int) -> Column:
            return Column(header, justify="right", no_wrap=True, priority=priority, stack=False)
        gpus = FitTable(Column("node", no_wrap=True), Column("gpu", no_wrap=True), Column("pod", no_wrap=True,
                                                                                         priority=2),
                        num("util", 1), num("xid", 0), num("SBE Δ", 0), num("DBE Δ", 0),
                        num("remap pend/fail", 1), num("NVLink CRC Δ", 1), title="GPUs (dcgm-exporter)")
        for g in snap.gpus:
            gpus.add_row(g.node, g.gpu, g.pod or "–", fmt(g.util_percent), fmt(g.xid_last),
                         fmt(g.ecc_sbe_increase), fmt(g.ecc_dbe_increase),
                         f"{fmt(g.row_remap_pending)}/{fmt(g.row_remap_failure)}", fmt(g.nvlink_crc_increase))
        parts.append(gpus)
    if snap.events:
        ev = FitTable(Column("t", justify="right", no_wrap=True), Column("kind", no_wrap=True),
                      Column("detail", min_width=30), title="Events")
        for e in snap.events[-10:]:
            ev.add_row(f"{e.t:.0f}", e.kind, Text(e.detail))
        parts.append(ev)
    return Group(*parts)
