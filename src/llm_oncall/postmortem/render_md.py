"""The postmortem as Markdown (GitHub-flavoured: tables, the charts as image links beside the file)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llm_oncall.postmortem.build import Doc
from llm_oncall.postmortem.i18n import tr


def cell(text: str) -> str:
    """A table cell: pipes escaped, line breaks folded (the text is quoted from the record as is)."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip() or "—"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out


def _bullets(lines: Sequence[str]) -> list[str]:
    return [f"- {line}" for line in lines]


def render(doc: Doc) -> str:
    def t(key: str, **kw: Any) -> str:
        return tr(doc.lang, key, **kw)

    out: list[str] = [f"# {t('doc_title', title=doc.title)}", ""]
    meta = [(t("id"), f"`{doc.id}`"), (t("incident"), f"`{doc.incident}`"), (t("status"), doc.status),
            (t("date"), doc.date), (t("authors"), t("authors_value"))]
    if doc.drill:
        meta.append((t("drill"), doc.drill))
    out += [f"- **{k}:** {v}" for k, v in meta]
    out += ["", f"## {t('summary')}", "", doc.summary, ""]
    out += [f"## {t('impact')}", "", *_bullets(doc.impact), "", f"*{t('method')}:* {doc.method}", ""]
    out += [f"## {t('root_causes')}", "", *_bullets(doc.root_causes), ""]
    out += [f"## {t('trigger')}", "", *_bullets(doc.trigger), ""]
    out += [f"## {t('detection')}", "", *_bullets(doc.detection), ""]
    out += [f"## {t('response')}", ""]
    if doc.response:
        out += _table([t("col_when"), t("col_who"), t("col_what"), t("col_dry"), t("col_approval"),
                       t("col_outcome"), t("col_verify")],
                      [[r["when"], r["who"], r["what"], r["dry_run"], r["approval"], r["outcome"],
                        r["verification"]] for r in doc.response])
    else:
        out.append(t("resp_none"))
    if doc.manual:
        out += ["", *_bullets(doc.manual)]
    out += ["", f"## {t('timeline')}", ""]
    out += _table([t("col_when"), t("col_event"), t("col_detail")], doc.timeline)
    out += ["", f"## {t('evidence')}", ""]
    out += _table([t("col_signal"), t("col_value"), t("col_baseline"), t("col_finding"), t("col_source")],
                  [[s, v, b, text, src] for s, v, b, src, text in doc.evidence]) if doc.evidence else [t("todo")]
    out += ["", f"## {t('ruled_out')}", ""]
    out += _table([t("col_incident"), t("col_why")], doc.ruled_out) if doc.ruled_out else [t("todo")]
    out += ["", f"## {t('lessons')}", "", f"### {t('well')}", "", *_bullets(doc.lessons.well), "",
            f"### {t('wrong')}", "", *_bullets(doc.lessons.wrong), "", f"### {t('lucky')}", "",
            *_bullets(doc.lessons.lucky), ""]
    out += [f"## {t('items')}", ""]
    out += _table([t("col_type"), t("col_item"), t("col_owner"), t("col_from")],
                  [[f"**{i.type}**", i.text, i.owner, i.source] for i in doc.items])
    out += ["", f"## {t('charts')}", ""]
    if doc.charts:
        for c in doc.charts:
            out += [f"![{c.title}]({c.file})", ""]
    else:
        out += [t("no_telemetry"), ""]
    return "\n".join(out).rstrip() + "\n"
