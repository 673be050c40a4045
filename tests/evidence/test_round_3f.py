"""Focused tests for the general rules round 3f added (docs/evidence.md, "Round 3f"): a dead engine without
its cause is other-failure, the engine core's failed wait on its workers is a hang, vLLM's scheduler dump after a
failed step; hangs told in Chinese and a watchdog timeout named in a report; Xids counted in prose; the driver's
failed GSP RPC; CUDA error 802 (fabric manager not ready); an output written as escapes or inside inline code; a
fix PR's quoted traceback. The signatures' own must-match / must-not-match examples run in test_signatures.py.
The real files are in tests/evidence/real/fresh-2026-12e-check.
"""

from __future__ import annotations

from llm_oncall.evidence import described, paste
from llm_oncall.evidence.classify import classify_text

# --- a dead engine is a crash; the engine core giving up on its workers is a hang ---------------------------

DEAD = ("(APIServer pid=1) ERROR 09-11 06:29:59 [async_llm.py:430]     raise self._format_exception(outputs)\n"
        "(APIServer pid=1) ERROR 09-11 06:29:59 [async_llm.py:430] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.\n")


def test_a_dead_engine_without_its_cause_is_other_failure() -> None:
    f = classify_text(DEAD, "apiserver.log")
    assert f.kind == "engine_dead" and f.category == "other-failure" and f.incident_hint is None


def test_a_dead_engine_after_the_wait_on_its_workers_is_a_hang() -> None:
    text = ("(EngineCore pid=3) ERROR 07-01 20:30:01 [core.py:1197] EngineCore encountered a fatal error.\n"
            "(EngineCore pid=3) ERROR 07-01 20:30:01 [core.py:1197] Traceback (most recent call last):\n"
            '(EngineCore pid=3) ERROR 07-01 20:30:01 [core.py:1197]   File "/x/vllm/v1/executor/multiproc_executor.py",'
            " line 387, in get_response\n"
            "(EngineCore pid=3) ERROR 07-01 20:30:01 [core.py:1197]     "
            "status, result = mq.dequeue(timeout=dequeue_timeout)\n")
    f = classify_text(text, "core.log")
    assert f.kind == "engine_worker_wait_failed" and f.category == "hang"
    assert "engine_dead" in f.facts["also"]


def test_the_scheduler_dump_of_a_failed_step_is_a_failure() -> None:
    text = ("(EngineCore_0 pid=897) ERROR 08-07 01:47:24 [dump_input.py:76] Dumping scheduler output for model "
            "execution: SchedulerOutput(scheduled_new_reqs=[], num_common_prefix_blocks=[5, 0])\n")
    f = classify_text(text, "dump.log")
    assert f.kind == "model_execution_failed" and f.category == "other-failure"


# --- hangs told in prose -----------------------------------------------------------------------------------

def test_a_hang_told_in_chinese_is_a_hang() -> None:
    f = classify_text("### Describe the bug\n\n设置--tp 8 都会卡死 一直无响应，其他卡显示100%利用率。\n", "zh")
    assert f.category == "hang"
    assert classify_text("这个版本修复了多卡推理卡死的问题，升级之后不会卡住了。\n", "zh-fix").benign


def test_a_watchdog_timeout_named_in_a_report_is_a_hang() -> None:
    f = classify_text("I deploy the model on 4*H20 (TP=4), and encounter a Watchdog timeout error\n", "report")
    assert f.kind == "watchdog_timeout_reported" and f.category == "hang"
    advice = "You can increase the watchdog timeout with --watchdog-timeout 600\n"
    assert classify_text(advice, "advice", word_prior=False).benign  # the catalogue reads nothing in it
    # since round 3o the word-level prior answers where nothing is recognised; it reads these words as a hang's
    # (a look-alike it cannot tell from a report: docs/evidence.md, "Round 3o")
    f = classify_text(advice, "advice")
    assert f.kind == "word_prior" and f.confidence <= 0.3


# --- GPU hardware and fabric ---------------------------------------------------------------------------------

def test_xids_counted_in_prose_take_the_xid_catalogue_reading() -> None:
    f = classify_text("GPU 1 has a history of its own: **6× Xid 79** (fell off the bus) under load.\n", "ops")
    assert f.category == "gpu-hardware" and "79" in str(f.facts)
    assert classify_text("See the row for Xid 79 in the catalogue table.\n", "doc").benign


def test_a_failed_gsp_rpc_is_gpu_hardware_an_assertion_naming_a_reset_is_not() -> None:
    rpc = "kernel: NVRM: GPU0 _issueRpcAndWait: rpcSendMessage failed with status 0x0000000f for fn 10 sequence 800!\n"
    f = classify_text(rpc, "journal")
    assert f.kind == "gsp_rpc_failed" and f.category == "gpu-hardware"
    assertion = ("kernel: NVRM: nvAssertFailedNoLog: Assertion failed: (status == NV_OK) || "
                 "(status == NV_ERR_GPU_IN_FULLCHIP_RESET) @ rs_server.c:259\n")
    assert classify_text(assertion, "journal").kind != "gsp_rpc_failed"


def test_cuda_802_is_the_fabric_manager_not_ready() -> None:
    f = classify_text("On H100 instances CUDA initialization fails with 802 system error.\n", "report")
    assert f.kind == "cuda_system_not_ready" and f.category == "nvlink"
    doc = "NVSwitches stay uninitialized and applications will fail with the `cudaErrorSystemNotReady` error.\n"
    assert classify_text(doc, "doc").kind != "cuda_system_not_ready"


# --- outputs told in prose -------------------------------------------------------------------------------------

def test_an_output_written_as_escapes_is_an_empty_output() -> None:
    text = "I have tried it, the results were still '\\n\\n\\n\\n\\n', vllm can generate the right tokens\n"
    q = [x for x in paste.read(text).quoted if x.how == "escapes"]
    assert q and not q[0].text.strip()
    f = classify_text(text, "reply")
    assert f.category == "bad-output"
    assert classify_text("joined with '\\n'.join(lines) before printing the output\n", "code").benign


def test_an_output_inside_inline_code_after_a_cue_is_measured() -> None:
    text = "For simple query \"why is the sky blue?\"\n\nOutput generated : `" + "igui" * 60 + "`\n"
    f = classify_text(text, "tgi")
    assert f.category == "bad-output"
    assert classify_text("Output generated : `The sky is blue because of Rayleigh scattering.`\n", "ok").benign


# --- a fix PR pasting the traceback it fixes --------------------------------------------------------------------

FIX = ("## Summary by CodeRabbit\n\n* **Bug Fixes**\n  * Refined block reuse accounting.\n\n"
       "A recent MR introduced a regression, causing this error.\n\n```\nTraceback (most recent call last):\n"
       '  File "/code/x.py", line 3, in f\n    raise e\nValueError: bad budget\n```\n')


def test_a_fix_prs_quoted_traceback_is_not_a_failure() -> None:
    assert described.is_change_document(FIX)
    f = classify_text(FIX, "pr")
    assert f.benign and f.kind == "error_quoted_in_change"


def test_the_same_traceback_in_a_report_stays_unknown() -> None:
    report = FIX.replace("## Summary by CodeRabbit", "### Describe the bug").replace(
        "* **Bug Fixes**", "I get this error:")
    assert not described.is_change_document(report)
    f = classify_text(report, "issue")
    assert not f.benign and f.kind == "unknown"
