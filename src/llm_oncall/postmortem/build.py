"""Record → the postmortem document (sections of the Google SRE template), before any rendering."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from llm_oncall.actions.model import target_ref
from llm_oncall.diagnosis.symptoms import Slo
from llm_oncall.postmortem import impact as impact_mod
from llm_oncall.postmortem.i18n import duration, tr
from llm_oncall.postmortem.lessons import Item, Lessons, items, lessons, plan_actions
from llm_oncall.postmortem.moments import Moments, moments
from llm_oncall.postmortem.record import Record
from llm_oncall.runbooks.loader import Registry, load_registry
from llm_oncall.runbooks.schema import LongTerm, Runbook

CHANGE_KINDS = ("deploy", "rollout", "config_change")
CHANGE_LOOKBACK_S = 1800.0


@dataclass
class Chart:
    file: str
    title: str
    marks: list[dict[str, Any]] = field(default_factory=list)
    """Each vertical mark: kind, label, t, x_px (pixel column in the PNG), colour."""


@dataclass
class Doc:
    lang: str
    id: str
    title: str
    incident: str
    status: str
    date: str
    drill: str | None
    summary: str
    impact: list[str]
    method: str
    root_causes: list[str]
    trigger: list[str]
    detection: list[str]
    response: list[dict[str, str]]
    manual: list[str]
    timeline: list[tuple[str, str, str]]
    evidence: list[tuple[str, str, str, str, str]]
    ruled_out: list[tuple[str, str]]
    lessons: Lessons
    items: list[Item]
    impact_json: dict[str, Any]
    moments: Moments
    charts: list[Chart] = field(default_factory=list)


def utc(t: float | None, with_date: bool = False) -> str:
    if t is None:
        return "—"
    fmt = "%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S"
    return datetime.fromtimestamp(t, UTC).strftime(fmt)


def num(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float):
        return f"{v:.3g}"
    return str(v)


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.1%}"


def _kinds(m: Moments) -> str:
    return ", ".join(f"{a.kind} ({a.target})" for a in m.actions if a.status == "executed")


def _title(rb: Runbook | None, decided: str, lang: str) -> str:
    """The title of the diagnosis the response acted on, in `lang`: the runbook's title that held on its evidence
    ("Load surge beyond the fleet's capacity" when the KV cache was half empty), not the runbook's generic one."""
    if rb is None:
        return decided
    held = next((t for t in rb.titles if decided and decided in (t.text.get("en"), t.text.get(lang))), None)
    return (held.text.get(lang) if held is not None else rb.title.get(lang)) or decided


def build(rec: Record, lang: str = "en", slo: Slo | None = None, registry: Registry | None = None) -> Doc:
    m = moments(rec)
    imp = impact_mod.estimate(rec, m, slo)
    d = rec.decided()
    reg = registry or load_registry()
    rb = reg.get(str(d.get("runbook") or rec.kind))
    long_term: list[tuple[str, str]] = [(str(x.tag), _long_term_text(x, lang)) for x in rb.long_term] \
        if rb is not None else [(str(x.get("tag", "")), str(x.get("text", ""))) for x in d.get("long_term") or []]
    title = _title(rb, str(d.get("title") or ""), lang) or rec.title or rec.kind
    truth = rec.notes.get("ground_truth") or {}
    drill_info = rec.notes.get("drill")
    drill = tr(lang, "drill_value", seed=drill_info.get("seed"), incident=truth.get("incident"),
               onset=utc(m.fault_onset)) if isinstance(drill_info, dict) else None
    executed = [a for a in m.actions if a.status == "executed"]
    summary = tr(lang, "summary_text", what=d.get("summary") or title, incident=rec.kind,
                 confidence=num(d.get("confidence")), page=utc(m.detection),
                 mttd=tr(lang, "mttd_after", s=duration(m.mttd_s, lang)) if m.mttd_s is not None
                 else tr(lang, "mttd_unknown"),
                 response=tr(lang, "resp_actions", n=len(executed), kinds=_kinds(m)) if executed
                 else tr(lang, "resp_none"),
                 recovery=tr(lang, "recovered_after", s=duration(m.ttm_s, lang)) if m.recovery is not None
                 else tr(lang, "not_recovered"))
    if imp.known:
        impact = [tr(lang, "imp_slo", m=f"{imp.slo_minutes_burned:.1f}", bad=imp.bad_intervals, n=imp.intervals),
                  tr(lang, "imp_total", n=imp.requests_total), tr(lang, "imp_affected", n=imp.requests_affected),
                  tr(lang, "imp_failed", n=imp.requests_failed),
                  *([tr(lang, "imp_retries", n=imp.retries)] if imp.retries else []),
                  tr(lang, "imp_ttft", peak=f"{num(imp.ttft_p99_peak)} s", base=f"{num(imp.ttft_p99_baseline)} s"),
                  tr(lang, "imp_err", peak=_pct(imp.error_share_peak)),
                  tr(lang, "imp_window", start=utc(imp.window_start), end=utc(imp.window_end))]
        if imp.bad_intervals == 0:
            pass  # never violated: nothing held "again"
        elif imp.slo_back is not None:
            impact.append(tr(lang, "imp_slo_back", t=utc(imp.slo_back), s=duration(imp.slo_back - m.start, lang)))
        else:
            impact.append(tr(lang, "imp_slo_never", t=utc(imp.window_end)))
        if imp.requests_on_scope is not None:
            impact.append(tr(lang, "imp_scope", n=imp.requests_on_scope, pods=", ".join(imp.scope_pods)))
        if imp.quality_violations is not None:
            impact.append(tr(lang, "imp_quality", n=imp.quality_violations))
        if imp.after_recovery_minutes > 0:
            impact.append(tr(lang, "imp_after", m=f"{imp.after_recovery_minutes:.1f}"))
    else:
        impact = [tr(lang, "imp_none")]
    slo_text = tr(lang, "slo_configured", ttft=f"{imp.slo.ttft_p99_s} s", err=_pct(imp.slo.error_share)) \
        if imp.slo_configured else tr(lang, "slo_default")
    root = [str(d["root_cause"])] if d.get("root_cause") else [str(d.get("summary") or tr(lang, "todo"))]
    return Doc(lang=lang, id=rec.id, title=title, incident=rec.kind, status=rec.status,
               date=utc(m.detection, with_date=True), drill=drill, summary=summary, impact=impact,
               method=tr(lang, "method_text", slo=slo_text), root_causes=root, trigger=_trigger(rec, m, lang),
               detection=_detection(rec, m, lang), response=_response(rec, m, lang),
               manual=[tr(lang, "manual", text=s.get("text", "")) for s in (rec.plan or {}).get("manual") or []],
               timeline=_timeline(rec, m, lang),
               evidence=[(str(e.get("signal", "")), num(e.get("value")), num(e.get("baseline")),
                          str(e.get("source", "")), str(e.get("text", ""))) for e in d.get("evidence") or []],
               ruled_out=[(str(r.get("incident", "")), str(r.get("why", ""))) for r in d.get("ruled_out") or []],
               lessons=lessons(rec, m, imp, lang),
               items=items(rec, m, imp, long_term, rb.alert if rb is not None else None, lang),
               impact_json=imp.to_json(), moments=m)


