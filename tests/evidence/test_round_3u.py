"""Focused tests for the general rules round 3u added (docs/evidence.md, "Round 3u"), tuned on the check sets 3q
and 3t: producers' format strings and output records, a cue for a quoted output, and an engine's gauges read
together.

Producers:
- vLLM vllm/v1/core/block_pool.py: raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
- llama.cpp tools/server/server.cpp: SRV_ERR("failed to decode the batch: KV cache is full - try increasing it via
  the context size, i = %d, n_batch = %d, ret = %d\\n", ...)
- ollama discover/gpu_info_nvcuda.c: LOG("cuInit err: %d\\n"), snprintf("cuda driver library init failure: %d")
- lmdeploy lmdeploy/messages.py: the Response dataclass (text, generate_token_len, input_token_len, ...) as printed
- vLLM's /metrics gauges (vllm:num_requests_running / _waiting, vllm:kv_cache_usage_perc) and its V1 stats line
  (vllm/v1/metrics/loggers.py: "Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%")

Lines are rendered from those formats with made-up values; texts are written for the tests. Each rule has a
look-alike. The signatures' own must-match / must-not-match examples run in test_signatures.py.
"""

from __future__ import annotations

from tests.evidence.rounds import catalogue_category
from tests.evidence.rounds import category as _cat
from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence import gauges, paste, stats
from llm_oncall.evidence.classify import classify_text

_CORE = "(EngineCore_DP0 pid=4242) ERROR 10-27 14:16:34 [core.py:710] "


# ---- KV pressure in the producers' words ------------------------------------------------------------------------

def test_vllm_block_pool_exhaustion_is_kv_pressure_and_explains_the_dead_engine() -> None:
    text = "".join(_CORE + ln + "\n" for ln in (
        "EngineCore encountered a fatal error.",
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/core/block_pool.py", line 301, in get_new_blocks',
        '    raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")',
        "ValueError: Cannot get 12 free blocks from the pool"))
    text += "ERROR 10-27 14:16:34 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore " \
            "encountered an issue. See stack trace (above) for the root cause.\n"
    f = classify_text(text, "engine.log")
    assert f.category == "kv-pressure" and f.kind == "kv_cache_blocks_exhausted", (f.kind, f.facts)


def test_the_block_pool_source_line_alone_is_not_kv_pressure() -> None:
    assert classify_text('        raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")\n',
                         "block_pool.py").category != "kv-pressure"


def test_llamacpp_kv_cache_full_is_kv_pressure() -> None:
    text = ("The server stops answering after a while.\n\n```\n"
            "srv  update_slots: failed to decode the batch: KV cache is full - try increasing it via the context "
            "size, i = 0, n_batch = 512, ret = 1\n"
            "srv    send_error: task id = 88, error: Input prompt is too big compared to KV size.\n```\n")
    assert _cat(text) == "kv-pressure"


def test_ollama_cuinit_802_is_the_fabric_manager() -> None:
    text = ('time=2025-03-01T10:00:00.000Z level=INFO source=gpu.go:612 msg="Unable to load cudart library '
            '/usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15: cuda driver library init failure: 802"\n')
    assert _cat(text, "ollama.log") == "nvlink"
    assert _cat("cuInit err: 802\n", "ollama.log") == "nvlink"


def test_ollama_init_failure_999_is_not_the_fabric_manager() -> None:
    text = ('time=2025-03-01T10:00:00.000Z level=WARN source=gpu.go:605 msg="unknown error initializing cuda driver '
            'library /usr/lib/libcuda.so.575.64.03: cuda driver library init failure: 999."\n')
    assert catalogue_category(text, "ollama.log") != "nvlink"


# ---- bad outputs ------------------------------------------------------------------------------------------------

def _responses(texts: list[str]) -> str:
    return "".join(f"Response(text={t!r}, generate_token_len={len(t.split())}, input_token_len=120, session_id={i}, "
                   f"finish_reason='stop', token_ids=[{', '.join(str(100 + k) for k in range(3))}], logprobs=None, "
                   f"index={i})\n" for i, t in enumerate(texts))


