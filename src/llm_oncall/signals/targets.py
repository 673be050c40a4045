"""Target lists from the command line (`[NAME=]URL`) and Prometheus file_sd JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

from llm_oncall.signals.source import Target, valid_name


def _default_name(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "target"
    name = f"{host}-{parts.port}" if parts.port else host
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _metrics_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/metrics"


def parse_target(spec: str, kind: str = "vllm") -> Target:
    """`http://host:8000/metrics` or `name=http://host:8000` (the path defaults to /metrics)."""
    name, sep, url = spec.partition("=")
    if not sep or "://" in name:
        name, url = "", spec
    url = _metrics_url(url.strip())
    name = name.strip() or _default_name(url)
    if not valid_name(name):
        raise ValueError(f"invalid target name {name!r}: use letters, digits, '.', '_' or '-'")
    return Target(name=name, url=url, kind=kind)


def read_file_sd(path: Path, kind: str = "vllm") -> list[Target]:
    """Prometheus file_sd JSON: [{"targets": ["host:port"], "labels": {...}}]."""
    try:
        groups = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read file_sd JSON ({exc})") from exc
    if not isinstance(groups, list):
        raise ValueError(f"{path}: expected a JSON list of target groups")
    targets: list[Target] = []
    for group in groups:
        if not isinstance(group, dict):
            raise ValueError(f"{path}: each target group must be an object")
        labels = {str(k): str(v) for k, v in (group.get("labels") or {}).items()}
        path_label = labels.pop("__metrics_path__", "/metrics")
        scheme = labels.pop("__scheme__", "http")
        group_kind = labels.pop("kind", kind)
        for hostport in group.get("targets", []):
            url = f"{scheme}://{hostport}{path_label}"
            name = labels.get("pod") or _default_name(url)
            if not valid_name(name):
                raise ValueError(f"{path}: invalid target name {name!r}")
            targets.append(Target(name=name, url=url, kind=group_kind, labels=labels))
    return targets
