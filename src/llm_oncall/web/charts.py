"""Server-side SVG time-series charts of the signals a diagnosis cites, from the store's telemetry.

No JavaScript and no library: a polyline per series, the incident's opening as a vertical mark, min/max on the
axis. Every text in the SVG is escaped (signal names come from the store).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup, escape

from llm_oncall.postmortem import telemetry

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 560, 150, 56, 10, 22, 24


@dataclass(frozen=True)
class Chart:
    signal: str
    points: list[tuple[float, float]]
    svg: Markup


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 0.01:
        return f"{v:.3g}"
    return f"{v:.2e}"


def _clock(t: float) -> str:
    import time as _t

    return _t.strftime("%H:%M:%S", _t.gmtime(t))


def svg(signal: str, points: Sequence[tuple[float, float]], mark: float | None, title: str | None = None) -> Markup:
    """One chart: `points` (t, value) sorted by t; `mark` the onset (a vertical line)."""
    label = escape(title or signal)
    head = (f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{label} over time" '
            f'xmlns="http://www.w3.org/2000/svg"><title>{label}</title>'
            f'<text x="{PAD_L}" y="14" class="chart-title">{label}</text>')
    pts = [(t, v) for t, v in points if math.isfinite(v)]
    if len(pts) < 2:
        # every text interpolated into the SVG went through escape() above; numbers are formatted by us
        return Markup(head + f'<text x="{PAD_L}" y="{H // 2}" class="chart-empty">not enough samples</text></svg>')  # noqa: S704
    t0, t1 = pts[0][0], pts[-1][0]
    if mark is not None:
        t0, t1 = min(t0, mark), max(t1, mark)
    lo, hi = min(v for _, v in pts), max(v for _, v in pts)
    if hi - lo < 1e-12:
        lo, hi = lo - 1, hi + 1
    span_t = max(t1 - t0, 1e-9)

    def x(t: float) -> float:
        return PAD_L + (t - t0) / span_t * (W - PAD_L - PAD_R)

    def y(v: float) -> float:
        return PAD_T + (1 - (v - lo) / (hi - lo)) * (H - PAD_T - PAD_B)

    line = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
    parts = [head,
             f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}" class="chart-axis"/>',
             f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}" class="chart-axis"/>',
             f'<text x="{PAD_L - 4}" y="{PAD_T + 4}" text-anchor="end" class="chart-tick">{escape(_fmt(hi))}</text>',
             f'<text x="{PAD_L - 4}" y="{H - PAD_B}" text-anchor="end" class="chart-tick">{escape(_fmt(lo))}</text>',
             f'<text x="{PAD_L}" y="{H - 6}" class="chart-tick">{_clock(t0)}</text>',
             f'<text x="{W - PAD_R}" y="{H - 6}" text-anchor="end" class="chart-tick">{_clock(t1)}</text>']
    if mark is not None:
        mx = x(mark)
        parts.append(f'<line x1="{mx:.1f}" y1="{PAD_T}" x2="{mx:.1f}" y2="{H - PAD_B}" class="chart-mark"/>'
                     f'<text x="{mx + 3:.1f}" y="{PAD_T + 10}" class="chart-tick">opened</text>')
    parts.append(f'<polyline points="{line}" class="chart-line"/></svg>')
    return Markup("".join(parts))  # noqa: S704 — texts escaped above, the rest are our numbers


def cited(db: Path, signals: Sequence[str], onset: float, before_s: float = 900.0,
          after_s: float = 900.0) -> list[Chart]:
    """The fleet-level series of each cited signal in [onset - before_s, onset + after_s] (empty when the store
    holds no telemetry)."""
    if not db.is_file():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2.0)
    try:
        samples, _ = telemetry.read(conn, onset - before_s, onset + after_s)
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    out: list[Chart] = []
    for sig in dict.fromkeys(signals):
        pts = [(s.t, s.value) for s in samples if s.signal == sig and s.scope == "fleet"]
        if pts:
            out.append(Chart(sig, pts, svg(sig, pts, onset)))
    return out
