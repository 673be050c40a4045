"""One vLLM V1 engine: continuous batching over a KV block pool, chunked prefill, preemption by recompute.

The engine advances in aggregated ticks (e.g. 100 ms of virtual time) instead of one Python iteration per
~15 ms engine step: per tick it computes how many steps fit, decodes every running sequence by that many tokens
through aggregate sums, and only touches a request when something happens to it (scheduled, first token,
finished, preempted). Token counts of decoding sequences are derived from a global step counter `k`:
a sequence whose first token came at step `kf` holds `k - kf + 1` generated tokens.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass

from llm_oncall.sim.histograms import (
    ITERATION_TOKENS_BUCKETS,
    ITL_BUCKETS,
    NUM_PREEMPTIONS_BUCKETS,
    PARAMS_N_BUCKETS,
    REQUEST_LATENCY_BUCKETS,
    TTFT_BUCKETS,
    Histogram,
    request_tokens_buckets,
)
from llm_oncall.sim.kv import PrefixCache
from llm_oncall.sim.request import DECODE, FINISHED, PREFILL, WAITING, Queued, Request, observe_finished

FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")


@dataclass(frozen=True)
class EngineConfig:
    block_size: int = 16
    # Llama-3.1-8B bf16 on one H100 80GB at gpu_memory_utilization 0.9 (derivation in docs/simulator.md).
    num_gpu_blocks: int = 27_000
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int = 131_072
    enable_prefix_caching: bool = True
    gpu_memory_utilization: float = 0.9
    max_num_queued_reqs: int | None = None


@dataclass(frozen=True)
class StepModel:
    """Time of one engine step: weight streaming + per-sequence overhead + prefill compute + KV reads."""

    base_s: float = 0.0060
    per_seq_s: float = 0.000030
    per_prefill_token_s: float = 0.000030
    per_ctx_token_s: float = 4.0e-8
    # enforce_eager skips CUDA graphs: decode steps get launch-bound (≈30% slower end to end).
    eager_factor: float = 1.3

    def step_time(self, seqs: int, prefill_tokens: float, ctx_tokens: int) -> float:
        return (
            self.base_s
            + self.per_seq_s * seqs
            + self.per_prefill_token_s * prefill_tokens
            + self.per_ctx_token_s * ctx_tokens
        )


class Engine:
    def __init__(self, cfg: EngineConfig, step: StepModel, start_time: float, slowdown: float = 1.0) -> None:
        self.cfg = cfg
        self.step_model = step
        self.slowdown = slowdown
        self.frozen = False
        self.frozen_gauges: tuple[int, int, float] | None = None
        self.reset(start_time)

    def reset(self, start_time: float) -> None:
        """A fresh engine process: empty KV pool and cache, every counter back to zero."""
        cfg = self.cfg
        self.start_time = start_time
        self.now = start_time
        self.k = 0
        self.carry = 0.0
        # FCFS queue; a request never scheduled yet waits as a plain `Queued` tuple (no object, untracked by the
        # cyclic GC) and becomes a Request when first admitted; preempted requests come back as Requests
        self.waiting: deque[Request | Queued] = deque()
        self.waiting_tokens = 0
        self.running: dict[int, Request] = {}
        self.partial: Request | None = None
        self.heap: list[tuple[int, int, int, Request]] = []
        self.n_dec = 0
        self.sum_kf = 0
        self.sum_base = 0
        self.finished: list[Request] = []
        self.pending: list[Request] = []  # finished, not yet observed by the request histograms
        self.ttft_pending: list[float] = []
        self.events: list[tuple[float, str, int]] = []
        self.cache = PrefixCache(cfg.block_size, cfg.enable_prefix_caching)
        self.busy_s = 0.0
        self.util = 0.0
        # counters
        self.prompt_tokens = 0
        self.prompt_computed = 0
        self.prompt_cached = 0
        self.gen_done = 0
        self.preemptions = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.admission_rejections = 0
        self.success = dict.fromkeys(FINISHED_REASONS, 0)
        self.http_2xx = 0
        self.http_5xx = 0
        self.http_req_bytes = 0
        self.http_resp_bytes = 0
        tok = request_tokens_buckets(cfg.max_model_len)
        self.h_ttft = Histogram(TTFT_BUCKETS)
        self.h_itl = Histogram(ITL_BUCKETS)
        self.h_tpot = Histogram(ITL_BUCKETS)
        self.h_e2e = Histogram(REQUEST_LATENCY_BUCKETS)
        self.h_queue = Histogram(REQUEST_LATENCY_BUCKETS)
        self.h_inference = Histogram(REQUEST_LATENCY_BUCKETS)
        self.h_prefill = Histogram(REQUEST_LATENCY_BUCKETS)
        self.h_decode = Histogram(REQUEST_LATENCY_BUCKETS)
        self.h_prompt = Histogram(tok)
        self.h_gen = Histogram(tok)
        self.h_max_gen = Histogram(tok)
        self.h_max_tokens = Histogram(tok)
        self.h_kv_computed = Histogram(tok)
        self.h_n = Histogram(PARAMS_N_BUCKETS)
        self.h_preempt = Histogram(NUM_PREEMPTIONS_BUCKETS)
        self.h_iter = Histogram(ITERATION_TOKENS_BUCKETS)

    # ---- derived state -------------------------------------------------------------------------------
    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def ctx_tokens(self) -> int:
        ctx = self.sum_base + self.n_dec * (self.k + 1) - self.sum_kf
        p = self.partial
        if p is not None:
            ctx += p.prompt_len + p.gen_before
        return ctx

    def used_blocks(self) -> float:
        # the last block of each sequence is on average half full
        return (self.ctx_tokens() + (self.cfg.block_size // 2) * len(self.running)) / self.cfg.block_size

    def kv_usage(self) -> float:
        u = self.used_blocks() / self.cfg.num_gpu_blocks
        return 0.0 if u < 0.0 else (1.0 if u > 1.0 else u)

    def generation_tokens(self) -> int:
        return self.gen_done + self.n_dec * (self.k + 1) - self.sum_kf

    # ---- API used by the fleet -----------------------------------------------------------------------
    def submit(self, r: Request) -> bool:
        limit = self.cfg.max_num_queued_reqs
        if limit is not None and len(self.waiting) >= limit:
            self.admission_rejections += 1
            self.http_5xx += 1
            return False
        self.waiting.append(r)
        self.waiting_tokens += r.prompt_len + r.gen_before
        return True

    def submit_new(self, q: Queued) -> bool:
        """`submit(Request(*q))` without building the Request until the scheduler admits it."""
        limit = self.cfg.max_num_queued_reqs
        if limit is not None and len(self.waiting) >= limit:
            self.admission_rejections += 1
            self.http_5xx += 1
            return False
        self.waiting.append(q)
        self.waiting_tokens += q[2]
        return True

    def tick(self, t0: float, t1: float) -> None:
        self.now = t1
        if self.frozen:
            self.util = 0.0
            return
        dt = t1 - t0
        n_dec = self.n_dec
        partial = self.partial
        running = self.running
        k0 = self.k
        cfg = self.cfg
        # ctx_tokens() and used_blocks() are inlined below (same integer sums, same single division)
        ctx = self.sum_base + n_dec * (k0 + 1) - self.sum_kf
        if partial is not None:
            ctx += partial.prompt_len + partial.gen_before
        # The step's prefill work is what the scheduler can admit (free sequence slots, KV blocks for the FCFS
        # head), not the whole queue: a queue that cannot be scheduled costs no compute.
        queued, est_admits = self.waiting_tokens, len(self.waiting)
        if queued:
            queued, est_admits = self._admissible(ctx, len(running))
        pf_demand = queued + (partial.need - partial.done if partial is not None else 0)
        if n_dec == 0 and pf_demand <= 0:
            self.carry = 0.0
            self.util = 0.0
            return
        sm = self.step_model
        slow = self.slowdown
        budget = cfg.max_num_batched_tokens - n_dec
        if budget < 1:
            budget = 1
        st_dec = sm.step_time(len(running), 0.0, ctx) * slow
        pf_per_step = pf_demand * st_dec / dt
        if pf_per_step > budget:
            pf_per_step = budget
        st = st_dec + sm.per_prefill_token_s * pf_per_step * slow
        x = dt + self.carry
        n = int(x / st) if x > 0.0 else 0
        self.carry = x - n * st
        if n == 0:
            self.util = 1.0
            return
        busy = n * st
        self.busy_s += busy
        self.util = min(1.0, busy / dt)
        # KV for the decode growth of this tick; V1 preempts the most recently scheduled request first.
        bs = cfg.block_size
        half = bs // 2
        total_blocks = cfg.num_gpu_blocks
        growth = n_dec * n / bs
        if running and (ctx + half * len(running)) / bs + growth > total_blocks:
            while running and self.used_blocks() + growth > total_blocks:
                self._preempt_last(t0)
                growth = self.n_dec * n / bs
            n_dec = self.n_dec
        k_end = k0 + n
        heap = self.heap
        if heap and heap[0][0] <= k_end:
            self._finish_until(k_end, k0, t0, st)
        decoded = n_dec * n
        # Prefill: one FCFS cursor over fractional step positions of this tick.
        pos = 0.0
        prefilled = 0.0
        # slots or blocks freed during this tick admit requests whose prefill this tick's steps did not pay for:
        # their work is charged to the next tick (the engine's time stays consistent)
        admits = 0
        unpaid = False
        uncharged = 0.0
        max_seqs = cfg.max_num_seqs
        waiting = self.waiting
        while True:
            r = self.partial
            if r is None:
                if not waiting:
                    break
                head = waiting[0]
                if isinstance(head, tuple):
                    arr_pos = (head[1] - t0) / st
                    total = head[2]
                else:
                    arr_pos = (head.queued_at - t0) / st
                    total = head.prompt_len + head.gen_before
                if arr_pos >= n:
                    break
                n_run = len(running)
                if n_run >= max_seqs:
                    break
                free = total_blocks - (self.sum_base + self.n_dec * (k0 + 1) - self.sum_kf + half * n_run) / bs
                if (total + bs - 1) // bs > free:
                    break
                waiting.popleft()
                r = Request(*head) if isinstance(head, tuple) else head
                self.waiting_tokens -= total
                hit = self.cache.lookup(r.chain, total, r.system_len)
                if cfg.enable_prefix_caching:  # with caching off vLLM looks nothing up (its counters stand still)
                    self.prefix_queries += total
                    self.prefix_hits += hit
                r.hit = hit
                r.need = total - hit
                r.done = 0.0
                r.state = PREFILL
                if r.sched_at < 0.0:
                    sched = t0 + (arr_pos if arr_pos > pos else pos) * st
                    r.sched_at = sched if sched > r.arrival else r.arrival
                running[r.rid] = r
                self.partial = r
                start = arr_pos if arr_pos > pos else pos
                admits += 1
                unpaid = admits > est_admits
            else:
                start = pos
            rem = r.need - r.done
            end = start + rem / budget
            if end > n:
                r.done += (n - start) * budget
                prefilled += (n - start) * budget
                if unpaid:
                    uncharged += (n - start) * budget
                break
            prefilled += rem
            if unpaid:
                uncharged += rem
                unpaid = False
            pos = end
            self.partial = None
            f = int(end) + (0 if end == int(end) else 1)
            if f < 1:
                f = 1
            self._first_token(r, k0 + f, t0 + f * st)
        self.k = k_end
        if uncharged:
            debt = sm.per_prefill_token_s * uncharged * slow
            self.carry -= debt
            self.busy_s += debt
        if heap and heap[0][0] <= k_end:
            self._finish_until(k_end, k0, t0, st)
        # Histogram.observe_many inlined for the two per-step histograms
        v = decoded / n + prefilled / n
        h = self.h_iter
        h.counts[bisect_left(h.bounds, v)] += n
        h.sum += v * n
        h.count += n
        if decoded > 0:
            h = self.h_itl
            h.counts[bisect_left(h.bounds, st)] += decoded
            h.sum += st * decoded
            h.count += decoded
        # cached chains may use free blocks only (blocks of running prompts are both cached and in use)
        sum_base = self.sum_base
        ctx = sum_base + self.n_dec * (k_end + 1) - self.sum_kf
        p = self.partial
        if p is not None:
            ctx += p.prompt_len + p.gen_before
        cache = self.cache
        cap = int(total_blocks - (ctx + half * len(running)) / bs + sum_base / bs)
        if cache.blocks > cap:
            cache.evict_to(cap)

    def _admissible(self, ctx: int, n_run: int) -> tuple[int, int]:
        """Tokens and count of the queue's head the scheduler can admit now: FCFS, while a sequence slot is free
        and the head's blocks fit the free KV blocks (vLLM V1 stops at the first request that does not fit)."""
        cfg = self.cfg
        bs = cfg.block_size
        slots = cfg.max_num_seqs - n_run
        free = cfg.num_gpu_blocks - (ctx + (bs // 2) * n_run) / bs
        tokens = count = 0
        for head in self.waiting:
            if count >= slots:
                break
            total = head[2] if isinstance(head, tuple) else head.prompt_len + head.gen_before
            blocks = (total + bs - 1) // bs
            if blocks > free:
                break
            free -= blocks
            tokens += total
            count += 1
        return tokens, count

    def freeze(self, core_gauges: bool = False) -> None:
        self.frozen = True
        self.frozen_gauges = (self.num_running, self.num_waiting, self.kv_usage()) if core_gauges else None

    def gauges(self) -> tuple[int, int, float]:
        """(running, waiting, KV usage) as the page shows them: the engine core's last report when frozen."""
        if self.frozen and self.frozen_gauges is not None:
            return self.frozen_gauges
        return self.num_running, self.num_waiting, self.kv_usage()

    def client_gone(self, tag: int) -> None:
        """The client of request `tag` disconnected: its HTTP request ends (vLLM's handler is cancelled and answers
        200 to nobody), and a request still queued is aborted. A frozen engine aborts nothing."""
        self.http_2xx += 1
        if self.frozen:
            return
        for i, q in enumerate(self.waiting):
            if (q[8] if isinstance(q, tuple) else q.tag) == tag:
                del self.waiting[i]
                self.waiting_tokens -= q[2] if isinstance(q, tuple) else q.prompt_len + q.gen_before
                self.success["abort"] += 1
                return

    # ---- internals -----------------------------------------------------------------------------------
    def _first_token(self, r: Request, kf: int, t: float) -> None:
        total = r.prompt_len + r.gen_before
        self.prompt_tokens += total
        self.prompt_computed += r.need
        self.prompt_cached += r.hit
        if r.first_tok_at < 0.0:
            r.first_tok_at = t
            self.ttft_pending.append(t - r.arrival)
        self.cache.insert(r.chain, total, r.system_len)
        r.state = DECODE
        r.kf = kf
        self.n_dec += 1
        self.sum_kf += kf
        self.sum_base += total
        heapq.heappush(self.heap, (kf + r.out_len - r.gen_before - 1, r.rid, r.epoch, r))

    def _finish_until(self, k_end: int, k0: int, t0: float, st: float) -> None:
        heap = self.heap
        pop = heapq.heappop
        running = self.running
        success = self.success
        insert = self.cache.insert
        done = self.pending
        while heap and heap[0][0] <= k_end:
            kfin, _, epoch, r = pop(heap)
            if epoch != r.epoch or r.state != DECODE:
                continue
            t = t0 + (kfin - k0) * st
            if t < r.first_tok_at:
                t = r.first_tok_at
            # finish r at step kfin, time t
            gen_res = kfin - r.kf + 1
            self.gen_done += gen_res
            self.n_dec -= 1
            self.sum_kf -= r.kf
            prompt_len = r.prompt_len
            self.sum_base -= prompt_len + r.gen_before
            del running[r.rid]
            r.state = FINISHED
            r.finish_at = t
            gen = r.gen_before + gen_res
            r.gen = gen
            reason = r.reason = "length" if gen >= r.max_tokens else "stop"
            success[reason] += 1
            self.http_2xx += 1
            self.http_req_bytes += 120 + 4 * prompt_len
            self.http_resp_bytes += 300 + 4 * gen
            insert(r.chain, prompt_len + gen, r.system_len)
            done.append(r)
            self.finished.append(r)

    def flush(self) -> None:
        """Bring the request histograms up to date (called before a page is rendered)."""
        if self.pending or self.ttft_pending:
            observe_finished(self)

    def _preempt_last(self, t: float) -> None:
        rid = next(reversed(self.running))
        r = self.running.pop(rid)
        if r.state == DECODE:
            g = self.k - r.kf + 1
            if g < 0:
                g = 0
            self.gen_done += g
            self.n_dec -= 1
            self.sum_kf -= r.kf
            self.sum_base -= r.prompt_len + r.gen_before
            r.gen_before += g
            if r.gen_before >= r.out_len:
                r.gen_before = r.out_len - 1
        elif self.partial is r:
            self.partial = None
        r.epoch += 1
        r.state = WAITING
        r.done = 0.0
        r.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(r)
        self.waiting_tokens += r.prompt_len + r.gen_before
        self.events.append((t, "preempt", self.preemptions))

    def abort_all(self, t: float) -> list[Request]:
        """The process died: every in-flight request is lost (the caller sees connection errors)."""
        lost = list(self.running.values()) + [Request(*q) if isinstance(q, tuple) else q for q in self.waiting]
        for r in lost:
            r.state = FINISHED
            r.reason = "error"
            r.finish_at = t
        return lost
