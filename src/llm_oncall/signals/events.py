"""Cluster events: deploys, config changes, restarts, scaling.

They come from a capture bundle's `events.jsonl`, the simulator's cluster, or are
derived from kube-state-metrics series seen through Prometheus.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

KINDS = ("deploy", "rollout", "config_change", "restart", "scale", "probe")


@dataclass(frozen=True, slots=True)
class Event:
    t: float
    kind: str
    detail: str
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "kind": self.kind, "detail": self.detail, **dict(self.attrs)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Event:
        """Read one `events.jsonl` record; raises ValueError on a malformed one."""
        try:
            t = float(obj["t"])
            kind = str(obj["kind"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"event needs numeric 't' and 'kind': {obj!r}") from exc
        detail = str(obj.get("detail", ""))
        attrs = {k: v for k, v in obj.items() if k not in ("t", "kind", "detail")}
        return cls(t, kind, detail, attrs)


def read_jsonl(lines: Iterable[str], source: str = "events.jsonl") -> tuple[list[Event], list[str]]:
    """Parse events; malformed lines are reported, not fatal."""
    events: list[Event] = []
    problems: list[str] = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not an object")
            events.append(Event.from_json(obj))
        except ValueError as exc:
            problems.append(f"{source}:{number}: {exc}")
    events.sort(key=lambda e: e.t)
    return events, problems


def write_jsonl(events: Iterable[Event]) -> str:
    return "".join(json.dumps(e.to_json(), sort_keys=True) + "\n" for e in events)
