"""Charts of the incident window (matplotlib, Agg, PNG): the golden signals that matter for the incident, and per-pod
small multiples when the scope is a pod or a node; vertical marks at the first symptom, the page, each executed
action and the recovery.

Every chart reports where it drew its marks (pixel columns of the PNG, left = 0) so a test can look for the marks'
colours there.  Figures are saved at their own size (no tight bounding box), which keeps those columns exact.
Labels stay in English: a CJK font is not guaranteed on the machines that render them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MultipleLocator

from llm_oncall.postmortem.build import Chart
from llm_oncall.postmortem.i18n import tr
from llm_oncall.postmortem.moments import Moments
from llm_oncall.postmortem.record import Record
from llm_oncall.runbooks.loader import load_registry

MARK_COLOURS = {"onset": "#d62728", "detection": "#ff7f0e", "action": "#9467bd", "recovery": "#2ca02c"}
LAYER = {"action": 0, "recovery": 1, "detection": 2, "onset": 3}
"""Top first.  Marks at the same time (the page and the action in the same scrape) are all seen: a mark lower in
the stack is drawn wider by 4 pt for every mark above it at that time, so it shows as a band around them."""
MARK_PT = 2.0
LINE = "#1f3b57"
DPI = 100
COMMON = ("ttft_p99", "arrival_rate", "error_share")


def _runbook_charts(kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The incident's runbook says what to draw (`charts:`): its fleet panels and its per-pod signals."""
    rb = load_registry().get(kind)
    if rb is None or rb.charts is None:
        return COMMON, ("ttft_p99",)
    return tuple(rb.charts.fleet), tuple(rb.charts.pods) or ("ttft_p99",)


MAX_PODS = 8
EVIDENCE_PANELS = 2


def panels(rec: Record) -> list[tuple[str, list[tuple[float, float]]]]:
    """The incident's golden signals, then up to two more that its evidence names (what the page was decided on;
    not a variant of a golden one, e.g. arrival_rate_ratio), with data in the window; a flat panel is dropped
    unless it is one of the common golden signals (a flat error share says something)."""
    wanted = list(_runbook_charts(rec.kind)[0])
    evidence = [str(e.get("signal")) for e in rec.decided().get("evidence") or [] if e.get("signal")]
    extra = [sig for sig in dict.fromkeys(evidence) if not any(sig.startswith(w) for w in wanted)]
    out: list[tuple[str, list[tuple[float, float]]]] = []
    for sig in wanted + extra:
        pts = rec.series(sig)
        flat = len({v for _, v in pts}) <= 1
        if pts and not (flat and sig not in COMMON) and (sig in wanted or len(out) < len(wanted) + EVIDENCE_PANELS):
            out.append((sig, pts))
    return out


def _clock(t: float, _pos: Any = None) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M")


def _time_axis(ax: Axes, span: float) -> None:
    """Ticks on whole minutes (a label says HH:MM, so a tick between minutes would read as the minute before),
    at most about eight of them."""
    width = max(span, 60.0)
    step = next((s for s in (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600) if width / s <= 8), 43200)
    ax.xaxis.set_major_locator(MultipleLocator(step))
    ax.xaxis.set_major_formatter(FuncFormatter(_clock))


def _line(pts: list[tuple[float, float]], interval: float | None) -> tuple[list[float], list[float]]:
    """x, y with a break (NaN) where scrapes are missing (a pod down or not yet started): no line across a gap."""
    xs: list[float] = []
    ys: list[float] = []
    for (t0, _), (t1, v1) in zip([(pts[0][0], 0.0), *pts[:-1]], pts, strict=True):
        if interval and t1 - t0 > 1.5 * interval:
            xs.append((t0 + t1) / 2)
            ys.append(float("nan"))
        xs.append(t1)
        ys.append(v1)
    return xs, ys


def _label(signal: str) -> str:
    key = f"sig_{signal}"
    try:
        return tr("en", key)
    except KeyError:
        return signal


def _widths(m: Moments, span: float) -> list[float]:
    eps = max(span, 1.0) * 0.004
    marks = m.marks()
    # one band per kind of mark on top (three actions at once are one band, not three)
    return [MARK_PT + 4.0 * len({k2 for k2, t2, _ in marks if LAYER[k2] < LAYER[k] and abs(t2 - t) <= eps})
            for k, t, _ in marks]


def _marks(axes: Sequence[Axes], m: Moments, span: float) -> None:
    widths = _widths(m, span)
    for ax in axes:
        for (kind, t, _), w in zip(m.marks(), widths, strict=True):
            ax.axvline(t, color=MARK_COLOURS[kind], linewidth=w, alpha=1.0, zorder=2.0 - LAYER[kind] * 0.1)


