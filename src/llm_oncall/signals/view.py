"""Rich rendering of a Snapshot: the fleet line and one row per pod."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from llm_oncall.signals.snapshot import Snapshot


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


_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("running", "run", "num"),
    ("waiting", "wait", "num"),
    ("kv_usage", "KV", "pct"),
    ("preemptions_per_s", "preempt/s", "rate"),
    ("requests_per_s", "req/s", "rate"),
    ("generation_tokens_per_s", "gen tok/s", "rate"),
    ("prefix_hit_rate", "prefix hit", "pct"),
    ("ttft_p99", "TTFT p99", "s"),
    ("itl_p99", "ITL p99", "s"),
    ("e2e_p99", "e2e p99", "s"),
    ("prompt_len_p99", "prompt p99", "num"),
)


def snapshot_table(snap: Snapshot) -> RenderableType:
    table = Table(title=f"Snapshot at t={snap.t:.1f}s (window {snap.window_s:.0f}s)", title_justify="left")
    table.add_column("pod")
    for _, header, _ in _COLUMNS:
        table.add_column(header, justify="right")
    table.add_column("restarts", justify="right")
    table.add_column("scrape")
    fleet = snap.fleet
    table.add_row(Text("FLEET", style="bold"), *[fmt(getattr(fleet, "kv_usage_max" if k == "kv_usage" else k, None), f)
                                                 for k, _, f in _COLUMNS],
                  str(fleet.restarts), f"{fleet.pods_up}/{fleet.pods_total} up", end_section=True)
    for pod in snap.pods:
        status = "ok" if pod.up else Text(f"down: {pod.error}", style="red")
        table.add_row(pod.name, *[fmt(getattr(pod, k), f) for k, _, f in _COLUMNS],
                      str(pod.restarts), status)
    parts: list[RenderableType] = [table]
    if snap.gpus:
        gpus = Table(title="GPUs (dcgm-exporter)", title_justify="left")
        for col in ("node", "gpu", "pod", "util", "xid", "SBE Δ", "DBE Δ", "remap pend/fail", "NVLink CRC Δ"):
            gpus.add_column(col)
        for g in snap.gpus:
            gpus.add_row(g.node, g.gpu, g.pod or "–", fmt(g.util_percent), fmt(g.xid_last),
                         fmt(g.ecc_sbe_increase), fmt(g.ecc_dbe_increase),
                         f"{fmt(g.row_remap_pending)}/{fmt(g.row_remap_failure)}", fmt(g.nvlink_crc_increase))
        parts.append(gpus)
    if snap.events:
        ev = Table(title="Events", title_justify="left")
        ev.add_column("t", justify="right")
        ev.add_column("kind")
        ev.add_column("detail")
        for e in snap.events[-10:]:
            ev.add_row(f"{e.t:.0f}", e.kind, Text(e.detail))
        parts.append(ev)
    return Group(*parts)
