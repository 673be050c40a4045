"""`llm-oncall postmortem ID --out DIR`: the blameless postmortem of an incident in the store (Markdown, HTML, PNGs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from llm_oncall.cli.common import JsonOpt, LangOpt, console, fail, print_json


def postmortem(
    incident_id: Annotated[str, typer.Argument(metavar="INCIDENT_ID", help="Incident id (incidents list).")],
    out: Annotated[Path, typer.Option("--out", help="Directory for postmortem.md, postmortem.html and the PNGs.")],
    db: Annotated[Path, typer.Option("--db", help="SQLite store (the service config's `db`).")] = Path(
        "llm-oncall.db"),
    lang: LangOpt = "en",
    slo_ttft: Annotated[float | None, typer.Option("--slo-ttft-p99", help="TTFT p99 objective in seconds for the "
                                                                      "impact estimate.")] = None,
    slo_errors: Annotated[float | None, typer.Option("--slo-error-share", help="Error-share objective (0-1).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the postmortem of one incident: sections of the SRE template, impact from the telemetry, charts."""
    from llm_oncall.diagnosis.symptoms import Slo
    from llm_oncall.postmortem.i18n import LANGS
    from llm_oncall.postmortem.record import RecordError
    from llm_oncall.postmortem.write import write_postmortem

    if lang not in LANGS:
        raise fail(f"--lang is one of {', '.join(LANGS)}")
    if out.exists() and not out.is_dir():
        raise fail(f"--out {out}: exists and is not a directory")
    if slo_errors is not None and not 0.0 < slo_errors < 1.0:
        raise fail("--slo-error-share is a share between 0 and 1")
    if slo_ttft is not None and slo_ttft <= 0:
        raise fail("--slo-ttft-p99 is a positive number of seconds")
    slo = Slo(ttft_p99_s=slo_ttft, error_share=slo_errors) if slo_ttft or slo_errors else None
    try:
        written = write_postmortem(db, incident_id, out, lang, slo)
    except RecordError as exc:
        raise fail(str(exc), code=exc.code) from exc
    if as_json:
        print_json(written.to_json())
        return
    console.print(f"postmortem of {written.incident_id} ({written.incident}): {written.markdown}, {written.html}"
                  + "".join(f", {p}" for p in written.charts), soft_wrap=True)