def _positions(fig: Figure, ax: Axes, m: Moments, span: float) -> list[dict[str, Any]]:
    fig.canvas.draw()
    out = []
    for (kind, t, label), w in zip(m.marks(), _widths(m, span), strict=True):
        x, _ = ax.transData.transform((t, 0.0))
        out.append({"kind": kind, "label": label, "t": t, "x_px": round(float(x), 1), "colour": MARK_COLOURS[kind],
                    "width_px": round(w * DPI / 72.0, 1)})
    return out


def _span(rec: Record) -> float:
    ts = rec.times()
    return ts[-1] - ts[0] if len(ts) > 1 else 1.0


def _legend(fig: Figure, m: Moments) -> None:
    from matplotlib.lines import Line2D

    seen: dict[str, Line2D] = {}
    for kind, _, _ in m.marks():
        seen.setdefault(kind, Line2D([0], [0], color=MARK_COLOURS[kind], linewidth=2.0,
                                     label=tr("en", f"mark_{kind}")))
    fig.legend(handles=list(seen.values()), loc="upper right", ncol=len(seen), fontsize=8, frameon=False)


def golden(rec: Record, m: Moments, path: Path) -> Chart | None:
    """The fleet's golden signals for this incident, one panel each (those with data in the window)."""
    chosen = panels(rec)
    if not chosen:
        return None
    fig, axes = plt.subplots(len(chosen), 1, sharex=True, figsize=(9.0, 1.55 * len(chosen) + 0.9), dpi=DPI,
                             squeeze=False)
    flat: list[Axes] = [a[0] for a in axes]
    for ax, (signal, pts) in zip(flat, chosen, strict=True):
        ax.plot(*_line(pts, m.interval_s), color=LINE, linewidth=1.4, zorder=3)
        ax.set_ylabel(_label(signal), fontsize=8, rotation=0, ha="right", va="center")
        ax.tick_params(labelsize=7)
        ax.grid(True, axis="y", color="#dddddd", linewidth=0.6)
    _marks(flat, m, _span(rec))
    _time_axis(flat[-1], _span(rec))
    flat[-1].set_xlabel(tr("en", "axis_time"), fontsize=8)
    fig.suptitle(f"{rec.kind}: {tr('en', 'chart_golden')}", fontsize=10, x=0.02, ha="left")
    _legend(fig, m)
    fig.subplots_adjust(left=0.2, right=0.98, top=1.0 - 0.55 / fig.get_figheight(), bottom=0.5 / fig.get_figheight(),
                        hspace=0.15)
    marks = _positions(fig, flat[0], m, _span(rec))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return Chart(file=path.name, title=tr("en", "chart_golden"), marks=marks)


def pods(rec: Record, m: Moments, path: Path) -> Chart | None:
    """Small multiples, one per pod (the scope first, then peers), of the incident's per-pod signal."""
    scope = rec.decided().get("scope") or {}
    if not (scope.get("pods") or scope.get("nodes")):
        return None
    candidates = _runbook_charts(rec.kind)[1]
    signal = next((s for s in candidates if len({v for p in rec.scopes() for _, v in rec.series(s, p)}) > 1),
                  candidates[-1])
    have = [p for p in rec.scopes() if rec.series(signal, p)]
    in_scope = [p for p in scope.get("pods") or [] if p in have]
    chosen = (in_scope + [p for p in have if p not in in_scope])[:MAX_PODS]
    if not chosen:
        return None
    cols = min(4, len(chosen))
    rows = (len(chosen) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, sharex=True, sharey=True, figsize=(9.0, 1.9 * rows + 0.9), dpi=DPI,
                             squeeze=False)
    flat: list[Axes] = [a for row in axes for a in row]
    for ax, pod in zip(flat, chosen, strict=False):
        pts = rec.series(signal, pod)
        ax.plot(*_line(pts, m.interval_s), color=LINE, linewidth=1.2, zorder=3)
        ax.set_title(pod[-18:] + (" (scope)" if pod in in_scope else ""), fontsize=7,
                     color="#b00000" if pod in in_scope else "black")
        ax.tick_params(labelsize=6)
        _time_axis(ax, _span(rec))
    for ax in flat[len(chosen):]:
        ax.set_visible(False)
    _marks(flat[:len(chosen)], m, _span(rec))
    fig.suptitle(f"{rec.kind}: {tr('en', 'chart_pods')} — {_label(signal)}", fontsize=10, x=0.02, ha="left")
    _legend(fig, m)
    fig.subplots_adjust(left=0.06, right=0.98, top=1.0 - 0.6 / fig.get_figheight(), bottom=0.35 / fig.get_figheight(),
                        hspace=0.45, wspace=0.1)
    marks = _positions(fig, flat[0], m, _span(rec))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return Chart(file=path.name, title=f"{tr('en', 'chart_pods')}: {_label(signal)}", marks=marks)
