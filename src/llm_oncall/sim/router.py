"""Request routing across the ready endpoints of one revision."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

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

    @property
    def context_range(self) -> tuple[int, int] | None: ...


E = TypeVar("E", bound="Endpoint")


class Router:
    def __init__(self, policy: str, rng: random.Random, long_threshold: int = 16384) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown routing policy {policy!r}")
        self.policy = policy
        self.rng = rng
        self.long_threshold = long_threshold
        self._rr = 0
        # llm-d's context-length-aware scorer with filtering, once some pod carries `llm-d.ai/context-length-range`:
        # only pods whose range holds the prompt's length, or with no label (they accept any), stay candidates;
        # the policy then picks among them
        self.length_aware = False
        # rendezvous choices are pure functions of (chain, endpoint set): memoise per endpoint-set version
        self._sticky: dict[int, Any] = {}
        self._version = -1

    def pick(self, endpoints: Sequence[E], chain: int, prompt_len: int, version: int = -1) -> E | None:
        """`version` identifies the endpoint set (changes whenever it does); -1 disables memoisation."""
        if not endpoints:
            return None
        policy = self.policy
        if self.length_aware:
            endpoints = [e for e in endpoints
                         if (r := e.context_range) is None or r[0] <= prompt_len <= r[1]]
            if not endpoints:
                return None  # the filter left no candidate: the gateway has no endpoint for this prompt
            version = -1  # the pools are a subset: no memo across them
        elif policy == "sticky" and version >= 0 and version == self._version:
            memo: E | None = self._sticky.get(chain)  # the common case, checked first
            if memo is not None:
                return memo
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
            if version >= 0:
                if version != self._version:
                    self._sticky.clear()
                    self._version = version
                hit: E | None = self._sticky.get(chain)
                if hit is not None:
                    return hit
            # mix64(h ^ key) inlined: this loop runs once per new session/document on every endpoint
            h = mix64(chain)
            best = endpoints[0]
            best_score = -1
            for e in endpoints:
                x = ((h ^ e.key) + 0x9E3779B97F4A7C15) & _MASK
                x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
                x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
                s = x ^ (x >> 31)
                if s > best_score:
                    best, best_score = e, s
            if version >= 0:
                if len(self._sticky) > 200_000:
                    self._sticky.clear()
                self._sticky[chain] = best
            return best
        if policy == "random":
            return endpoints[self.rng.randrange(len(endpoints))]
        if policy == "least_loaded":
            return min(endpoints, key=lambda e: e.load)
        self._rr += 1
        return endpoints[self._rr % len(endpoints)]
