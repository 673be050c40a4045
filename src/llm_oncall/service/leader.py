"""Leader election over a `coordination.k8s.io/v1` Lease (client-go's algorithm), and the fence every execution
passes through.

Two or more `serve` replicas share one Lease. Each `tick()` reads it: nobody holds it, or it is ours, or its
holder has not renewed for `leaseDurationSeconds` *as observed on this replica's own monotonic clock* (no
comparison of clocks across machines: a record counts as renewed when it changed since we last looked) — then we
write ourselves in with a PUT carrying the resourceVersion we read. A racing replica gets a 409 and stays a
follower. The leader renews every `renew_s`; if it cannot renew for `duration_s - renew_s` (the renew deadline) it
stops acting before anyone else may acquire (`duration_s` after its last renew).

Fencing: `LeaseFence.begin()` runs immediately before each API call of an action. It is a conditional write of the
Lease (our resourceVersion, renewTime now) that also records the action (kind, target, idempotency key, cooldown)
in an annotation of the Lease: if it fails we are not the leader and nothing is sent; if it succeeds nobody can
take the lease for a whole `duration_s`, and whoever takes it next reads the record with the lease. So the
cluster, not a replica's own disk, says what was done: a new leader with an empty SQLite file does not repeat
an action the old one took (its guard sees the cooldown; `begin` refuses a live record for the same target).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from llm_oncall.actions.guard import Policy
from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, Plan
from llm_oncall.service.observability import Log

RECORD = "llm-oncall.io/actions"
"""Annotation on the Lease: JSON list of the actions the leaders took (newest last), pruned to live cooldowns."""
MAX_RECORDS = 50


def micro_time(t: float) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_identity() -> str:
    """The pod name (its hostname in Kubernetes) plus a per-process suffix: a restarted process is a new
    candidate, never a holder that thinks it still leads."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class LeaderElector:
    def __init__(self, kube: Kube, name: str, namespace: str, identity: str, duration_s: float, renew_s: float,
                 log: Log | None = None, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        if not 0 < renew_s < duration_s / 2:
            raise ValueError("renew_s must be > 0 and < duration_s / 2 (the renew deadline is duration - renew)")
        self.kube = kube
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.duration_s = duration_s
        self.renew_s = renew_s
        self.deadline_s = duration_s - renew_s
        """A leader that has not renewed for this long stops acting (before anyone else may take over)."""
        self.log = log or Log("warning")
        self.clock = clock
        self.wall = wall
        self.lock = threading.RLock()
        self.lease: dict[str, Any] | None = None
        """The Lease as last read or written (its resourceVersion is the one our next write carries)."""
        self.leading = False
        self.valid_until = 0.0
        self.observed: tuple[Any, ...] | None = None
        self.observed_at = 0.0
        self.transitions = 0
        self.on_acquire: list[Callable[[dict[str, Any]], None]] = []
        self.on_change: list[Callable[[bool], None]] = []
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    # ---- state --------------------------------------------------------------------------------------
    def is_leader(self) -> bool:
        """True while we hold the lease and our last renew is younger than the renew deadline."""
        with self.lock:
            if self.leading and self.clock() >= self.valid_until:
                self._lose("renew deadline passed without a successful renew")
            return self.leading

    @property
    def holder(self) -> str:
        return str(((self.lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def _lose(self, why: str) -> None:
        if self.leading:
            self.leading = False
            self.log.warning("leadership lost: no more actions from this replica", identity=self.identity, why=why)
            for cb in self.on_change:
                cb(False)

    def _won(self, lease: dict[str, Any], started: float, acquired: bool) -> None:
        self.lease = lease
        self.valid_until = started + self.deadline_s
        self._observe(lease, started)
        if not self.leading:
            self.leading = True
            self.transitions += 1
            self.log.info("leadership acquired", identity=self.identity, lease=f"{self.namespace}/{self.name}",
                          transitions=lease["spec"].get("leaseTransitions"), took_over=acquired)
            for acq in self.on_acquire:
                acq(lease)
            for cb in self.on_change:
                cb(True)

    def _observe(self, lease: dict[str, Any], now: float) -> None:
        spec = lease.get("spec") or {}
        rec = (spec.get("holderIdentity"), spec.get("renewTime"), lease["metadata"].get("resourceVersion"))
        if rec != self.observed:
            self.observed, self.observed_at = rec, now

    # ---- one try ------------------------------------------------------------------------------------
    def tick(self) -> bool:
        """Acquire or renew once; True when this replica leads afterwards."""
        with self.lock:
            started = self.clock()
            try:
                lease = self.kube.get("Lease", self.name, self.namespace)
            except KubeError as exc:
                if exc.code != 404:
                    return self._failed(started, exc)
                return self._create(started)
            self.lease = lease
            self._observe(lease, started)
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            duration = float(spec.get("leaseDurationSeconds") or self.duration_s)
            if holder and holder != self.identity and started < self.observed_at + duration:
                self._lose(f"{holder} holds the lease")
                return False
            return self._write(lease, started, take=holder != self.identity)

    def _new_spec(self, old: dict[str, Any], take: bool) -> dict[str, Any]:
        now = micro_time(self.wall())
        spec = dict(old)
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=round(self.duration_s), renewTime=now)
        if take or not spec.get("acquireTime"):
            spec["acquireTime"] = now
        if take and old:  # a new holder (also after a release: client-go counts every change of holder)
            spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
        spec.setdefault("leaseTransitions", 0)
        return spec

    def _create(self, started: float) -> bool:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {"app.kubernetes.io/name": "llm-oncall"}},
                "spec": self._new_spec({}, take=True)}
        try:
            lease = self.kube.create("Lease", body, self.namespace)
        except KubeError as exc:
            if exc.code == 409:  # another replica created it first
                self._lose("another replica created the lease")
                return False
            return self._failed(started, exc)
        self._won(lease, started, acquired=True)
        return True

    def _write(self, lease: dict[str, Any], started: float, take: bool,
               annotations: dict[str, str] | None = None) -> bool:
        body: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {k: v for k, v in lease["metadata"].items() if k != "managedFields"},
                                "spec": self._new_spec(lease.get("spec") or {}, take)}
        if annotations is not None:
            body["metadata"]["annotations"] = {**(lease["metadata"].get("annotations") or {}), **annotations}
        try:
            new = self.kube.replace("Lease", body, self.namespace)
        except KubeError as exc:
            if exc.code == 409:
                self._lose("the lease changed under us (409: another replica wrote it)")
                return False
            return self._failed(started, exc)
        self._won(new, started, acquired=take)
        return True

    def _failed(self, started: float, exc: KubeError) -> bool:
        self.log.warning("lease request failed", identity=self.identity, error=str(exc))
        return self.is_leader()

    def release(self) -> None:
        """On a clean stop: give the lease up (holder empty) so another replica takes over at its next try."""
        with self.lock:
            if not self.leading or self.lease is None:
                return
            lease = self.lease
            spec = {**(lease.get("spec") or {}), "holderIdentity": "", "leaseDurationSeconds": 1,
                    "renewTime": micro_time(self.wall())}
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {k: v for k, v in lease["metadata"].items() if k != "managedFields"}, "spec": spec}
            try:
                self.lease = self.kube.replace("Lease", body, self.namespace)
            except KubeError as exc:
                self.log.warning("could not release the lease", error=str(exc))
            self._lose("released on shutdown")

    # ---- records of actions (the Lease's annotation) ------------------------------------------------
    def records(self) -> list[dict[str, Any]]:
        raw = ((self.lease or {}).get("metadata") or {}).get("annotations", {}).get(RECORD)
        try:
            out = json.loads(raw) if raw else []
        except ValueError:
            return []
        return [r for r in out if isinstance(r, dict)] if isinstance(out, list) else []

    def write_records(self, records: list[dict[str, Any]]) -> str | None:
        """Renew with these records; None on success, else why not (then we no longer lead)."""
        with self.lock:
            started = self.clock()
            if not self.is_leader() or self.lease is None:
                return f"not the leader (the lease {self.namespace}/{self.name} is held by {self.holder or 'nobody'})"
            now = self.wall()
            live = [r for r in records if float(r.get("until", 0)) > now or r is records[-1]][-MAX_RECORDS:]
            if not self._write(self.lease, started, take=False,
                               annotations={RECORD: json.dumps(live, separators=(",", ":"), sort_keys=True)}):
                return (f"leadership not confirmed: the write to the lease {self.namespace}/{self.name} failed "
                        f"(holder now {self.holder or 'unknown'})")
            return None

    # ---- the loop -----------------------------------------------------------------------------------
    def start(self) -> LeaderElector:
        self.tick()
        self.thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self.thread.start()
        return self

    def next_try_in(self) -> float:
        """The leader renews every renew_s. A follower looks four times as often (a GET each: it sees a renew at
        most renew_s / 4 after it happened, and the lease's expiry counts from then) and never later than the
        moment the lease it watches expires: a takeover comes at most renew_s / 4 after the holder's last renew +
        the lease duration."""
        with self.lock:
            if self.leading:
                return self.renew_s
            poll = max(0.05, self.renew_s / 4)
            if not self.holder:
                return poll
            duration = float(((self.lease or {}).get("spec") or {}).get("leaseDurationSeconds") or self.duration_s)
            return min(poll, max(0.05, self.observed_at + duration - self.clock() + 0.01))

    def _run(self) -> None:
        while not self.stopping.wait(self.next_try_in()):
            try:
                self.tick()
            except Exception as exc:  # the loop must go on; is_leader() runs out on its own
                self.log.error("leader election tick failed", error=f"{type(exc).__name__}: {exc}")

    def stop(self, release: bool = True) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(10)
        if release:
            self.release()


