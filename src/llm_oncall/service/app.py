"""The service: one process holding the store, the watch loop and the HTTP API; stops gracefully."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette.routing import BaseRoute

from llm_oncall.actions.guard import Policy
from llm_oncall.actions.kube import Kube
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.run import Actuator
from llm_oncall.diagnosis.symptoms import Slo
from llm_oncall.incidents import IncidentStore, StoreError
from llm_oncall.incidents.storm import StormGate
from llm_oncall.postmortem.telemetry import TelemetryLog
from llm_oncall.service import api, sources
from llm_oncall.service.config import ServiceConfig
from llm_oncall.service.leader import LeaderElector, LeaseFence, default_identity
from llm_oncall.service.notify import Notifier
from llm_oncall.service.observability import Log, Metrics
from llm_oncall.service.server import HttpServer
from llm_oncall.service.watch import Watcher

Extend = Callable[["Service"], Sequence[BaseRoute]]
"""What the layer above (the web console) adds to the one ASGI app: routes, given the service."""


class Service:
    def __init__(self, cfg: ServiceConfig, log: Log | None = None, extend: Extend | None = None) -> None:
        self.cfg = cfg
        self.log = log or Log(cfg.log_level)
        self.metrics = Metrics()
        self.feed = sources.build(cfg)
        self.store = IncidentStore(cfg.db, clock=self.feed.clock, busy_timeout_s=2.0)
        self.ledger = Ledger(cfg.db, clock=self.feed.clock)
        st = cfg.storm
        self.gate = StormGate(st.dedup_s, st.node_cooldown_s, st.flush_s) if st.enabled else None
        policy = Policy.load(cfg.policy) if cfg.policy is not None else Policy()
        # "a diagnosis older than two scrape intervals is re-checked before execution" (the loop's interval)
        policy.max_diagnosis_age_s = 2 * self.feed.interval_s
        actuator = None
        self.elector: LeaderElector | None = None
        if self.feed.kubeconfig is not None or cfg.in_cluster:
            kube = Kube(self.feed.kubeconfig, self.feed.namespace, timeout_s=cfg.kube_timeout)
            fence = None
            le = cfg.leader_election
            if le.enabled:
                lease_kube = Kube(self.feed.kubeconfig, self.feed.namespace,
                                  timeout_s=min(cfg.kube_timeout, le.renew))
                self.elector = LeaderElector(lease_kube, le.lease_name, le.namespace or lease_kube.namespace,
                                             le.identity or default_identity(), le.duration_s, le.renew, self.log)
                fence = LeaseFence(self.elector, policy, self.ledger)
                self.elector.on_change.append(self._leader_changed)
            actuator = Actuator(kube, self.ledger, policy, mode=cfg.mode, actor="llm-oncall-serve", fence=fence,
                                clock=self.feed.clock, selector=cfg.selector)
        else:
            self.log.warning("no kubeconfig: incidents and diagnoses only, no plans")
        self.watcher = Watcher(self.feed, self.store, self.ledger, actuator, cfg.mode, cfg.interval, self.metrics,
                               self.log, cfg.resolve_after,
                               Slo(cfg.slo.ttft_p99, cfg.slo.itl_p99, cfg.slo.error_share), twin=cfg.twin)
        self.watcher.policy_file = cfg.policy
        self.telemetry = TelemetryLog(cfg.db)
        self.watcher.responder.telemetry = self.telemetry
        if self.elector is not None:
            self.watcher.set_leader(self.elector.is_leader)
        self.metrics.leader.set(0 if self.elector is not None else 1)
        host, port = cfg.host_port
        self.on_stop: list[Callable[[], None]] = []
        """What the layer above started for the service's lifetime (the console's training fleets), stopped first."""
        self.app, self.api = api.build_app(self, extend(self) if extend is not None else ())
        self.http = HttpServer(self.app, host, port, self.log, cfg.read_timeout)
        self.started = time.time()
        self.stopped = threading.Event()
        self.notifier = Notifier(cfg.notify, self.store, self.log, self.url,
                                 on_outcome=lambda o: self.metrics.notifications.labels(o).inc())
        self.watcher.set_notify(self.notifier)

    @property
    def url(self) -> str:
        host, port = self.http.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def _leader_changed(self, leading: bool) -> None:
        self.metrics.leader.set(1 if leading else 0)
        self.metrics.leader_transitions.labels("leader" if leading else "follower").inc()
        if leading:
            self.watcher.wake.set()  # act on the current diagnosis now, not an interval later

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def start(self) -> Service:
        if self.elector is not None:
            self.elector.start()
            self.log.info("leader election", identity=self.elector.identity, leading=self.elector.leading,
                          lease=f"{self.elector.namespace}/{self.elector.name}", holder=self.elector.holder)
        warm = self.watcher.warm()
        if warm:
            self.log.info("warm restart: the recent rounds replayed from the store", rounds=warm)
        done = self.watcher.reconcile()
        if done:
            self.log.info("reconciled intents from before the restart", intents=done)
        self.http.start()
        self.notifier.start()
        self.watcher.start()
        self.log.info("serving", url=self.url, source=self.cfg.source.kind, mode=self.cfg.mode,
                      interval_s=self.cfg.interval, db=str(self.cfg.db))
        return self

    def stop(self) -> None:
        if self.stopped.is_set():
            return
        self.stopped.set()
        self.log.info("stopping")
        self.http.stop()
        for stop in reversed(self.on_stop):
            stop()
        self.watcher.stop()
        self.watcher.close()
        if self.elector is not None:
            self.elector.stop(release=True)  # nothing runs any more: the next replica may take over now
        self.notifier.stop()
        self.feed.close()
        self.store.close()
        self.ledger.close()
        self.telemetry.close()
        self.log.info("stopped")

    def refresh_counts(self) -> None:
        try:
            for status, n in self.store.counts().items():
                self.metrics.incidents.labels(status).set(n)
        except StoreError:
            pass

    def health(self) -> dict[str, Any]:
        last = self.watcher.last_wall
        return {"ok": True, "rounds": self.watcher.rounds, "mode": self.cfg.mode, "source": self.cfg.source.kind,
                "last_diagnosis": self.watcher.last.incident if self.watcher.last else None,
                "last_diagnosis_age_s": round(time.time() - last, 3) if last else None,
                "uptime_s": round(time.time() - self.started, 3),
                "leader": self.is_leader(),
                **({"identity": self.elector.identity, "holder": self.elector.holder}
                   if self.elector is not None else {})}

    def find_action(self, action_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(incident, action as planned: its guard verdict included) of the incident whose plan holds this action;
        the newest incident first."""
        for inc in self.store.incidents():
            if not inc.get("plan_id"):
                continue
            body = self.ledger.plan(inc["plan_id"])
            action = next((a for a in (body or {}).get("actions", []) if a["id"] == action_id), None)
            if action is not None:
                return inc, action
        return None
