"""Request routing across the ready endpoints of one revision."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol, TypeVar

POLICIES = ("round_robin", "random", "least_loaded", "sticky", "length_pools")
_MASK = (1 << 64) - 1


def mix64(x: int) -> int:
    """splitmix64 finaliser: a stable hash (Python's hash() is salted per process)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


class Endpoint(Protocol):
    @property
    def key(self) -> int: ...

    @property
    def load(self) -> int: ...

    @property
    def long_pool(self) -> bool: ...


E = TypeVar("E", bound="Endpoint")


class Router:
    def __init__(self, policy: str, rng: random.Random, long_threshold: int = 16384) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown routing policy {policy!r}")
        self.policy = policy
        self.rng = rng
        self.long_threshold = long_threshold
        self._rr = 0

    def pick(self, endpoints: Sequence[E], chain: int, prompt_len: int) -> E | None:
        if not endpoints:
            return None
        policy = self.policy
        if policy == "length_pools":
            want_long = prompt_len > self.long_threshold
            pool = [e for e in endpoints if e.long_pool == want_long]
            if pool:
                endpoints = pool
            policy = "sticky"
        if len(endpoints) == 1:
            return endpoints[0]
        if policy == "sticky":
            # rendezvous hashing: a session keeps its pod, and a scale event only moves 1/N of sessions
            h = mix64(chain)
            best = endpoints[0]
            best_score = -1
            for e in endpoints:
                s = mix64(h ^ e.key)
                if s > best_score:
                    best, best_score = e, s
            return best
        if policy == "random":
            return endpoints[self.rng.randrange(len(endpoints))]
        if policy == "least_loaded":
            return min(endpoints, key=lambda e: e.load)
        self._rr += 1
        return endpoints[self._rr % len(endpoints)]
