"""Deterministic completion text: a function of (model revision, prompt); faults corrupt it."""

from __future__ import annotations

import hashlib
import random

_WORDS = (
    "the", "model", "answer", "is", "based", "on", "data", "request", "system", "value", "result", "cluster",
    "node", "service", "latency", "token", "cache", "memory", "query", "report", "user", "time", "error",
    "config", "version", "policy", "input", "output", "batch", "stream", "client", "server", "metric",
    "graph", "table", "record", "field", "index", "window", "signal", "budget", "limit", "queue", "route",
    "shard", "replica", "region", "zone", "backup", "restore", "and", "with", "for", "from", "to", "of",
)


def _rng(*parts: str) -> random.Random:
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))  # noqa: S311 - simulation, not cryptography


def answer(model_revision: str, prompt: str, max_tokens: int) -> str:
    rng = _rng(model_revision, prompt)
    n = max(1, min(max_tokens, 12 + rng.randrange(40)))
    words = [rng.choice(_WORDS) for _ in range(n)]
    words.append(f"{rng.randrange(10_000)}.")
    return " ".join(words).capitalize()


def subtly_wrong(text: str, salt: str) -> str:
    """A plausible answer with one fact changed (what a flipped bit in an activation tends to produce)."""
    rng = _rng(text, salt)
    words = text.split(" ")
    i = rng.randrange(len(words))
    words[i] = rng.choice([w for w in _WORDS if w != words[i]])
    return " ".join(words)


def garbage(text: str, salt: str) -> str:
    rng = _rng(text, salt, "garbage")
    words = text.split(" ")
    head = words[: max(1, len(words) // 3)]
    loop = " ".join(head[-3:])
    noise = "".join(chr(rng.choice((0x07, 0x1B, 0x0B, 0xFFFD))) for _ in range(3))
    return " ".join(head) + " " + " ".join([loop] * 6) + noise
