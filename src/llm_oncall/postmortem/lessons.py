"""Lessons learned and action items: what the record supports, the rest left to the humans.

Action items are typed mitigate / prevent / detect / process (Google's types plus detect: llm-oncall's own rules
are a detection fix).  They come from the runbook's long-term list (by tag: monitoring → detect, process/drill →
process, anything else → prevent) and from what the record shows: an action that did not run or did not help,
a temporary mitigation still in place, a slow page, a first page that named no runbook, a long time to mitigate.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llm_oncall.postmortem.i18n import TAG_TYPE, duration, tr
from llm_oncall.postmortem.impact import Impact
from llm_oncall.postmortem.moments import Moments
from llm_oncall.postmortem.record import Record

SLOW_DETECTION_INTERVALS = 2.0
"""Paging more than two scrape intervals after the first symptom is worth an item."""
SLOW_MITIGATION_S = 600.0
"""Ten minutes from the first symptom to recovery (or none at all) is worth a process item."""


@dataclass(frozen=True)
class Item:
    type: str
    text: str
    owner: str
    source: str


@dataclass
class Lessons:
    well: list[str]
    wrong: list[str]
    lucky: list[str]


def plan_actions(rec: Record) -> list[dict[str, Any]]:
    return list((rec.plan or {}).get("actions") or [])


def utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


def _intervals(s: float | None, m: Moments) -> float | None:
    return None if s is None or not m.interval_s else s / m.interval_s


def lessons(rec: Record, m: Moments, imp: Impact, lang: str) -> Lessons:
    well: list[str] = []
    wrong: list[str] = []
    lucky: list[str] = []
    n = _intervals(m.mttd_s, m)
    if m.mttd_s is not None and n is not None:
        target = well if n <= SLOW_DETECTION_INTERVALS else wrong
        target.append(tr(lang, "well_mttd" if target is well else "wrong_mttd", s=duration(m.mttd_s, lang),
                         n=f"{n:.0f}"))
    d = rec.decided()
    if d.get("incident") not in (None, "unknown", "healthy"):
        well.append(tr(lang, "well_diag", incident=d["incident"], k=len(d.get("evidence") or []),
                       r=len(d.get("ruled_out") or [])))
    if m.first_page_incident == "unknown" and m.diagnosis is not None:
        wrong.append(tr(lang, "wrong_unknown", s=duration(m.diagnosis - m.detection, lang)))
    for a in plan_actions(rec):
        v = a.get("verification") or {}
        if a.get("status") == "executed" and v.get("verdict") == "helped":
            well.append(tr(lang, "well_verified", kind=a["kind"], detail=v.get("detail", "")))
        elif a.get("status") == "executed" and v.get("verdict"):
            wrong.append(tr(lang, "wrong_verdict", kind=a["kind"], verdict=v["verdict"], detail=v.get("detail", "")))
        elif a.get("status") in ("blocked", "failed", "dry_run", "planned"):
            why = (a.get("guard") or {}).get("why") or a.get("result") or ""
            wrong.append(tr(lang, "wrong_action", kind=a["kind"], target=_target(a), status=a["status"], why=why))
        cap = capped(a)
        if cap and v.get("verdict") == "helped":
            if imp.slo_back is not None:
                lucky.append(tr(lang, "lucky_capped", kind=a["kind"], why=cap))
            else:
                wrong.append(tr(lang, "wrong_capped", kind=a["kind"], why=cap))
    if m.recovery is None:
        wrong.append(tr(lang, "wrong_not_recovered"))
    elif m.ttm_s is not None and m.first_action is not None:
        approvers = sorted({e.actor for e in rec.events("approval") if e.detail.get("decision") == "approved"})
        if approvers:
            well.append(tr(lang, "well_ttm_approved", s=duration(m.ttm_s, lang), who=", ".join(approvers)))
        else:
            well.append(tr(lang, "well_ttm", s=duration(m.ttm_s, lang)))
    if imp.known and imp.slo_minutes_burned > 0:
        wrong.append(tr(lang, "wrong_slo", m=f"{imp.slo_minutes_burned:.1f}"))
    for t, other in follow_on(rec, m):
        wrong.append(tr(lang, "wrong_follow_on", t=utc(t), incident=other))
    if imp.after_recovery_minutes > 0 and m.recovery is not None:
        wrong.append(tr(lang, "wrong_after", t=utc(m.recovery), m=f"{imp.after_recovery_minutes:.1f}"))
    todo = tr(lang, "todo")
    return Lessons(well=well or [todo], wrong=wrong or [todo], lucky=lucky or [todo])


def capped(a: dict[str, Any]) -> str:
    """The guard's cap on an executed action, as the plan says it ("bounded to 12 by the policy's caps"), or ''."""
    why = str(a.get("why") or "")
    if a.get("status") != "executed" or "caps" not in why:
        return ""
    return why.split(";")[-1].strip()


