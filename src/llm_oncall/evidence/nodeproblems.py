"""What the cluster already knows: Node conditions and Warning Events set by node-problem-detector or GPU-health
agents, as evidence (catalog/node_problems.yaml names them, with provenance).

Pure: takes the API objects (Node and Event dicts, as lightkube returns them) and gives findings; the reading is
done by the loop (respond/nodeproblems.py). A condition in its problem status, or a known Warning Event on a Node
within the window, is one finding per node and type (file `node-problems:<node>/<type>`); an Xid line in its
message is classified by the Xid catalogue as well (its own finding, so the repair ladder sees the code).
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from llm_oncall.evidence.classify import classify_text
from llm_oncall.evidence.model import Finding

CATALOG_PATH = Path(__file__).parent / "catalog" / "node_problems.yaml"
PREFIX = "node-problems:"


class ConditionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    problem: Literal["True", "False", "Unknown"] = "True"
    incident_hint: str | None = None
    severity: Literal["info", "warning", "error", "critical"] = "warning"
    meaning: str = Field(min_length=1)


class EventSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    incident_hint: str | None = None
    severity: Literal["info", "warning", "error", "critical"] = "warning"
    meaning: str = Field(min_length=1)


class NodeProblems(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1)
    conditions: dict[str, ConditionSpec]
    events: dict[str, EventSpec]


@cache
def catalog() -> NodeProblems:
    with CATALOG_PATH.open(encoding="utf-8") as fh:
        return NodeProblems.model_validate(yaml.safe_load(fh))


def _ts(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return float(calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _finding(node: str, kind: str, spec: ConditionSpec | EventSpec, facts: dict[str, Any]) -> Finding:
    hint = spec.incident_hint
    conf = {"critical": 0.8, "error": 0.7, "warning": 0.6, "info": 0.4}[spec.severity]
    return Finding(f"{PREFIX}{node}/{kind}", kind, hint is None and spec.severity == "info", hint, conf,
                   {"node": node, "meaning": spec.meaning, **facts}, (), "node-problems", severity=spec.severity)


def findings(nodes: Sequence[dict[str, Any]], events: Sequence[dict[str, Any]], now: float,
             window_s: float = 600.0) -> list[Finding]:
    cat = catalog()
    out: list[Finding] = []
    messages: dict[str, list[str]] = {}
    for n in nodes:
        name = str((n.get("metadata") or {}).get("name", ""))
        for c in (n.get("status") or {}).get("conditions") or []:
            spec = cat.conditions.get(str(c.get("type")))
            if spec is None or c.get("status") != spec.problem:
                continue
            msg = str(c.get("message") or "")
            out.append(_finding(name, f"node_condition_{c['type']}", spec, {
                "condition": c["type"], "status": c.get("status"), "reason": c.get("reason"), "message": msg[:300],
                "since": c.get("lastTransitionTime")}))
            messages.setdefault(name, []).append(msg)
    for e in events:
        obj = e.get("involvedObject") or {}
        spec_e = cat.events.get(str(e.get("reason")))
        if obj.get("kind") != "Node" or e.get("type") != "Warning" or spec_e is None:
            continue
        at = _ts(e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp"))
        if at is not None and now - at > window_s:
            continue
        name, msg = str(obj.get("name", "")), str(e.get("message") or "")
        out.append(_finding(name, f"node_event_{e['reason']}", spec_e, {
            "reason": e["reason"], "message": msg[:300], "count": e.get("count"),
            "source": (e.get("source") or {}).get("component")}))
        messages.setdefault(name, []).append(msg)
    for name, lines in messages.items():  # an Xid (or other known line) quoted by an agent: the catalogue's reading
        # an agent's messages, not a paste: no word-level prior (it reads documents only)
        f = classify_text("\n".join(lines), f"{PREFIX}{name}/messages", word_prior=False)
        if not f.benign and f.incident_hint is not None:
            out.append(f)
    return out
