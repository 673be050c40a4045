"""Selectors as the API server reads them: the query syntax of labelSelector and fieldSelector (`a=b`, `a==b`,
`a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`), LabelSelector objects (matchLabels, matchExpressions), and the
fields each kind can be selected on."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from llm_oncall.sim.kubeapi.model import ApiStatus


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector object (matchLabels, matchExpressions); an empty one selects nothing here (PDBs)."""
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if (op == "In" and labels.get(k) not in vals) or (op == "NotIn" and labels.get(k) in vals) or (
                op == "Exists" and k not in labels) or (op == "DoesNotExist" and k in labels):
            return False
    return True


def object_fields(obj: dict[str, Any]) -> dict[str, str]:
    """The fields a fieldSelector can name on this object."""
    m = obj["metadata"]
    out = {"metadata.name": m["name"], "metadata.namespace": m.get("namespace", "")}
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod" or "nodeName" in spec:
        out["spec.nodeName"] = str(spec.get("nodeName", ""))
        out["status.phase"] = str((obj.get("status") or {}).get("phase", ""))
    if "unschedulable" in spec or obj.get("kind") == "Node":
        out["spec.unschedulable"] = "true" if spec.get("unschedulable") else "false"
    return out


_REQ = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")
_SET = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EXISTS = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s*$")


def parse_selector(text: str) -> Callable[[dict[str, str]], bool]:
    """Label (and field) selector syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`."""
    reqs: list[tuple[str, str, frozenset[str]]] = []
    for part in _split(text or ""):
        m = _REQ.match(part)
        if m:
            k, op, v = m.groups()
            reqs.append(("notin" if op == "!=" else "in", k, frozenset({v})))
            continue
        m = _SET.match(part)
        if m:
            reqs.append((m.group(2), m.group(1), frozenset(x.strip() for x in m.group(3).split(","))))
            continue
        m = _EXISTS.match(part)
        if m:
            reqs.append(("!" if m.group(1) else "exists", m.group(2), frozenset()))
            continue
        raise ApiStatus(400, f"unable to parse requirement: {part!r}")

    def match(labels: dict[str, str]) -> bool:
        for op, k, vals in reqs:
            v = labels.get(k)
            if (op == "in" and v not in vals) or (op == "notin" and v in vals) or (op == "exists" and v is None) or (
                    op == "!" and v is not None):
                return False
        return True
    return match


def _split(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p for p in out if p.strip()]
