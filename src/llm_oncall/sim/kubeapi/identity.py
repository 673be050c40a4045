"""Object identity as the API server keeps it: timestamps on the fleet's clock, stable uids, metadata and owner
references, and what the server remembers beyond the fleet (Deployment revision numbers, creation times)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from llm_oncall.sim.fleet import Fleet


def ts(fleet: Fleet, t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(fleet.cfg.epoch + t))


def uid_of(*parts: object) -> str:
    h = hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


@dataclass
class Bookkeeping:
    """What the API server remembers beyond the fleet: Deployment revision numbers, creation times."""

    rs_revision: dict[str, int] = field(default_factory=dict)
    rs_history: dict[str, list[int]] = field(default_factory=dict)
    created: dict[tuple[str, ...], float] = field(default_factory=dict)
    next_revision: int = 1

    def revision_number(self, rev: str) -> int:
        if rev not in self.rs_revision:
            self.rs_revision[rev] = self.next_revision
            self.next_revision += 1
        return self.rs_revision[rev]

    def promote(self, rev: str) -> None:
        """The Deployment rolled back to an old ReplicaSet: it gets the next revision number (kubectl/controller)."""
        old = self.rs_revision.get(rev)
        if old is not None and old != self.next_revision - 1:
            self.rs_history.setdefault(rev, []).append(old)
            self.rs_revision[rev] = self.next_revision
            self.next_revision += 1

    def created_at(self, key: tuple[str, ...], t: float) -> float:
        return self.created.setdefault(key, t)


def object_meta(name: str, ns: str | None, labels: dict[str, str] | None = None,
          annotations: dict[str, str] | None = None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name}
    if ns is not None:
        m["namespace"] = ns
    if labels:
        m["labels"] = labels
    if annotations:
        m["annotations"] = annotations
    if owner:
        m["ownerReferences"] = [owner]
    return m


def owner_ref(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}
