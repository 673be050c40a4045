"""What the telemetry itself says changed: engine configuration read from `*_info` metrics, and the HTTP layer
in front of an engine that looks idle.

A restart can change an engine's configuration (a new Deployment spec, a flag flipped by hand). vLLM exports its
cache configuration as the labels of `vllm:cache_config_info`, so a label that differs across a restart is a
change event, named like one a deploy pipeline would send.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from llm_oncall.signals.snapshot import PodSnapshot, Snapshot

Config = tuple[tuple[str, str], ...]

CHANGE_HORIZON_S = 900.0
"""How long a configuration change stays 'recent' (the same look-back as a config_change event)."""


@dataclass(frozen=True, slots=True)
class ConfigChange:
    t: float
    """Time of the first snapshot that showed the new configuration."""
    pod: str
    changed: tuple[tuple[str, str, str], ...]
    """(label, before, after) for each label that differs."""

    @property
    def detail(self) -> str:
        diffs = ", ".join(f"{k} {a} → {b}" for k, a, b in _ordered(self.changed)[:3])
        more = f" (+{len(self.changed) - 3} more)" if len(self.changed) > 3 else ""
        return f"{self.pod} came back with vllm:cache_config_info {diffs}{more}"

    def turned_off(self, key: str) -> bool:
        return any(k == key and a == "True" and b == "False" for k, a, b in self.changed)


_FIRST = ("enable_prefix_caching", "cache_dtype", "block_size", "num_gpu_blocks", "kv_cache_size_tokens")


def _ordered(changed: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return sorted(changed, key=lambda c: (_FIRST.index(c[0]) if c[0] in _FIRST else len(_FIRST), c[0]))


MEASURED = frozenset({"num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens", "kv_cache_max_concurrency"})
"""Labels vLLM derives from memory profiling, not settings: they differ between GPUs and runs of one config."""


def _diff(before: Config, after: Config) -> tuple[tuple[str, str, str], ...]:
    a, b = dict(before), dict(after)
    return tuple((k, a.get(k, "absent"), b.get(k, "absent")) for k in sorted(a.keys() | b.keys())
                 if a.get(k) != b.get(k) and k not in MEASURED)


def config_changes(history: Sequence[Snapshot], horizon_s: float = CHANGE_HORIZON_S) -> list[ConfigChange]:
    """Configuration changes seen in the history (oldest first), those within `horizon_s` of its last snapshot.

    A pod is compared with its own earlier configuration; a pod seen for the first time (a replacement) with the
    configuration most pods had at the previous snapshot.
    """
    if not history:
        return []
    last: dict[str, Config] = {}
    common: Config | None = None
    out: list[ConfigChange] = []
    for snap in history:
        seen: list[Config] = []
        for p in snap.pods:
            if not p.up or not p.cache_config:
                continue
            before = last.get(p.name, common if len(history) > 1 and snap is not history[0] else None)
            if before is not None and before != p.cache_config:
                changed = _diff(before, p.cache_config)
                if changed:
                    out.append(ConfigChange(snap.t, p.name, changed))
            last[p.name] = p.cache_config
            seen.append(p.cache_config)
        if seen:
            common = Counter(seen).most_common(1)[0][0]
    end = history[-1].t
    return [c for c in out if 0 <= end - c.t <= horizon_s]


def prefix_caching_off(pods: Sequence[PodSnapshot]) -> int:
    return sum(1 for p in pods if p.up and dict(p.cache_config).get("enable_prefix_caching") == "False")


def unserved_arrivals(p: PodSnapshot) -> bool:
    """Requests reach the HTTP server while the engine admits and finishes none.

    The engine's gauges come from the engine core: frozen while idle they read 0, and the requests that arrive
    afterwards never show in them. The HTTP server counts a request when it ends — here at the client's timeout
    (vLLM aborts what the client gave up on) — and its in-progress gauge, when exported, counts it while open.
    """
    arrived = (p.http_inference_per_s or 0.0) > 0.0 or (p.http_inprogress or 0.0) > 0.0
    admitted = p.requests_per_s is None or p.requests_per_s > 0.0 or (p.prompt_tokens_per_s or 0.0) > 0.0
    return p.up and arrived and not admitted
