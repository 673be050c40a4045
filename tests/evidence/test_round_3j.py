"""Focused tests for the general rules round 3j added (docs/evidence.md), from the wordings round 3i's check set
showed: hangs told in prose (a service that became unresponsive, a server that stalls and answers no request,
requests that never complete, throughput that decays to 0 tok/s, a habitual "will hang sometimes") and vLLM V0's
"Waiting for output from MQLLMEngine." repeated for a minute; other failures in formats the catalogue did not know
(Triton's failed model load, KServe's FailedToLoad model state, an init container in CrashLoopBackOff, RaySystemError,
the NCCLCHECK macro's "Failed, NCCL error", TurboMind's assertion and CUDA runtime out of memory, a host OOM kill told
in prose); a repeated log line is never read as a garbage model output; bad outputs told in words ("then into pure
garbage", "the same phrase over and over", "empty or garbage output", Chinese 大量重复); the GPU fabric state stuck In
Progress; "the CUDA graph cannot be captured"; and a design question ("will the server stuck ...?") is no report.
Each rule has a look-alike that must not match. The signatures' own must-match / must-not-match examples run in
test_signatures.py. The real files are in tests/evidence/real/fresh-2026-12i-check (held out until round 3j).
"""

from __future__ import annotations

import pytest
from tests.evidence.rounds import catalogue_category

from llm_oncall.evidence.classify import classify_text

# ---- hangs told in prose -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "After an hour of steady load the service became unresponsive and every request timed out.\n",
    "After about 30 seconds of traffic the inference server stalls, not responding to any requests.\n",
    "The API server stays healthy (/health 200) but the stuck requests never complete or error.\n",
    "Generation throughput decays to 0 tok/s within a minute while the engine still reports Running: 2.\n",
    "With a large batch size the inference process will hang sometimes.\n",
])
def test_a_hang_told_in_prose_is_a_hang(text: str) -> None:
    f = classify_text(text, "issue.md")
    assert f.category == "hang" and f.incident_hint == "engine-hang"


@pytest.mark.parametrize("text", [
    "Without a timeout the server could become unresponsive under load.\n",
    "If the peer dies the scheduler will hang until the watchdog fires.\n",
    "Generation throughput drops to 0 tok/s when idle, as expected.\n",
    "This PR fixes requests that never complete after an abort.\n",
])
def test_a_hypothetical_or_fixed_hang_is_no_report(text: str) -> None:
    assert catalogue_category(text) != "hang"


def test_a_design_question_whether_the_server_gets_stuck_is_no_report() -> None:
    text = (
        "If the prefill node never frees the blocks of a request, will the server stuck when the queue is full?\n"
        "Then the second request never runs and the scheduler will get stuck in the loop between those steps.\n"
    )
    assert classify_text(text, "question.md").category != "hang"


