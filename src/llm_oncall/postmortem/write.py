"""Write one postmortem: record → document → charts → postmortem.md + postmortem.html (+ the PNGs) in a directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_oncall.diagnosis.symptoms import Slo
from llm_oncall.postmortem import charts, render_html, render_md
from llm_oncall.postmortem.build import Doc, build
from llm_oncall.postmortem.i18n import LANGS
from llm_oncall.postmortem.record import load

GOLDEN_PNG = "golden-signals.png"
PODS_PNG = "pods.png"


@dataclass
class Written:
    incident_id: str
    incident: str
    markdown: Path
    html: Path
    charts: list[Path] = field(default_factory=list)
    doc: Doc | None = None

    def to_json(self) -> dict[str, Any]:
        doc = self.doc
        out: dict[str, Any] = {"incident_id": self.incident_id, "incident": self.incident,
                               "markdown": str(self.markdown), "html": str(self.html),
                               "charts": [str(p) for p in self.charts]}
        if doc is not None:
            out.update({"lang": doc.lang, "impact": doc.impact_json,
                        "action_items": [{"type": i.type, "text": i.text, "owner": i.owner, "source": i.source}
                                         for i in doc.items],
                        "timeline": [{"at": w, "kind": k, "text": x} for w, k, x in doc.timeline],
                        "marks": {c.file: c.marks for c in doc.charts},
                        "mttd_s": doc.moments.mttd_s, "ttm_s": doc.moments.ttm_s})
        return out


def write_postmortem(db: Path | str, incident_id: str, out: Path, lang: str = "en", slo: Slo | None = None,
                     ) -> Written:
    """Raises record.RecordError for a missing store or incident, ValueError for an unknown language."""
    if lang not in LANGS:
        raise ValueError(f"--lang is one of {', '.join(LANGS)}")
    rec = load(db, incident_id)
    doc = build(rec, lang, slo)
    out.mkdir(parents=True, exist_ok=True)
    pngs: list[Path] = []
    m = doc.moments
    for fn, name in ((charts.golden, GOLDEN_PNG), (charts.pods, PODS_PNG)):
        path = out / name
        chart = fn(rec, m, path)
        if chart is not None:
            doc.charts.append(chart)
            pngs.append(path)
        elif path.exists():
            path.unlink()  # a stale chart of an earlier run
    md = out / "postmortem.md"
    html = out / "postmortem.html"
    md.write_text(render_md.render(doc), encoding="utf-8")
    html.write_text(render_html.render(doc, out), encoding="utf-8")
    return Written(rec.id, rec.kind, md, html, pngs, doc)
