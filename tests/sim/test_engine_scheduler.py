"""The engine's step time counts the prefill the scheduler can admit, not the whole queue (vLLM V1 schedules
the running batch, then waiting requests only while a sequence slot is free and the FCFS head's blocks fit)."""

from __future__ import annotations

import pytest

from llm_oncall.sim.engine import Engine, EngineConfig, StepModel

TICK = 0.1


def _engine(**cfg: int) -> Engine:
    return Engine(EngineConfig(**cfg), StepModel(), 0.0)


def _queue(e: Engine, n: int, prompt: int, out: int, first_rid: int = 0, t: float = 0.0) -> None:
    for i in range(first_rid, first_rid + n):
        assert e.submit_new((i, t, prompt, out, out, 1_000 + i, 0, 0, i))


def _run(e: Engine, t0: float, t1: float) -> float:
    t = t0
    while t < t1 - 1e-9:
        e.tick(t, t + TICK)
        t += TICK
    return t


def _steps_per_s(e: Engine, t0: float, seconds: float) -> float:
    k0 = e.k
    _run(e, t0, t0 + seconds)
    return (e.k - k0) / seconds


def test_a_queue_behind_full_sequence_slots_costs_no_step_time() -> None:
    e = _engine(max_num_seqs=4)
    _queue(e, 4, prompt=100, out=100_000)
    t = _run(e, 0.0, 1.0)
    assert e.num_running == 4 and e.num_waiting == 0
    alone = _steps_per_s(e, t, 2.0)
    _queue(e, 200, prompt=4_000, out=100, first_rid=10, t=t + 2.0)  # cannot be admitted: every slot is taken
    behind = _steps_per_s(e, t + 2.0, 2.0)
    assert e.num_running == 4 and e.num_waiting == 200
    # decode-only steps: ~6 ms, not ~250 ms of phantom prefill chunks
    assert behind == pytest.approx(alone, rel=0.05)
    assert behind > 100


def test_a_head_that_does_not_fit_the_kv_pool_costs_no_step_time() -> None:
    e = _engine(num_gpu_blocks=2_000)  # 32 k tokens
    _queue(e, 2, prompt=12_000, out=100_000)
    t = _run(e, 0.0, 2.0)
    assert e.num_running == 2
    alone = _steps_per_s(e, t, 2.0)
    _queue(e, 5, prompt=20_000, out=10, first_rid=10, t=t + 2.0)  # 1 250 blocks each: the head does not fit
    behind = _steps_per_s(e, t + 2.0, 2.0)
    assert e.num_waiting == 5
    assert behind == pytest.approx(alone, rel=0.05)


def test_admitted_prefill_is_paid_for() -> None:
    """Slots freed within a tick admit requests at once; their prefill still costs engine time (next tick)."""
    e = _engine(max_num_seqs=8)
    _queue(e, 400, prompt=2_000, out=20)
    _run(e, 0.0, 30.0)
    # 400 × 2 000 prompt tokens at 0.03 ms each is 24 s of prefill alone
    assert e.busy_s >= 24.0
    assert e.num_waiting + e.num_running < 400