def _trigger(rec: Record, m: Moments, lang: str) -> list[str]:
    start = m.start
    changes = [e for e in rec.cluster_events if e.kind in CHANGE_KINDS and start - CHANGE_LOOKBACK_S <= e.t <= start]
    out = [tr(lang, "trigger_change", kind=e.kind, t=utc(e.t), ago=duration(start - e.t, lang), detail=e.detail)
           for e in changes[-3:]] or [tr(lang, "trigger_none")]
    cause = rec.decided().get("root_cause")
    if cause:
        out.append(tr(lang, "trigger_cause", cause=cause))
    if not changes:
        out.append(tr(lang, "todo"))
    return out


def _detection(rec: Record, m: Moments, lang: str) -> list[str]:
    d = rec.decided()
    sigs = ", ".join(str(s.get("signal")) for s in d.get("symptoms") or [] if s.get("signal") and s.get("red")) or \
        ", ".join(str(e.get("signal")) for e in (d.get("evidence") or [])[:3]) or rec.kind
    out = [tr(lang, "det_how", signals=sigs, page=utc(m.detection))]
    if m.mttd_s is not None:
        n = m.mttd_s / m.interval_s if m.interval_s else 0.0
        out.append(tr(lang, "det_mttd", s=duration(m.mttd_s, lang), n=f"{n:.0f}", iv=duration(m.interval_s, lang)))
    if m.first_page_incident == "unknown" and m.diagnosis is not None:
        out.append(tr(lang, "det_first_unknown", t=utc(m.diagnosis)))
    if m.diagnosis is not None:
        out.append(tr(lang, "det_diag", incident=m.diagnosis_incident, t=utc(m.diagnosis),
                      c=num(d.get("confidence"))))
    if m.fault_onset is not None:
        out.append(tr(lang, "det_truth", t=utc(m.fault_onset), s=duration(m.detection - m.fault_onset, lang)))
    return out


def _response(rec: Record, m: Moments, lang: str) -> list[dict[str, str]]:
    when = {a.id: a.t for a in m.actions}
    actor = {str(e.detail.get("action_id")): e.actor for e in rec.events("action")}
    approvals = {a["action_id"]: a for a in rec.approvals}
    rows = []
    for a in plan_actions(rec):
        dry = a.get("dry_run") or {}
        guard = a.get("guard") or {}
        appr = approvals.get(a.get("id"))
        v = a.get("verification") or {}
        rows.append({
            "when": utc(when.get(a.get("id", ""))), "who": actor.get(str(a.get("id")), "—"),
            "what": f"{a.get('kind')} {target_ref(a.get('target'))}: {a.get('why', '')}".strip(),
            "dry_run": (tr(lang, "ok") if dry.get("ok") else tr(lang, "failed")) + f" {_short(dry.get('detail'))}"
            if dry else tr(lang, "none"),
            "approval": f"{appr['decision']} by {appr['actor']}" if appr else
            (f"{'allowed' if guard.get('allowed') else 'blocked'}: {guard.get('why', '')}" if guard
             else tr(lang, "none")),
            "outcome": f"{a.get('status')} {_short(a.get('result'))}".strip(),
            "verification": f"{v.get('verdict')}: {v.get('detail', '')}" if v else tr(lang, "none")})
    return rows