class LeaseFence:
    """Only the Lease holder executes, and the Lease records what it executed (see the module doc)."""

    def __init__(self, elector: LeaderElector, policy: Policy, ledger: Ledger | None = None) -> None:
        self.elector = elector
        self.policy = policy
        self.ledger = ledger
        elector.on_acquire.append(self._acquired)

    def _acquired(self, lease: dict[str, Any]) -> None:
        self.import_records()

    def import_records(self) -> int:
        """Cooldowns (and executed keys) recorded by earlier leaders → this replica's ledger, so its guard
        refuses what another replica already did. Returns how many records were new here."""
        if self.ledger is None:
            return 0
        n = 0
        for r in self.elector.records():
            if r.get("status") == "failed" or not r.get("kind") or not r.get("target"):
                continue
            until = float(r.get("until") or 0)
            cur = self.ledger.cooldown_until(r["kind"], r["target"])
            if cur is None or cur < until:
                self.ledger.start_cooldown(r["kind"], r["target"], until - self.elector.wall(), self.elector.wall())
                n += 1
            key = str(r.get("key") or "")
            if key and self.ledger.execution(key) is None and self.ledger.claim(key, str(r.get("action_id", "")),
                                                                                 r["kind"], r["target"]):
                self.ledger.finish(key, "executed", {"recorded_by": r.get("by"), "from": "the lease's record"})
        return n

    def begin(self, p: Plan, a: Action) -> str | None:
        el = self.elector
        with el.lock:
            if not el.is_leader():
                return f"not the leader: {el.holder or 'nobody'} holds the lease {el.namespace}/{el.name}"
            now = el.wall()
            records = el.records()
            target = a.target.ref()
            for r in records:
                if r.get("kind") == a.kind and r.get("target") == target and r.get("status") != "failed" \
                        and float(r.get("until") or 0) > now:
                    return (f"the lease records {a.kind} on {target} by {r.get('by')} at "
                            f"{micro_time(float(r.get('at') or 0))} (cooldown until "
                            f"{micro_time(float(r['until']))}): not repeated")
            records.append({"key": a.idempotency_key, "action_id": a.id, "kind": a.kind, "target": target,
                            "by": el.identity, "at": now, "until": now + self.policy.cooldown(a.kind),
                            "status": "started"})
            return el.write_records(records)

    def end(self, p: Plan, a: Action) -> None:
        """The outcome into the record: a failed action's record no longer blocks a retry."""
        el = self.elector
        with el.lock:
            records = el.records()
            mine = [r for r in records if r.get("action_id") == a.id and r.get("by") == el.identity]
            if not mine:
                return
            mine[-1]["status"] = "executed" if a.status == "executed" else "failed"
            el.write_records(records)
