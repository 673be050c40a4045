"""Round 3zk (docs/evidence.md, "Round 3zk"): read from check set 3zk's misses after it was measured, each a producer's
format or a report's wording with its look-alikes; written before check set 3zl was read."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import paste, reported
from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize(("text", "kind", "category"), [
    # Google's TPU runtime as JAX / TensorFlow / torch_xla raise it
    ("RuntimeError: INTERNAL: Core halted unexpectedly: No error message available as no compiler metadata was "
     "provided.", "accelerator_runtime_fatal", "other-failure"),
    ("ERROR:tensorflow:Error recorded from training_loop: From /job:worker/replica:0/task:0:\nCore halted "
     "unexpectedly:", "accelerator_runtime_fatal", "other-failure"),
    # a glog / absl CHECK and TSL's TF_CHECK_OK abort the process
    ("2022-06-24 18:11:19.419635: F tensorflow/core/tpu/kernels/tpu_program_group.cc:86] Check failed: "
     "xla_tpu_programs.size() > 0 (0 vs. 0)", "crash_reported", "other-failure"),
    ("F0000 00:00:1717141650.890307    9276 pjrt_computation_client.cc:487] Non-OK-status: status status: "
     "INTERNAL: stream did not block host until done", "crash_reported", "other-failure"),
    # llama.cpp cannot hold the KV cache of the context asked for: the model never loads
    ("llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache",
     "kv_cache_too_small", "other-failure"),
    # the kubelet refuses a pod whose device plugin's Allocate failed
    ("  Warning  UnexpectedAdmissionError  73s               kubelet        Allocate failed due to rpc error: code = "
     "Unavailable desc = transport is closing, which is unexpected", "pod_admission_failed", "other-failure"),
    # the scheduler's event with the Reason column padded to a long reason
    ("  Warning  FailedScheduling          73s               hami-scheduler  0 nodes are available",
     "pod_unschedulable", "other-failure"),
])
def test_the_producers_formats_of_round_3zk(text: str, kind: str, category: str) -> None:
    f = classify_text(text + "\n", "paste.txt")
    assert (f.kind, f.category) == (kind, category)


@pytest.mark.parametrize("text", [
    "-- This database RESTORE halted prematurely due to power failure.",
    "This PR fixes the Core halted unexpectedly: error on v2 by padding the buffer.",
    '  CHECK(ok) << "Check failed: " << status;',
    '            throw std::runtime_error("failed to allocate buffer for kv cache");',
    "llama_kv_cache_unified:      CUDA0 KV buffer size =  1024.00 MiB",
    '\t\tMessage: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err),',
    "Fetched a rate of 0, which is unexpected; skipping message send.",
    "  Normal   Scheduled   73s   default-scheduler   Successfully assigned default/gpu-pod to node-5",
])
def test_their_look_alikes_are_not(text: str) -> None:
    assert classify_text(text + "\n", "paste.txt").kind not in (
        "accelerator_runtime_fatal", "crash_reported", "kv_cache_too_small", "pod_admission_failed",
        "pod_unschedulable")


def test_grep_line_numbers_are_read_as_a_prefix_when_several_lines_carry_one() -> None:
    text = ("78:Exception in device=TPU:7: something went wrong\n"
            "123:RuntimeError: tensorflow/compiler/xla/xla_client/xrt_computation_client.cc:383 : Check failed: "
            "session->session()->Run() == ::tensorflow::Status::OK() (Cancelled: From /job:tpu_worker/replica:0)\n")
    p = paste.read(text)
    assert p.lines[1].startswith("RuntimeError: ")
    f = classify_text(text, "paste.txt")
    assert (f.kind, f.lines) == ("crash_reported", (2,))


def test_a_clock_a_list_or_one_numbered_line_is_not_a_grep_prefix() -> None:
    text = "10:21:03 server started\n1: first item\n2: second item\n42:Error once\n"
    assert paste.read(text).lines == ("10:21:03 server started", "1: first item", "2: second item", "42:Error once")


@pytest.mark.parametrize(("line", "pattern"), [
    ("The rocm-bandwidth-test is ok, but the rccl-tests get stuck.", "event_verb"),
    ("**What is the bug?**", "report_heading"),  # LM Studio's template
    ("用户遇到了一个典型的技术问题:无论输入什么内容,模型都只会输出感叹号。", "chinese"),
    ("部署后模型输出异常", "chinese"),
])
def test_the_readers_new_wordings(line: str, pattern: str) -> None:
    assert reported.line_reports(line) == pattern


@pytest.mark.parametrize("line", [
    "如果遇到问题请重启服务",  # advice: "if you meet a problem, restart"
    "What is the bug you are seeing?",  # a question in prose, not a template heading
    "Do the tests get stuck when the GPU is busy?",
])
def test_their_look_alikes_report_nothing(line: str) -> None:
    assert reported.line_reports(line) is None


def test_an_output_that_is_only_one_thing_is_a_bad_output_cue() -> None:
    lex = reported.lexicon()
    cues = dict(lex.classes)
    assert cues["bad-output"].search('it just only output "□□□□□□□□", change a lot model')
    assert cues["bad-output"].search("the model only returns exclamation marks")
    assert cues["bad-output"].search("模型只会输出感叹号")
    assert not cues["bad-output"].search("the exporter only outputs metrics for running pods")
