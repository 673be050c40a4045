"""The postmortem as one self-contained HTML file: Jinja2 with autoescaping on, the PNGs embedded as base64."""

from __future__ import annotations

import base64
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from llm_oncall.postmortem.build import Doc
from llm_oncall.postmortem.i18n import tr

_ENV = Environment(loader=PackageLoader("llm_oncall.postmortem", "templates"),
                   autoescape=select_autoescape(default=True, default_for_string=True), keep_trailing_newline=True)


def render(doc: Doc, chart_dir: Path | None = None) -> str:
    """`chart_dir`: where the PNGs are (embedded as data: URIs); charts missing there are left out."""
    images = []
    for c in doc.charts:
        p = (chart_dir / c.file) if chart_dir is not None else None
        if p is not None and p.is_file():
            images.append({"title": c.title, "data": base64.b64encode(p.read_bytes()).decode("ascii")})
    return _ENV.get_template("postmortem.html.j2").render(
        doc=doc, images=images, t=lambda key, **kw: tr(doc.lang, key, **kw),
        html_lang="zh-CN" if doc.lang == "zh" else "en")
