"""The autopilot loop: take telemetry batches, keep history, diagnose after every scrape.

Stateful glue around the pure parts (Store → Snapshot → Features → engine.diagnose).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from llm_oncall.diagnosis.engine import Diagnosis, diagnose
from llm_oncall.diagnosis.features import RECENT, Features, compute
from llm_oncall.diagnosis.symptoms import Slo
from llm_oncall.evidence.classify import classify_text
from llm_oncall.evidence.model import Finding
from llm_oncall.runbooks.loader import Registry, load_registry
from llm_oncall.signals.snapshot import Snapshot
from llm_oncall.signals.source import Batch
from llm_oncall.signals.store import Store

HISTORY = 80
LOG_TAIL = 400
LIVE_SCRAPES_KEPT = 40
"""Raw scrapes kept per target when live: windows span 2 scrapes and baselines live in the Snapshot
history, so 40 scrapes (10 minutes at 15 s) bound the heartbeat look-back and memory."""
LIVE_EVENTS_KEPT_S = 3600.0
"""Cluster events kept when live.  The diagnosis looks back at most 30 minutes (rollouts; config changes
15 minutes, restarts 4 scrapes); "has this down pod ever restarted" needs only each known pod's latest
restart, which the store keeps regardless of age.  Without this the event list grew for the whole run and
every Snapshot (HISTORY of them) carried all of it."""


MIN_BASELINE = 3
"""Snapshots a baseline needs before it is worth freezing."""
RELEASE_AFTER = 3
"""Evaluations with every symptom green after which a frozen baseline is released (the fleet recovered)."""


class Autopilot:
    def __init__(self, interval_s: float = 15.0, registry: Registry | None = None, lang: str = "en",
                 window_s: float | None = None, scrapes_kept: int = LIVE_SCRAPES_KEPT, slo: Slo | None = None) -> None:
        self.interval_s = interval_s
        self.registry = registry or load_registry()
        self.lang = lang
        self.window_s = window_s or 2 * interval_s
        self.store = Store(interval_s=interval_s, capacity=scrapes_kept)
        self.snapshots: deque[Snapshot] = deque(maxlen=HISTORY)
        self.features: deque[Features] = deque(maxlen=HISTORY)
        self.findings: dict[str, Finding] = {}
        self._log_tail: dict[str, deque[str]] = {}
        self.slo = slo
        # While a symptom is red the baseline stays the snapshots from before it turned red: an incident that
        # lasts longer than the history must not become its own baseline.
        self.frozen_baseline: list[Snapshot] | None = None
        self._green = 0
        self.last: Diagnosis | None = None

    def observe(self, batch: Batch) -> None:
        self.store.add(batch)
        for name, lines in batch.logs.items():
            tail = self._log_tail.setdefault(name, deque(maxlen=LOG_TAIL))
            tail.extend(lines)
            finding = classify_text("\n".join(tail), name, stream=True)  # a container's own output
            self.findings[name] = finding

    def add_findings(self, findings: Sequence[Finding]) -> None:
        for f in findings:
            self.findings[f.file] = f

    def replace_findings(self, prefix: str, findings: Sequence[Finding]) -> None:
        """The findings of one reader (files named `prefix…`) as it sees them now: those it no longer reports go."""
        for name in [n for n in self.findings if n.startswith(prefix)]:
            del self.findings[name]
        self.add_findings(findings)

    def step(self, at: float | None = None) -> Diagnosis:
        snap = self.store.snapshot(at=at, window_s=self.window_s)
        if at is None:
            # Live: targets that left discovery long ago (replaced pods) are only memory now, and so are
            # events older than any look-back.
            gone = self.store.prune(snap.t - HISTORY * self.interval_s, snap.t - LIVE_EVENTS_KEPT_S)
            if gone:
                # Their log tails (no more lines will come); their findings stay, as they feed the diagnosis.
                prefixes = tuple(f"{name}/" for name in gone)
                for log in [log for log in self._log_tail if log.startswith(prefixes)]:
                    del self._log_tail[log]
        if self.snapshots and self.snapshots[-1].t == snap.t:
            self.snapshots.pop()
            self.features.pop()
        self.snapshots.append(snap)
        history = list(self.snapshots)
        feats = compute(history, list(self.findings.values()), self.interval_s, self.frozen_baseline, self.slo)
        self._track_baseline(history, feats)
        self.features.append(feats)
        self.last = diagnose(list(self.features), self.registry, self.lang, previous=self.last)
        return self.last

    def _track_baseline(self, history: list[Snapshot], feats: Features) -> None:
        red = feats.get("symptom") is True
        if self.frozen_baseline is None:
            if red and len(history) - RECENT >= MIN_BASELINE:
                self.frozen_baseline = history[:-RECENT]
                self._green = 0
            return
        self._green = 0 if red else self._green + 1
        if self._green >= RELEASE_AFTER:
            self.frozen_baseline = None
