"""Every PNG opens and shows its marks: the chart functions report the pixel column of each vertical mark; the
mark's colour is found there (and not where no mark is)."""

from __future__ import annotations

import itertools
from pathlib import Path

import matplotlib.colors as mcolors
import matplotlib.image as mpimg
import numpy as np
import pytest
from tests.postmortem import synth
from tests.postmortem.conftest import Drill

from llm_oncall.postmortem import charts
from llm_oncall.postmortem.moments import moments
from llm_oncall.postmortem.record import load


def _hits(img: np.ndarray, x: float, colour: str, half_width: int = 9) -> int:
    """Pixels of `colour` in the columns around x (RGB within 0.06): a mark under others at the same time shows as
    a band up to 7 px either side."""
    rgb = np.array(mcolors.to_rgb(colour))
    lo, hi = max(0, round(x) - half_width), min(img.shape[1], round(x) + half_width + 1)
    cols = img[:, lo:hi, :3]
    return int((np.abs(cols - rgb).max(axis=2) < 0.06).sum())


def _check(png: Path, marks: list[dict[str, object]]) -> None:
    img = mpimg.imread(png)
    assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 400
    assert marks
    for m in marks:
        assert _hits(img, float(m["x_px"]), str(m["colour"])) >= 60, m  # type: ignore[arg-type]


def test_every_png_of_the_drills_opens_and_shows_its_marks(kv_drill: Drill,
                                                            ecc_drill: Drill) -> None:
    seen = 0
    for r, out in (kv_drill, ecc_drill):
        assert r["postmortem"] is not None
        files = {Path(p).name for p in r["postmortem"]["charts"]}
        assert "golden-signals.png" in files
        for name, marks in r["postmortem"]["marks"].items():
            _check(out / name, marks)
            kinds = [m["kind"] for m in marks]
            assert kinds[0] == "onset" and "detection" in kinds and "action" in kinds and kinds[-1] == "recovery"
            xs = [m["x_px"] for m in marks]
            assert xs == sorted(xs)
            seen += 1
    assert seen >= 3  # the pod-scoped gpu-ecc incident has per-pod small multiples too
    assert "pods.png" in {Path(p).name for p in ecc_drill[0]["postmortem"]["charts"]}


def test_marks_sit_where_their_times_are(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    iid = synth.make(db, pods=["pod-b"])
    rec = load(db, iid)
    m = moments(rec)
    assert m.first_symptom == synth.EPOCH + 285.0 and m.detection == synth.EPOCH + synth.PAGE_T
    assert m.recovery == synth.EPOCH + synth.RECOVERED_T
    chart = charts.golden(rec, m, tmp_path / "g.png")
    assert chart is not None
    by_kind = {mk["kind"]: mk for mk in chart.marks}
    assert set(by_kind) == {"onset", "detection", "action", "recovery"}
    # x is linear in t: the same pixels per second between every pair of marks
    pts = sorted((float(mk["t"]), float(mk["x_px"])) for mk in chart.marks)
    slopes = {round((x2 - x1) / (t2 - t1), 2) for (t1, x1), (t2, x2) in itertools.pairwise(pts) if t2 > t1}
    assert len(slopes) == 1
    img = mpimg.imread(tmp_path / "g.png")
    for mk in chart.marks:
        assert _hits(img, float(mk["x_px"]), str(mk["colour"])) >= 60
    # 100 s before the first symptom there is no mark of any colour
    px_per_s = slopes.pop()
    x_quiet = float(by_kind["onset"]["x_px"]) - 100 * px_per_s
    for colour in charts.MARK_COLOURS.values():
        assert _hits(img, x_quiet, colour) == 0
    pods = charts.pods(rec, m, tmp_path / "p.png")
    assert pods is not None
    _check(tmp_path / "p.png", pods.marks)


@pytest.mark.parametrize("scope", [[], ["pod-a"]])
def test_per_pod_small_multiples_only_for_a_pod_scope(tmp_path: Path, scope: list[str]) -> None:
    db = tmp_path / "r.db"
    iid = synth.make(db, pods=scope)
    rec = load(db, iid)
    chart = charts.pods(rec, moments(rec), tmp_path / "p.png")
    assert (chart is not None) == bool(scope)
