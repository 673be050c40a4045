"""Focused tests for the general rules round 3h added (docs/evidence.md, "Round 3h"): a dead Ray actor or worker and
vLLM's refusal of a model architecture are other failures; a graph capture failure that names its CUDA error or 9xx
code is a CUDA-graph failure; a hang told with an adverb or a subject the earlier rules did not take ("then randomly
hangs", "System hangs"), and 挂起 (hung) in Chinese; a full KV cache told beside a reported stall is its cause; an
imperative answer that pairs an error with its remedy is a how-to. The signatures' own must-match / must-not-match
examples run in test_signatures.py. The real files are in tests/evidence/real/fresh-2026-12g-check.
"""

from __future__ import annotations

from llm_oncall.evidence import described
from llm_oncall.evidence.classify import classify_text

# --- dead Ray actors and workers ------------------------------------------------------------------------------

RAY_ACTOR_DIED = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/site-packages/ray/_private/worker.py", line 921, in get_objects\n'
    "    raise value\n"
    "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: RayWorkerVllm\n"
)
RAY_WORKER_KILLED = (
    "2023-12-26 07:10:19,486\tWARNING worker.py:2074 -- A worker died or was killed while executing a task by an "
    "unexpected system error. To troubleshoot the problem, check the logs for the dead worker.\n"
)


def test_a_dead_ray_actor_is_another_failure() -> None:
    f = classify_text(RAY_ACTOR_DIED, "worker.log")
    assert f.category == "other-failure" and f.kind == "ray_worker_died" and not f.benign


def test_a_worker_killed_by_a_system_error_is_another_failure() -> None:
    f = classify_text(RAY_WORKER_KILLED, "ray.log")
    assert f.category == "other-failure" and f.kind == "ray_worker_died"


def test_code_that_handles_the_exception_is_not_a_dead_worker() -> None:
    f = classify_text("The router catches RayActorError and retries the request on another replica.\n", "notes.md")
    assert f.kind != "ray_worker_died"


# --- an unsupported model architecture ------------------------------------------------------------------------

def test_an_unsupported_architecture_is_another_failure() -> None:
    text = ("ValueError: Model architectures ['GemmaForCausalLM'] are not supported for now. "
            "Supported architectures: ['LlamaForCausalLM', 'MistralForCausalLM']\n")
    f = classify_text(text, "start.log")
    assert f.category == "other-failure" and f.kind == "model_arch_unsupported"


def test_the_list_of_supported_architectures_alone_is_nothing() -> None:
    f = classify_text("Supported architectures: ['LlamaForCausalLM', 'MistralForCausalLM']\n", "notes.md")
    assert f.kind != "model_arch_unsupported"


# --- a graph capture failure named by its CUDA error or code --------------------------------------------------

def test_a_graph_capture_failure_with_its_cuda_error_is_a_cuda_graph_failure() -> None:
    f = classify_text("[PAR-054] Graph capture failed: CUDA_ERROR_UNKNOWN (code: 901)\n", "server.log")
    assert f.category == "cuda-graph"


def test_graph_capture_failed_without_a_cuda_error_or_code_is_not_read_as_one() -> None:
    f = classify_text("Graph capture failed tests are skipped on this runner (see code: 42 in the CI doc)\n", "ci.md")
    assert f.category != "cuda-graph"


# --- hangs told in words --------------------------------------------------------------------------------------

def test_then_randomly_hangs_is_a_reported_hang() -> None:
    text = "Server runs fine for the first 100 or so requests and then randomly hangs without any error message\n"
    f = classify_text(text, "issue.md")
    assert f.category == "hang" and f.kind == "ranks_stuck_reported"


def test_a_system_that_hangs_is_a_reported_hang_but_a_conditional_one_is_not() -> None:
    assert classify_text("Single GPU is OK, System hangs when I use multiple GPUs.\n", "a.md").category == "hang"
    assert classify_text("Without the timeout the server could hang forever.\n", "b.md").category != "hang"


def test_guaxi_is_a_hang_in_chinese_but_suspending_a_process_is_not() -> None:
    hung = "处理完前面的request之后，engine会长时间挂起，之后会request timeout\n"
    assert classify_text(hung, "zh.md").category == "hang"
    assert classify_text("使用 kill -STOP 挂起进程\n", "zh2.md").category != "hang"


# --- a full KV cache explains the stall told beside it --------------------------------------------------------

def test_a_full_kv_cache_told_beside_a_freeze_is_kv_pressure() -> None:
    text = ("Same thing for me after I use vLLM for awhile KV cache goes to 100% and the system freezes up.  "
            "When does cache get cleared?\n")
    f = classify_text(text, "issue.md")
    assert f.category == "kv-pressure"


# --- an imperative answer is a how-to -------------------------------------------------------------------------

ANSWER_802 = ("For `Error 802: system not yet initialized`, install `nvidia-fabricmanager`. "
              "Ref: https://github.com/pytorch/pytorch/issues/35710#issuecomment-901013741\n")


def test_an_imperative_answer_pairing_an_error_with_its_remedy_is_a_guide() -> None:
    assert described.is_guide(ANSWER_802)
    f = classify_text(ANSWER_802, "answer.md")
    assert f.benign


def test_a_report_of_the_same_error_is_not_a_guide() -> None:
    report = "For Error 802 I installed nvidia-fabricmanager, but we still get Error 802: system not yet initialized.\n"
    assert not described.is_guide(report)
