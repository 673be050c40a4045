"""A request inside one engine, and the per-request histograms observed in batches.

A finished request is only appended to its engine's `pending` list; the thirteen histograms it feeds are
updated in one pass when a page is rendered (`observe_finished`), with the bucket layouts, count lists and sums
held in locals. Observations keep their order, so sums come out bit-identical to observing one at a time.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Protocol

from llm_oncall.sim.histograms import Histogram

WAITING, PREFILL, DECODE, FINISHED = 0, 1, 2, 3
# Request(*q) arguments of a request that has not been scheduled yet:
# (rid, arrival, prompt_len, out_len, max_tokens, chain, system_len, client, tag)
Queued = tuple[int, float, int, int, int, int, int, int, int]


class Request:
    __slots__ = (
        "arrival", "chain", "client", "done", "epoch", "finish_at", "first_tok_at", "gen", "gen_before",
        "hit", "kf", "max_tokens", "need", "out_len", "preemptions", "prompt_len", "queued_at",
        "reason", "rid", "sched_at", "state", "system_len", "tag",
    )

    def __init__(
        self, rid: int, arrival: float, prompt_len: int, out_len: int, max_tokens: int,
        chain: int, system_len: int, client: int, tag: int,
    ) -> None:
        self.rid = rid
        self.arrival = arrival
        self.queued_at = arrival
        self.prompt_len = prompt_len
        self.out_len = out_len if out_len < max_tokens else max_tokens
        self.max_tokens = max_tokens
        self.chain = chain
        self.system_len = system_len
        self.client = client
        self.tag = tag
        self.sched_at = -1.0
        self.first_tok_at = -1.0
        self.finish_at = -1.0
        self.kf = 0
        self.gen_before = 0
        self.gen = 0  # generated tokens at finish
        self.need = 0
        self.done = 0.0
        self.hit = 0
        self.epoch = 0
        self.preemptions = 0
        self.state = WAITING
        self.reason = ""


class RequestHistograms(Protocol):
    """What `observe_finished` reads and updates: an engine's finished requests and its request histograms."""

    pending: list[Request]
    ttft_pending: list[float]
    h_ttft: Histogram
    h_tpot: Histogram
    h_e2e: Histogram
    h_queue: Histogram
    h_inference: Histogram
    h_prefill: Histogram
    h_decode: Histogram
    h_prompt: Histogram
    h_gen: Histogram
    h_max_gen: Histogram
    h_max_tokens: Histogram
    h_kv_computed: Histogram
    h_n: Histogram
    h_preempt: Histogram


def observe_finished(e: RequestHistograms) -> None:
    """Feed the queued TTFTs and finished requests of `e` to its histograms (what `_finish` used to observe)."""
    bl = bisect_left
    ttft = e.ttft_pending
    if ttft:
        h = e.h_ttft
        b, c, s = h.bounds, h.counts, h.sum
        for v in ttft:
            c[bl(b, v)] += 1
            s += v
        h.sum = s
        h.count += len(ttft)
        ttft.clear()
    done = e.pending
    if not done:
        return
    lat = e.h_e2e.bounds
    tok = e.h_prompt.bounds
    itl = e.h_tpot.bounds
    pre_b = e.h_preempt.bounds
    c_e2e, c_queue, c_inf = e.h_e2e.counts, e.h_queue.counts, e.h_inference.counts
    c_pf, c_dec, c_tpot = e.h_prefill.counts, e.h_decode.counts, e.h_tpot.counts
    c_prompt, c_gen, c_maxg = e.h_prompt.counts, e.h_gen.counts, e.h_max_gen.counts
    c_maxt, c_kv, c_pre = e.h_max_tokens.counts, e.h_kv_computed.counts, e.h_preempt.counts
    s_e2e, s_queue, s_inf = e.h_e2e.sum, e.h_queue.sum, e.h_inference.sum
    s_pf, s_dec, s_tpot = e.h_prefill.sum, e.h_decode.sum, e.h_tpot.sum
    s_prompt, s_gen, s_max = e.h_prompt.sum, e.h_gen.sum, e.h_max_gen.sum
    s_maxt, s_kv, s_pre = e.h_max_tokens.sum, e.h_kv_computed.sum, e.h_preempt.sum
    n_tpot = 0
    for r in done:
        t = r.finish_at
        arrival = r.arrival
        sched = r.sched_at
        first = r.first_tok_at
        v = t - arrival
        c_e2e[bl(lat, v)] += 1
        s_e2e += v
        v = sched - arrival
        c_queue[bl(lat, v)] += 1
        s_queue += v
        v = t - sched
        c_inf[bl(lat, v)] += 1
        s_inf += v
        v = first - sched
        c_pf[bl(lat, v)] += 1
        s_pf += v
        v = t - first
        c_dec[bl(lat, v)] += 1
        s_dec += v
        gen = r.gen
        if gen > 1:
            v = (t - first) / (gen - 1)
            c_tpot[bl(itl, v)] += 1
            s_tpot += v
            n_tpot += 1
        p = r.prompt_len
        c_prompt[bl(tok, p)] += 1
        s_prompt += p
        c_gen[bl(tok, gen)] += 1
        s_gen += gen
        m = r.max_tokens
        i = bl(tok, m)
        c_maxg[i] += 1
        c_maxt[i] += 1
        s_max += m
        s_maxt += m
        k = p - r.hit if p > r.hit else 0
        c_kv[bl(tok, k)] += 1
        s_kv += k
        k = r.preemptions
        c_pre[bl(pre_b, k)] += 1
        s_pre += k
    n = len(done)
    e.h_e2e.sum, e.h_queue.sum, e.h_inference.sum = s_e2e, s_queue, s_inf
    e.h_prefill.sum, e.h_decode.sum, e.h_tpot.sum = s_pf, s_dec, s_tpot
    e.h_prompt.sum, e.h_gen.sum, e.h_max_gen.sum = s_prompt, s_gen, s_max
    e.h_max_tokens.sum, e.h_kv_computed.sum, e.h_preempt.sum = s_maxt, s_kv, s_pre
    for h in (e.h_e2e, e.h_queue, e.h_inference, e.h_prefill, e.h_decode, e.h_prompt, e.h_gen, e.h_max_gen,
              e.h_max_tokens, e.h_kv_computed, e.h_preempt):
        h.count += n
    e.h_tpot.count += n_tpot
    hn = e.h_n  # the n parameter is always 1 (integer-valued float sums are exact, so one add)
    hn.counts[bl(hn.bounds, 1)] += n
    hn.sum += n
    hn.count += n
    done.clear()