def test_lmdeploy_responses_of_one_symbol_are_bad_output() -> None:
    text = "Batch inference returns this for every prompt:\n```\n" + _responses(["!"] * 5) + "```\n"
    assert _cat(text) == "bad-output"


def test_lmdeploy_responses_of_normal_text_are_quiet() -> None:
    text = "```\n" + _responses(["Paris is the capital of France.", "The answer is 42 because of the rules.",
                                 "Hello! How can I help you today?"]) + "```\n"
    assert _quiet(text)


def test_a_web_framework_response_is_not_a_model_output() -> None:
    assert _quiet("    return web.Response(text='!')\n    return web.Response(text='?')\n", "server.py")


def test_an_output_after_such_as_is_read() -> None:
    text = ("### actual behavior\n\nGarbage generation (for all prompts) such as\n"
            "`And fear fear fear fear fear fear fear fear fear fear fear fear fear fear`\n")
    assert _cat(text) == "bad-output"


def test_a_paragraph_after_such_as_that_reads_well_is_quiet() -> None:
    text = ("The response carries fields such as\n"
            "the finish reason, the number of generated tokens and the log probabilities of each token.\n")
    assert any("finish reason" in q.text for q in paste.read(text).quoted), "the paragraph is read as a quote"
    assert _quiet(text)


# ---- an engine that admits nothing ------------------------------------------------------------------------------

_GAUGES = ("vllm:num_requests_running{{engine=\"0\",model_name=\"m\"}} {r}\n"
           "vllm:num_requests_waiting{{engine=\"0\",model_name=\"m\"}} {w}\n"
           "vllm:num_requests_waiting_by_reason{{engine=\"0\",model_name=\"m\",reason=\"capacity\"}} {w}\n"
           "vllm:kv_cache_usage_perc{{engine=\"0\",model_name=\"m\"}} {kv}\n")


def test_gauges_with_a_queue_nothing_running_and_an_empty_cache_are_a_hang() -> None:
    text = ("The engine stopped admitting requests; /metrics shows\n```\n" + _GAUGES.format(r=0.0, w=6.0, kv=0.0)
            + "```\n")
    f = classify_text(text, "issue.md")
    assert f.category == "hang" and f.kind == "gauges_not_admitting", (f.kind, f.facts)


def test_gauges_with_elided_labels_are_read() -> None:
    text = "vllm:num_requests_running{...} 0.0\nvllm:num_requests_waiting{...} 3.0\nvllm:kv_cache_usage_perc{...} 0.0\n"
    f = gauges.parse(text, "metrics.txt")
    assert f is not None and f.category == "hang"


def test_gauges_with_a_queue_and_a_full_cache_are_kv_pressure() -> None:
    f = gauges.parse(_GAUGES.format(r=24.0, w=9.0, kv=0.97), "metrics.txt")
    assert f is not None and f.category == "kv-pressure"


def test_busy_or_idle_gauges_are_no_evidence() -> None:
    assert gauges.parse(_GAUGES.format(r=8.0, w=0.0, kv=0.4), "metrics.txt") is None
    assert gauges.parse(_GAUGES.format(r=0.0, w=0.0, kv=0.0), "metrics.txt") is None
    assert gauges.parse(_GAUGES.format(r=3.0, w=2.0, kv=0.3), "metrics.txt") is None


def _v1_stats(running: int, waiting: int, kv: float, n: int) -> str:
    return "".join(f"INFO 10-14 17:04:{10 * i + 10:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 "
                   f"tokens/s, Avg generation throughput: 0.0 tokens/s, Running: {running} reqs, Waiting: {waiting} "
                   f"reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%\n" for i in range(n))


def test_stats_lines_that_admit_nothing_are_a_hang() -> None:
    f = classify_text(_v1_stats(0, 6, 0.0, stats.STALL_LINES), "vllm.log")
    assert f.category == "hang" and f.kind == "vllm_stats_not_admitting", (f.kind, f.facts)


def test_one_stats_line_with_a_queue_and_nothing_running_is_not_a_hang() -> None:
    # a request that just arrived is waiting for the next step
    assert classify_text(_v1_stats(0, 1, 0.0, 1), "vllm.log").category != "hang"
