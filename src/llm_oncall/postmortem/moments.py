"""The moments a postmortem marks: first symptom, detection (the page), diagnosis, each action, recovery, resolution.

The first symptom comes from the telemetry, not from the page: the earliest scrape of the unbroken run before the
page in which a user-facing symptom was red or the autopilot already warned of an incident (a drill's injected
fault time is ground truth the autopilot never saw; it is shown beside it, never used for it).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.postmortem.record import Record


@dataclass(frozen=True)
class ActionMoment:
    t: float
    id: str
    kind: str
    target: str
    status: str


@dataclass
class Moments:
    first_symptom: float | None
    detection: float
    diagnosis: float | None
    diagnosis_incident: str
    actions: list[ActionMoment] = field(default_factory=list)
    recovery: float | None = None
    mitigated: float | None = None
    resolved: float | None = None
    fault_onset: float | None = None
    interval_s: float | None = None
    first_page_incident: str = ""

    @property
    def mttd_s(self) -> float | None:
        return None if self.first_symptom is None else self.detection - self.first_symptom

    @property
    def first_action(self) -> float | None:
        ex = [a.t for a in self.actions if a.status == "executed"]
        return min(ex) if ex else None

    @property
    def start(self) -> float:
        return self.first_symptom if self.first_symptom is not None else self.detection

    @property
    def ttm_s(self) -> float | None:
        """Time to mitigate: first symptom (else the page) to the recovery."""
        end = self.recovery if self.recovery is not None else self.mitigated
        return None if end is None else end - self.start

    def marks(self) -> list[tuple[str, float, str]]:
        """(kind, t, label) of every vertical mark: onset, detection, action…, recovery."""
        out: list[tuple[str, float, str]] = []
        if self.first_symptom is not None:
            out.append(("onset", self.first_symptom, "first symptom"))
        out.append(("detection", self.detection, "page"))
        out += [("action", a.t, a.kind) for a in self.actions if a.status == "executed"]
        if self.recovery is not None:
            out.append(("recovery", self.recovery, "recovery"))
        return out


def _first_symptom(rec: Record, page: float) -> float | None:
    diag = rec.diagnoses()
    red = {t for t, v in rec.series("symptom") if v >= 1.0}
    times = [t for t in rec.times() if t <= page + 1e-6]
    first = None
    for t in reversed(times):
        incident, sev = diag.get(t, ("healthy", 0.0))
        if t in red or (sev >= 1.0 and incident != "healthy"):
            first = t
        else:
            break
    return first


def _interval(rec: Record) -> float | None:
    ts = rec.times()
    gaps = sorted(b - a for a, b in itertools.pairwise(ts))
    return gaps[len(gaps) // 2] if gaps else None


def moments(rec: Record) -> Moments:
    opened = next((e.t for e in rec.events("status") if e.detail.get("status") == "open"), rec.opened_at)
    named = [e for e in rec.events("diagnosis") if e.detail.get("incident") not in (None, "unknown", "healthy")]
    first_diag = rec.events("diagnosis")[0] if rec.events("diagnosis") else None
    # One moment per action: the event that executed it, else its latest event (blocked, failed, dry run).
    by_id: dict[str, ActionMoment] = {}
    for e in rec.events("action"):
        aid = str(e.detail.get("action_id", ""))
        if by_id.get(aid) is not None and by_id[aid].status == "executed":
            continue
        by_id[aid] = ActionMoment(e.t, aid, str(e.detail.get("kind", "")), str(e.detail.get("target", "")),
                                  str(e.detail.get("status", "")))
    acts = list(by_id.values())
    status_t = {str(e.detail.get("status")): e.t for e in rec.events("status")}
    recovery = next((float(e.detail["recovered_at"]) for e in rec.events("verification")
                     if e.detail.get("recovered_at") is not None), None)
    mitigated = status_t.get("mitigated")
    if recovery is None and mitigated is not None:
        recovery = mitigated
    truth: dict[str, Any] = rec.notes.get("ground_truth") or {}
    onset = truth.get("onset")
    return Moments(first_symptom=_first_symptom(rec, opened), detection=opened,
                   diagnosis=named[0].t if named else None,
                   diagnosis_incident=str(named[0].detail.get("incident")) if named else rec.incident,
                   actions=sorted(acts, key=lambda a: a.t), recovery=recovery, mitigated=mitigated,
                   resolved=rec.resolved_at, fault_onset=float(onset) if isinstance(onset, int | float) else None,
                   interval_s=_interval(rec),
                   first_page_incident=str(first_diag.detail.get("incident")) if first_diag else rec.incident)
