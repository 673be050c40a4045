"""Client populations: multi-turn chat sessions with growing shared prefixes, RAG with long documents.

Arrivals are open-loop (Poisson at the configured rate); a chat arrival continues the session that has been
thinking longest, or opens a new one, so the share of follow-up turns (and thus of reusable prefixes) comes out
of think time and conversation length rather than being set.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from math import exp as _exp
from math import log as _log
from math import sqrt as _sqrt
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_oncall.sim.pods import Pod

SESSION_CHAIN_BASE = 1
DOC_CHAIN_BASE = 1 << 40
UNIQUE_CHAIN_BASE = 1 << 41
NV_MAGICCONST = 4 * _exp(-0.5) / _sqrt(2.0)  # as in the random module


@dataclass(frozen=True)
class ClientSpec:
    name: str
    kind: str = "chat"  # "chat" | "rag" | "rag-long"
    share: float = 1.0  # share of the fleet's arrival rate
    retry: str = "backoff"  # "none" | "immediate" (unbounded) | "backoff" (jittered exponential + budget)
    max_tokens: int = 2048
    timeout_s: float = 60.0
    retry_budget: float = 0.1  # backoff only: retries allowed per first attempt
    max_attempts: int = 4  # backoff only
    mean_turns: float = 6.0
    think_s: float = 15.0
    user_tokens: float = 150.0
    answer_tokens: float = 250.0
    doc_tokens: tuple[int, int] = (2000, 6000)
    docs: int = 400
    feedback_rate: float = 0.2


DEFAULT_CLIENTS: tuple[ClientSpec, ...] = (
    ClientSpec("web-chat", "chat", 0.6),
    ClientSpec("mobile-app", "chat", 0.3, retry="backoff", timeout_s=45.0),
    ClientSpec("rag-search", "rag", 0.1, max_tokens=1024, answer_tokens=200.0),
)


class Job:
    """One client request across all its attempts."""

    __slots__ = (
        "attempts", "chain", "client", "created", "jid", "last_tag", "long", "max_tokens", "out_len", "pod",
        "prompt_len", "session", "system_len",
    )

    def __init__(self, jid: int, client: int, created: float, prompt_len: int, out_len: int, max_tokens: int,
                 chain: int, system_len: int, session: Session | None) -> None:
        self.jid = jid
        self.client = client
        self.created = created
        self.prompt_len = prompt_len
        self.out_len = out_len
        self.max_tokens = max_tokens
        self.chain = chain
        self.system_len = system_len
        self.session = session
        self.attempts = 0
        self.last_tag = -1
        self.long = False
        self.pod: Pod | None = None  # serving the live attempt (`last_tag`)


class Session:
    __slots__ = ("history", "sid", "turns_left")

    def __init__(self, sid: int, history: int, turns_left: int) -> None:
        self.sid = sid
        self.history = history
        self.turns_left = turns_left


def _lognormal_mu(mean: float, sigma: float = 0.6) -> float:
    return math.log(mean) - sigma * sigma / 2.0


def _lognormvariate(rand: Callable[[], float], mu: float, sigma: float = 0.6) -> float:
    """`Random.lognormvariate` inlined (Kinderman-Monahan, the same draws and floats) without two call levels."""
    while True:
        u1 = rand()
        u2 = 1.0 - rand()
        z = NV_MAGICCONST * (u1 - 0.5) / u2
        if z * z / 4.0 <= -_log(u2):
            return _exp(mu + z * sigma)


_MU_60 = _lognormal_mu(60.0)


class Workload:
    def __init__(self, specs: tuple[ClientSpec, ...], rng: random.Random, system_len: int) -> None:
        self.specs = list(specs)
        self.rng = rng
        self.system_len = system_len
        self.next_jid = 0
        self.next_sid = 0
        self.thinking: list[list[tuple[float, int, Session]]] = [[] for _ in specs]
        self.weights: list[float] = [s.share for s in specs]
        # fault knobs (set by faults through the fleet, never by diagnosis)
        self.unique_prefix_share = 0.0
        self.max_tokens_cap: int | None = None
        self._mu: list[tuple[ClientSpec, float, float] | None] = []

    def prewarm(self, rate: float) -> None:
        """Start with conversations already in progress, so t=0 looks like the middle of a working day."""
        total_w = sum(self.weights) or 1.0
        rng = self.rng
        for idx, spec in enumerate(self.specs):
            if spec.kind != "chat":
                continue
            heap = self.thinking[idx]
            for _ in range(int(rate * spec.share / total_w * spec.think_s)):
                self.next_sid += 1
                turns = max(2, int(rng.expovariate(1.0 / spec.mean_turns)) + 2)
                done = rng.randrange(1, turns)
                history = self.system_len + int(done * (spec.user_tokens + spec.answer_tokens))
                s = Session(self.next_sid, history, turns - done)
                heapq.heappush(heap, (rng.uniform(0.0, spec.think_s), s.sid, s))

    def set_share(self, idx: int, share: float) -> None:
        self.weights[idx] = share

    def add_client(self, spec: ClientSpec) -> int:
        self.specs.append(spec)
        self.weights.append(spec.share)
        self.thinking.append([])
        return len(self.specs) - 1

    def arrivals(self, t0: float, t1: float, rate: float) -> list[Job]:
        """Poisson arrivals in [t0, t1) at `rate` req/s, split over clients by weight."""
        out: list[Job] = []
        if rate <= 0.0:
            return out
        total_w = sum(self.weights)
        if total_w <= 0.0:
            return out
        cum: list[float] = []
        acc = 0.0
        for w in self.weights:
            acc += w / total_w
            cum.append(acc)
        # expovariate and the client choice inlined: the same draws in the same order as Random's methods
        rand = self.rng.random
        last = len(cum) - 1
        make = self._make
        append = out.append
        t = t0 + -_log(1.0 - rand()) / rate
        while t < t1:
            u = rand()
            idx = 0
            while idx < last and u > cum[idx]:
                idx += 1
            append(make(idx, t))
            t += -_log(1.0 - rand()) / rate
        return out

    def _params(self, idx: int) -> tuple[ClientSpec, float, float]:
        """(spec, lognormal mu of the answer length, of the user turn), recomputed when a spec is replaced."""
        cached = self._mu[idx] if idx < len(self._mu) else None
        spec = self.specs[idx]
        if cached is None or cached[0] is not spec:
            cached = (spec, _lognormal_mu(spec.answer_tokens), _lognormal_mu(spec.user_tokens))
            while len(self._mu) <= idx:
                self._mu.append(None)
            self._mu[idx] = cached
        return cached

    def _make(self, idx: int, t: float) -> Job:
        spec, mu_answer, mu_user = self._params(idx)
        rng = self.rng
        rand = rng.random
        self.next_jid += 1
        jid = self.next_jid
        out_len = int(_lognormvariate(rand, mu_answer))
        if out_len < 1:
            out_len = 1
        kind = spec.kind
        if kind == "chat":
            heap = self.thinking[idx]
            if heap and heap[0][0] <= t:
                session = heapq.heappop(heap)[2]
            else:
                self.next_sid += 1
                turns = max(1, int(-_log(1.0 - rand()) / (1.0 / spec.mean_turns)) + 1)
                session = Session(self.next_sid, self.system_len, turns)
            user = int(_lognormvariate(rand, mu_user))
            prompt = session.history + (user if user > 4 else 4)
            chain = SESSION_CHAIN_BASE + session.sid
            system_len = self.system_len
            if self.unique_prefix_share and rand() < self.unique_prefix_share:
                # a per-request token (timestamp, request id) at the top of the prompt breaks every prefix
                chain = UNIQUE_CHAIN_BASE + jid
                system_len = 0
            job = Job(jid, idx, t, prompt, out_len, spec.max_tokens, chain, system_len, session)
        else:
            lo, hi = spec.doc_tokens
            if kind == "rag-long":
                prompt = int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
                chain = UNIQUE_CHAIN_BASE + jid
            else:
                doc = rng.randrange(spec.docs)
                prompt = int(lo + (hi - lo) * ((doc * 7919) % spec.docs) / spec.docs)
                chain = DOC_CHAIN_BASE + idx * 1_000_000 + doc
            extra = int(_lognormvariate(rand, _MU_60))
            prompt += extra if extra > 4 else 4
            job = Job(jid, idx, t, prompt, out_len, spec.max_tokens, chain, 0, None)
            job.long = kind == "rag-long"
        cap = self.max_tokens_cap
        if cap is not None and job.max_tokens > cap:
            job.max_tokens = cap
        return job

    def completed(self, job: Job, t: float, generated: int) -> None:
        s = job.session
        if s is None:
            return
        s.history = job.prompt_len + generated
        s.turns_left -= 1
        if s.turns_left > 0:
            spec = self.specs[job.client]
            heapq.heappush(self.thinking[job.client], (t + self.rng.expovariate(1.0 / spec.think_s), s.sid, s))

    def abandoned(self, job: Job, t: float) -> None:
        """The user gives up on a failed turn; the conversation may resume later without that turn."""
        s = job.session
        if s is None:
            return
        spec = self.specs[job.client]
        heapq.heappush(self.thinking[job.client], (t + spec.think_s * 2.0, s.sid, s))