def _long_term_text(x: LongTerm, lang: str) -> str:
    """The runbook's long-term fix, with what its what-if drill measured when the runbook carries the figure."""
    m = x.measured
    if m is None or x.what_if is None:
        return x.text.get(lang)
    return x.text.get(lang) + tr(lang, "item_prevent_what_if", fix=x.what_if, seed=m.seed, on=m.measured_on,
                                 slo0=f"{m.slo_minutes_burned[0]:g}", slo1=f"{m.slo_minutes_burned[1]:g}",
                                 f0=f"{m.requests_failed[0]:,}", f1=f"{m.requests_failed[1]:,}",
                                 p0=m.pages[0], p1=m.pages[1]) + (
        tr(lang, "item_prevent_what_if_worse") if m.slo_minutes_burned[1] > m.slo_minutes_burned[0]
        or m.requests_failed[1] > m.requests_failed[0] else "")


def _short(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, dict):
        return "(" + ", ".join(f"{k}={x}" for k, x in list(v.items())[:4]) + ")"
    return f"({v})"


def _timeline(rec: Record, m: Moments, lang: str) -> list[tuple[str, str, str]]:
    rows: list[tuple[float, int, str, str]] = []
    if m.fault_onset is not None:
        rows.append((m.fault_onset, 0, "drill", tr(lang, "ev_fault")))
    if m.first_symptom is not None:
        rows.append((m.first_symptom, 1, "symptom", tr(lang, "ev_symptom")))
    for c in rec.cluster_events:
        if c.kind in CHANGE_KINDS and m.start - CHANGE_LOOKBACK_S <= c.t <= (m.recovery or rec.end):
            rows.append((c.t, 2, "change", tr(lang, "ev_change", kind=c.kind, detail=c.detail)))
    for i, e in enumerate(rec.timeline):
        text = event_text(e.kind, e.detail, lang)
        if text:
            rows.append((e.t, 10 + i, e.kind, f"{text} ({e.actor})"))
    if m.recovery is not None:
        sig: dict[str, Any] = next((e.detail.get("signals") or {} for e in rec.events("verification")
                                    if e.detail.get("recovered_at")), {})
        detail = ", ".join(f"{k} {num(v.get('value') if isinstance(v, dict) else v)}"
                           for k, v in (sig or {}).items()) or "—"
        rows.append((m.recovery, 5, "recovery", tr(lang, "ev_recovery", detail=detail)))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(utc(t), kind, text) for t, _, kind, text in rows]


def event_text(kind: str, d: dict[str, Any], lang: str = "en") -> str:
    """One timeline event as a person reads it (postmortems, `incidents show`)."""
    if kind == "status":
        if d.get("status") == "open":
            return tr(lang, "ev_page", incident=d.get("incident", ""))
        return tr(lang, "ev_status", status=d.get("status"), why=d.get("why", ""))
    if kind == "diagnosis":
        return tr(lang, "ev_diagnosis", incident=d.get("incident"), c=num(d.get("confidence"))) + \
            (f" — {d['summary']}" if d.get("summary") else "")
    if kind == "plan":
        return tr(lang, "ev_plan", plan=d.get("plan_id"), kinds=", ".join(a.get("kind", "") for a in
                                                                         d.get("actions") or []) or "—")
    if kind == "action":
        why = d.get("result") if d.get("status") != "executed" and isinstance(d.get("result"), str) else ""
        return tr(lang, "ev_action", kind=d.get("kind"), target=d.get("target", ""), status=d.get("status")) + \
            (f" — {why}" if why else "")
    if kind == "verification":
        if d.get("recovered_at") is not None:
            return ""  # shown as the recovery row, at the time it began
        return tr(lang, "ev_verify", kind=d.get("kind") or "incident", verdict=d.get("verdict")) + \
            (f" — {d['detail']}" if d.get("detail") else "")
    if kind == "alert":
        labels = d.get("labels") or {}
        return tr(lang, "ev_alert", name=labels.get("alertname", d.get("fingerprint", "")), status=d.get("status"))
    if kind == "approval":
        return tr(lang, "ev_approval", action=d.get("action_id"), decision=d.get("decision"))
    if kind == "notification":
        return tr(lang, "ev_notify", detail=d.get("text") or d.get("event") or "")
    if kind in ("effect", "note"):
        return tr(lang, f"ev_{kind}", detail=d.get("detail", ""))
    if kind == "suppressed":  # the storm gate's counts (incidents/storm.py)
        nodes = ", ".join(f"{n} ×{c}" for n, c in sorted((d.get("by_node") or {}).items()))
        return f"storm gate: {d.get('events', 0)} event(s) counted, not written ({nodes or '—'})"
    return str(d)
