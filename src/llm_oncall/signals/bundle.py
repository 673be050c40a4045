"""Capture bundles: a directory a user can attach to a ticket, and replay it later.

Layout (README: Capture bundle):
    bundle.json                 {"interval": S, "targets": {name: url}, "labels": {...}, "kinds": {...}}
    <target>/<t>.prom           raw /metrics pages, t = seconds since the first scrape
    <target>/<t>.err            a failed scrape at t (the error text)
    <target>/logs.txt           optional log lines of that target
    dcgm/<node>/<t>.prom        dcgm-exporter pages
    events.jsonl                deploys / config changes: {"t": …, "kind": …, "detail": …}
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from llm_oncall.signals.events import Event, read_jsonl, write_jsonl
from llm_oncall.signals.source import Batch, Observation, Target, parse_for, valid_name

BUNDLE_FILE = "bundle.json"
MAX_PAGE_BYTES = 32 * 1024 * 1024


class BundleError(Exception):
    """The directory is not a readable capture bundle."""


def _format_t(t: float) -> str:
    text = f"{t:.3f}".rstrip("0").rstrip(".")
    return text or "0"


class BundleWriter:
    """Writes observations as they arrive, so an interrupted capture keeps what it had."""

    def __init__(self, out: Path, interval_s: float) -> None:
        self.out = out
        self.interval_s = interval_s
        self.t0: float | None = None
        self.targets: dict[str, Target] = {}
        self.events: list[Event] = []
        out.mkdir(parents=True, exist_ok=True)
        if any(out.iterdir()):
            raise BundleError(f"{out} is not empty; choose a new directory for the capture")

    def _dir(self, target: Target) -> Path:
        if target.kind == "dcgm":
            return self.out / "dcgm" / target.name
        return self.out / target.name

    def write(self, obs: Observation) -> None:
        if self.t0 is None:
            self.t0 = obs.t
        self.targets.setdefault(obs.target.name, obs.target)
        d = self._dir(obs.target)
        d.mkdir(parents=True, exist_ok=True)
        stem = _format_t(obs.t - self.t0)
        if obs.text is not None and obs.error is None:
            (d / f"{stem}.prom").write_text(obs.text, encoding="utf-8")
        else:
            (d / f"{stem}.err").write_text(obs.error or "scrape failed", encoding="utf-8")
        self._write_meta()

    def write_logs(self, target: Target, lines: list[str]) -> None:
        self.targets.setdefault(target.name, target)
        d = self._dir(target)
        d.mkdir(parents=True, exist_ok=True)
        with (d / "logs.txt").open("a", encoding="utf-8") as fh:
            fh.writelines(line.rstrip("\n") + "\n" for line in lines)

    def add_events(self, events: list[Event]) -> None:
        if not events:
            return
        t0 = self.t0 or 0.0
        self.events.extend(Event(e.t - t0, e.kind, e.detail, e.attrs) for e in events)
        (self.out / "events.jsonl").write_text(write_jsonl(self.events), encoding="utf-8")

    def _write_meta(self) -> None:
        meta: dict[str, Any] = {
            "interval": self.interval_s,
            "targets": {n: t.url for n, t in self.targets.items()},
            "kinds": {n: t.kind for n, t in self.targets.items() if t.kind != "vllm"},
            "labels": {n: dict(t.labels) for n, t in self.targets.items() if t.labels},
            "t0_unix": self.t0,
        }
        tmp = self.out / (BUNDLE_FILE + ".tmp")
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(self.out / BUNDLE_FILE)


class ReplaySource:
    """A capture bundle as a telemetry Source: one batch with everything in it."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise BundleError(f"{root}: not a directory")
        self.root = root
        self.meta = self._read_meta()
        try:
            self.interval_s = float(self.meta.get("interval") or 15.0)
        except (TypeError, ValueError):
            self.interval_s = math.nan
        if not math.isfinite(self.interval_s) or self.interval_s <= 0:
            raise BundleError(f"{root / BUNDLE_FILE}: interval must be a positive number")
        self._done = False

    def _read_meta(self) -> dict[str, Any]:
        path = self.root / BUNDLE_FILE
        if not path.exists():
            return {}
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BundleError(f"{path}: not valid JSON ({exc})") from exc
        if not isinstance(meta, dict):
            raise BundleError(f"{path}: expected a JSON object")
        for key in ("targets", "labels", "kinds"):
            if key in meta and not isinstance(meta[key], dict):
                raise BundleError(f"{path}: {key!r} must be an object keyed by target name")
        return meta

    def _target(self, name: str, kind: str) -> Target:
        labels = self.meta.get("labels", {}).get(name, {})
        kinds = self.meta.get("kinds", {})
        urls = self.meta.get("targets", {})
        return Target(name=name, url=urls.get(name), kind=kinds.get(name, kind),
                      labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {})

    def collect(self) -> Batch:
        batch = Batch()
        if self._done:
            return batch
        self._done = True
        found = False
        for d in sorted(p for p in self.root.iterdir() if p.is_dir()):
            if d.name == "dcgm":
                for node in sorted(p for p in d.iterdir() if p.is_dir()):
                    found |= self._read_target_dir(node, "dcgm", batch)
            else:
                found |= self._read_target_dir(d, "vllm", batch)
        if not found:
            raise BundleError(f"{self.root}: no <target>/<t>.prom files found — is this a capture bundle?")
        events_path = self.root / "events.jsonl"
        if events_path.exists():
            events, problems = read_jsonl(events_path.read_text(encoding="utf-8", errors="replace").splitlines(),
                                          str(events_path))
            batch.events.extend(events)
            batch.problems.extend(problems)
        return batch

    def _read_target_dir(self, d: Path, kind: str, batch: Batch) -> bool:
        if not valid_name(d.name):
            batch.problems.append(f"{d}: skipped (not a valid target name)")
            return False
        target = self._target(d.name, kind)
        found = False
        for f in d.iterdir():
            if f.suffix not in (".prom", ".err"):
                continue
            try:
                t = float(f.stem)
                if not math.isfinite(t):
                    raise ValueError(f.stem)
            except ValueError:
                batch.problems.append(f"{f}: skipped (file name is not a time in seconds)")
                continue
            if f.suffix == ".err":
                batch.observations.append(Observation(target, t, None, f.read_text(errors="replace")[:500]))
                continue
            size = f.stat().st_size
            if size > MAX_PAGE_BYTES:
                batch.problems.append(f"{f}: skipped ({size} bytes is larger than a /metrics page can be)")
                continue
            text = f.read_text(encoding="utf-8", errors="replace")
            page = parse_for(target.kind, text)
            if page.errors:
                batch.problems.append(f"{f}: {page.errors} unreadable line(s) ignored")
            batch.observations.append(Observation(target, t, page))
            found = True
        logs = d / "logs.txt"
        if logs.exists():
            batch.logs[str(logs)] = logs.read_text(encoding="utf-8", errors="replace").splitlines()
        return found