def follow_on(rec: Record, m: Moments) -> list[tuple[float, str]]:
    """Pages of another incident after the first executed action (what the fix may have caused)."""
    acted = m.first_action
    if acted is None:
        return []
    out: list[tuple[float, str]] = []
    for e in rec.events("diagnosis"):
        inc = str(e.detail.get("incident"))
        if e.t > acted and inc not in (rec.kind, "healthy", "unknown") and e.detail.get("severity") == "page" \
                and inc not in {x for _, x in out}:
            out.append((e.t, inc))
    return out


def _target(a: dict[str, Any]) -> str:
    t = a.get("target")
    if isinstance(t, dict):
        return "/".join(str(t[k]) for k in ("kind", "namespace", "name") if t.get(k))
    return str(t or "")


def items(rec: Record, m: Moments, imp: Impact, runbook_long_term: list[tuple[str, str]], alert: str | None,
          lang: str) -> list[Item]:
    owner = tr(lang, "owner_tbd")
    src_rec, src_rb = tr(lang, "from_record"), tr(lang, "from_runbook")
    out: list[Item] = []
    for a in plan_actions(rec):
        v = a.get("verification") or {}
        if a.get("status") in ("blocked", "failed", "dry_run", "planned"):
            out.append(Item("mitigate", tr(lang, "item_mitigate_blocked", kind=a["kind"], target=_target(a),
                                           status=a["status"]), owner, src_rec))
        elif a.get("status") == "executed" and v.get("verdict") in ("no_effect", "harmful", "unverified"):
            out.append(Item("mitigate", tr(lang, "item_mitigate_verdict", kind=a["kind"], verdict=v["verdict"]),
                            owner, src_rec))
        elif a.get("status") == "executed" and a.get("revert"):  # a temporary change still in place
            out.append(Item("mitigate", tr(lang, "item_mitigate_revisit", kind=a["kind"], target=_target(a),
                                           result=_short(a.get("result"))), owner, src_rec))
    for step in (rec.plan or {}).get("manual") or []:
        text = step.get("text") if isinstance(step, dict) else str(step)
        out.append(Item("mitigate", tr(lang, "item_mitigate_manual", text=text), owner, src_rec))
    for tag, text in runbook_long_term:
        out.append(Item(TAG_TYPE.get(tag, "prevent"), text, owner, f"{src_rb} ({tag})"))
    imp_back = imp.slo_back is not None
    for a in plan_actions(rec):
        cap = capped(a)
        if cap and not imp_back:
            out.append(Item("process", tr(lang, "item_process_cap", kind=a["kind"], why=cap), owner, src_rec))
    for t, other in follow_on(rec, m):
        out.append(Item("prevent", tr(lang, "item_prevent_follow_on", t=utc(t), incident=other), owner, src_rec))
    n = _intervals(m.mttd_s, m)
    if n is not None and n > SLOW_DETECTION_INTERVALS:
        out.append(Item("detect", tr(lang, "item_detect_mttd", s=duration(m.mttd_s, lang)), owner, src_rec))
    if m.first_page_incident == "unknown":
        out.append(Item("detect", tr(lang, "item_detect_unknown"), owner, src_rec))
    if imp.after_recovery_minutes > 0 and m.recovery is not None:
        out.append(Item("detect", tr(lang, "item_detect_verify", incident=rec.kind,
                                     m=f"{imp.after_recovery_minutes:.1f}"), owner, src_rec))
    if alert:
        out.append(Item("detect", tr(lang, "item_detect_rule", alert=alert), owner, src_rb))
    if m.ttm_s is None or m.ttm_s > SLOW_MITIGATION_S:
        out.append(Item("process", tr(lang, "item_process_ttm", s=duration(m.ttm_s, lang)), owner, src_rec))
    out.append(Item("process", tr(lang, "item_process_review"), owner, src_rec))
    order = {"mitigate": 0, "prevent": 1, "detect": 2, "process": 3}
    return sorted(out, key=lambda i: order[i.type])


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in list(v.items())[:3])
    return str(v or "")
