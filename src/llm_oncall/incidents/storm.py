"""Event-storm suppression in front of the store: a failing GPU fires the same alert (or Xid, or Kubernetes Event)
many times a second, and a tool that writes each one falls behind.

- **Deduplicated per node and GPU**: a firing event for a (node, gpu, alertname) already seen within `dedup_s` is
  counted, not written. Resolved events always pass (they close what was opened).
- **One incident per node per cooldown**: after an incident opened for a node, that node's new firing events of
  the same runbook (`incident` label) within `node_cooldown_s` join it — counted on it — instead of opening
  another, even after it resolved.
- The counts reach the incident's timeline as one `suppressed` summary per incident at most every `flush_s`.

Events without a `node` label (the user's own rules) pass through untouched. The gate is in memory: a restart
forgets it, and the first event after is written — the store's own fingerprint dedup still holds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.incidents.store import IncidentStore

Alert = Mapping[str, Any]


@dataclass
class _Seen:
    last: float
    suppressed: int = 0


@dataclass
class StormGate:
    dedup_s: float = 300.0
    node_cooldown_s: float = 1800.0
    flush_s: float = 10.0
    max_keys: int = 100_000
    """Bound on remembered (node, gpu, alertname) keys: the oldest are forgotten first."""
    seen: dict[tuple[str, str, str], _Seen] = field(default_factory=dict)
    node_incident: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)
    """(node, runbook label) → (incident id, opened at) of the node's last incident of that runbook (a different
    runbook's alert on the same node — an NVLink hang beside an ECC storm — is a different incident)."""
    pending: dict[str, dict[str, int]] = field(default_factory=dict)
    """incident id → node → events suppressed since the last flush."""
    last_flush: float = 0.0
    counts: dict[str, int] = field(default_factory=lambda: {"admitted": 0, "deduplicated": 0, "joined": 0})
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @staticmethod
    def key(a: Alert) -> tuple[str, str, str] | None:
        labels = a.get("labels") or {}
        node = labels.get("node") or labels.get("Hostname")
        if not node:
            return None
        return str(node), str(labels.get("gpu") or labels.get("UUID") or ""), str(labels.get("alertname", ""))

    def admit(self, alerts: Iterable[Alert], now: float) -> list[Alert]:
        """The events to write; the rest are counted (`pending`, flushed by `flush`)."""
        out: list[Alert] = []
        for a in alerts:
            k = self.key(a)
            if k is None or a.get("status") != "firing":
                out.append(a)
                continue
            node = self._node(a, k)
            s = self.seen.get(k)
            if s is not None and now - s.last < self.dedup_s:
                s.suppressed += 1
                self._count(node, "deduplicated")
                continue
            joined = self.node_incident.get(node)
            if joined is not None and now - joined[1] < self.node_cooldown_s:
                # a new GPU or alert (or one past its dedup window) on a node whose incident is recent: that
                # incident's storm, not a new incident
                self.seen[k] = _Seen(now, 1)
                self._count(node, "joined")
                continue
            self.seen[k] = _Seen(now)
            self.counts["admitted"] += 1
            out.append(a)
        if len(self.seen) > self.max_keys:
            for old in sorted(self.seen, key=lambda x: self.seen[x].last)[: len(self.seen) - self.max_keys]:
                del self.seen[old]
        return out

    @staticmethod
    def _node(a: Alert, k: tuple[str, str, str]) -> tuple[str, str]:
        return k[0], str((a.get("labels") or {}).get("incident") or "")

    def _count(self, node: tuple[str, str], how: str) -> None:
        self.counts[how] += 1
        joined = self.node_incident.get(node)
        if joined is not None:
            per = self.pending.setdefault(joined[0], {})
            per[node[0]] = per.get(node[0], 0) + 1

    def opened(self, incident_id: str | None, alerts: Iterable[Alert], now: float) -> None:
        """The store put these (admitted) events on this incident: their nodes' storms go to it."""
        if incident_id is None:
            return
        for a in alerts:
            k = self.key(a)
            if k is not None and a.get("status") == "firing":
                node = self._node(a, k)
                cur = self.node_incident.get(node)
                if cur is None or cur[0] != incident_id:
                    self.node_incident[node] = (incident_id, now)

    def flush(self, store: IncidentStore, now: float, force: bool = False) -> int:
        """Write the suppressed counts as one timeline event per incident (at most every `flush_s`)."""
        if not self.pending or (not force and now - self.last_flush < self.flush_s):
            return 0
        pending, self.pending, self.last_flush = self.pending, {}, now
        for iid, per_node in pending.items():
            store.event(iid, "suppressed", "storm-gate", {"events": sum(per_node.values()), "by_node": per_node,
                                                           "dedup_s": self.dedup_s,
                                                           "node_cooldown_s": self.node_cooldown_s})
        return len(pending)


def ingest(store: IncidentStore, gate: StormGate | None, group_key: str, alerts: Sequence[Alert], now: float,
           actor: str = "alertmanager") -> tuple[str | None, int, int]:
    """A webhook's alerts through the gate into the store: (incident id, new alerts written, suppressed)."""
    if gate is None:
        iid, new = store.add_alerts(group_key, alerts, actor)
        return iid, new, 0
    with gate.lock:
        passed = gate.admit(alerts, now)
        iid, new = store.add_alerts(group_key, passed, actor) if passed else (None, 0)
        gate.opened(iid, passed, now)
        if iid is None and alerts:
            k = gate.key(alerts[0])
            iid = gate.node_incident.get(gate._node(alerts[0], k), (None, 0.0))[0] if k is not None else None
        gate.flush(store, now)
    return iid, new, len(alerts) - len(passed)