def _mq_wait(n: int, extra: str = "") -> str:
    lines = [f"DEBUG 05-31 01:5{i // 6}:{(i % 6) * 10:02d} client.py:191] Waiting for output from MQLLMEngine."
             for i in range(n)]
    return "\n".join(lines[: n // 2] + ([extra] if extra else []) + lines[n // 2:]) + "\n"


def test_vllm_waiting_for_engine_output_for_a_minute_is_a_hang() -> None:
    f = classify_text(_mq_wait(8), "api-server.log")
    assert f.category == "hang" and f.kind == "engine_output_wait"


def test_a_short_wait_or_a_producing_engine_is_no_hang() -> None:
    assert classify_text(_mq_wait(2), "api-server.log").kind != "engine_output_wait"
    producing = ("INFO 05-31 01:52:31 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, "
                 "Avg generation throughput: 24.3 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs")
    assert classify_text(_mq_wait(8, producing), "api-server.log").kind != "engine_output_wait"


# ---- other failures in formats the catalogue did not know ------------------------------------------------------


@pytest.mark.parametrize(("text", "kind"), [
    ("E1216 02:12:50.904 179 model_lifecycle.cc:638] failed to load 'vllm_model' version 1: Internal: boom\n"
     "error: creating server: Internal - failed to load all models\n", "triton_model_load_failed"),
    ("  Model Status:\n    Last Failure Info:\n      Reason:   ModelLoadFailed\n    States:\n"
     "      Active Model State:  \n      Target Model State:  FailedToLoad\n", "kserve_model_failed_to_load"),
    ("ray.exceptions.RaySystemError: System error: No module named 'utils'\n", "ray_system_error"),
    ("Failed, NCCL error /src/plugins/ncclPlugin/allreducePlugin.cpp:183 'unknown result code'\n", "nccl_setup_error"),
    ("RuntimeError: [TM][ERROR]  Assertion fail: /lmdeploy/src/turbomind/models/llama/Barrier.h:20\n",
     "engine_assertion_failed"),
    ("[TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/core/allocator.cc:49\n", "cuda_oom"),
    ("The scheduler's memory grows 10 GB an hour until the process is killed by the system (OOM).\n",
     "process_killed_reported"),
])
def test_a_failure_in_a_new_format_is_another_failure(text: str, kind: str) -> None:
    f = classify_text(text, "excerpt.txt")
    assert f.category == "other-failure" and f.kind == kind and not f.benign


@pytest.mark.parametrize("text", [
    "| vllm_model | 1       | READY  |\n",
    "      Target Model State:  Loaded\n    Transition Status:     UpToDate\n",
    "except ray.exceptions.RaySystemError:\n    retry()\n",
    "If host memory runs out, the process will be killed by the system (OOM).\n",
])
def test_their_look_alikes_are_no_failure(text: str) -> None:
    assert catalogue_category(text, "excerpt.txt") not in {"other-failure", "hang", "bad-output"}


def test_an_init_container_in_crash_loop_is_a_crash_loop() -> None:
    text = (
        "NAME                                          READY   STATUS                  RESTARTS   AGE\n"
        "predictor-default-00001-deployment-64bb9bc7   0/2     Init:CrashLoopBackOff   94         27d\n"
    )
    f = classify_text(text, "pods.txt")
    assert f.category == "other-failure" and f.kind == "crashloop"


def test_init_containers_still_running_are_no_crash_loop() -> None:
    text = (
        "NAME                                          READY   STATUS     RESTARTS   AGE\n"
        "predictor-default-00001-deployment-64bb9bc7   0/2     Init:0/1   0          20s\n"
    )
    assert classify_text(text, "pods.txt").kind != "crashloop"


def test_a_repeated_log_line_is_never_a_garbage_output() -> None:
    text = (
        "### Describe the bug\n\nFailed to find a feasible kernel in the cache, will dispatch by heuristic.\n"
        "[TM][ERROR] CUDA runtime error: invalid argument /lmdeploy/src/turbomind/kernels/gemm/moe.cu:760\n\n"
        "### Reproduction\n\nFailed to find a feasible kernel in the cache, will dispatch by heuristic.\n"
        "[TM][ERROR] CUDA runtime error: invalid argument /lmdeploy/src/turbomind/kernels/gemm/moe.cu:760\n"
    )
    f = classify_text(text, "issue.md")
    assert f.category != "bad-output" and all(x.category != "bad-output" for x in f.findings)
    assert f.category == "other-failure"


# ---- bad outputs told in words --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Since the upgrade the model started to give empty or garbage output on every second prompt.\n",
    "After a few turns the answer turned into python code and then into pure gibberish.\n",
    "In many situations the model will keep outputting the same phrase over and over after some time.\n",
    "部署后模型输出大量重复内容，直到 max_tokens。\n",
])
def test_a_bad_output_told_in_words_is_a_bad_output(text: str) -> None:
    f = classify_text(text, "issue.md")
    assert f.category == "bad-output" and f.kind == "bad_output_reported"


@pytest.mark.parametrize("text", [
    "Without a repetition penalty a small model would keep repeating the same sentence.\n",
    "The retry loop sends the same request over and over until it succeeds.\n",
    "修复了输出大量重复的问题\n",
    "如何避免模型重复输出？\n",
])
def test_a_hypothetical_or_fixed_bad_output_is_no_report(text: str) -> None:
    assert classify_text(text, "issue.md").category != "bad-output"


# ---- NVLink fabric, CUDA graphs --------------------------------------------------------------------------------


def test_a_gpu_fabric_stuck_in_progress_is_nvlink() -> None:
    text = (
        "    Fabric\n"
        "        State                                          : In Progress\n"
        "        Status                                         : N/A\n"
        "        CliqueId                                       : N/A\n"
    )
    f = classify_text(text, "nvidia-smi-q.txt")
    assert f.category == "nvlink" and f.kind == "fabric_state_in_progress"


def test_a_completed_fabric_and_a_review_about_the_state_are_no_fault() -> None:
    done = "    Fabric\n        State                                          : Completed\n"
    assert classify_text(done, "nvidia-smi-q.txt").category != "nvlink"
    review = ("I wonder if we need to check if the fabric state is `In Progress` first on all GPUs before attempting "
              "to reset.\n")
    assert classify_text(review, "review.md").category != "nvlink"


def test_a_cuda_graph_that_cannot_be_captured_is_a_capture_failure() -> None:
    f = classify_text("When `enforce_eager` is set to False, the CUDA graph cannot be captured correctly.\n", "i.md")
    assert f.category == "cuda-graph" and f.incident_hint == "cuda-graph-crash"


def test_a_rule_about_capture_is_no_capture_failure() -> None:
    text = "If the kernel synchronizes with the host, the CUDA graph cannot be captured.\n"
    assert classify_text(text, "doc.md").category != "cuda-graph"
