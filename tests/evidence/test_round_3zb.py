"""Focused tests for the rules round 3zb added from check set 3zb's misses (docs/evidence.md, "Round 3zb"), each a
producer's format:
- ROCR-Runtime's memory fault handler ("Memory access fault by GPU node-%u (Agent handle: %p) on address %p%s.
  Reason: %s."): the ROCm form of a kernel's illegal memory access; during graph capture, a capture failure
- text-generation-inference's warm-up (flash_causal_lm.py: "Not enough memory to handle {n} prefill tokens. You need
  to decrease `--max-batch-prefill-tokens`")
- torch/distributed/elastic/multiprocessing/api.py ("failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s")
- nvidia-smi ("WARNING: infoROM is corrupted at gpu %s")
- PyTorch's C10_CUDA_CHECK ("CUDA error: ", cudaGetErrorString(err); torch.AcceleratorError since 2.8): a CUDA failure
  no more specific signature names
- a logger's date and time behind its own prefix (NeMo's "[NeMo I 2026-04-16 13:14:02 rnnt_models:292 rank:0]") is a
  log, not a model's answer; a code review's diff fence of four backticks and its ```suggestion block are code under
  change.

Lines are rendered from those formats with made-up values; texts are written for the tests. Each rule has a
look-alike. The signatures' own must-match / must-not-match examples run in test_signatures.py.
"""

from __future__ import annotations

from tests.evidence.rounds import catalogue_category as _catalogue
from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence import described
from llm_oncall.evidence.classify import classify_text

_ROCM_CAPTURE = """\
(Worker_TP0 pid=3098) DEBUG 02-24 02:39:34 [compilation/cuda_graph.py:239] Capturing a cudagraph on (FULL,\
BatchDescriptor(num_tokens=32, num_reqs=32, uniform=True, has_lora=False, num_active_loras=0))
Memory access fault by GPU node-5 (Agent handle: 0x460e3a50) on address 0x7ec4dfe0e000. Reason: Write access to a \
read-only page.
Capturing CUDA graphs (decode, FULL):  88%|███████▋ | 45/51 [00:05<00:00,  9.32it/s]
"""


def test_a_rocm_memory_fault_is_a_kernel_fault_and_in_capture_a_capture_failure() -> None:
    alone = ("Quantizing mlp.experts.14.up_proj in layer [1 of 47] 4.2%Memory access fault by GPU node-1 "
             "(Agent handle: 0x556e9b7e3360) on address 0x7f52c3f5f000. Reason: Page not present or supervisor "
             "privilege.\n"
             "Aborted (core dumped)\n")
    f = classify_text(alone, "quantize.log")
    assert (f.kind, f.category) == ("cuda_illegal_memory_access", "other-failure")
    g = classify_text(_ROCM_CAPTURE, "worker.log")
    assert (g.kind, g.category, g.incident_hint) == ("cuda_graph_capture_error", "cuda-graph", "cuda-graph-crash")
    assert _quiet("What caused the memory access fault on GPU node-4? An out-of-bounds access in a kernel.\n")


def test_tgis_warmup_out_of_memory_is_a_start_up_failure() -> None:
    log = ("2023-09-26T21:48:00.969072Z ERROR text_generation_launcher: Method Warmup encountered an error.\n"
           "RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease "
           "`--max-batch-prefill-tokens`\n")
    f = classify_text(log, "tgi.log")
    assert f.category == "other-failure" and "warmup_out_of_memory" in {x.kind for x in f.findings}
    g = classify_text(log.split("\n", 1)[1], "tgi.log")  # the message alone, as a user quotes it
    assert (g.kind, g.category, g.incident_hint) == ("warmup_out_of_memory", "other-failure", None)
    assert _catalogue("docker run tgi --max-batch-prefill-tokens 4096 --max-total-tokens 8192\n") != "other-failure"


def test_torchruns_agent_line_of_a_killed_worker() -> None:
    log = ("WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2410413 closing signal SIGTERM\n"
           "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 2410412) "
           "of binary: /data/envs/cai/bin/python\n")
    f = classify_text(log, "torchrun.log")
    assert (f.kind, f.category) == ("torch_elastic_worker_failed", "other-failure")
    ok = ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 0) local_rank: 0 (pid: 1) "
          "of binary: x\n")
    assert "torch_elastic_worker_failed" not in {x.kind for x in classify_text(ok, "torchrun.log").findings}


def test_a_corrupted_inforom_is_a_gpu_hardware_finding_above_the_crash_it_causes() -> None:
    paste = ("$ microk8s kubectl get pods -n gpu-operator-resources\n"
             "nvidia-driver-daemonset-x7k2p   0/1   CrashLoopBackOff   12   40m\n"
             "$ nvidia-smi\n"
             "WARNING: infoROM is corrupted at gpu 0000:00:05.0\n")
    f = classify_text(paste, "issue.md")
    assert (f.kind, f.category, f.incident_hint) == ("gpu_inforom_corrupted", "gpu-hardware", "gpu-ecc")
    assert _quiet("All GPU UUIDs remained unchanged (no RMA), and no InfoROM corruption is reported.\n")


def test_a_loggers_dated_prefix_is_a_log_not_a_degenerate_output() -> None:
    nemo = ("6-04-16 13:14:00 label_looping_base:109 rank:0] No conditional node support for Cuda.    │··········\n"
            "    Cuda graphs with while loops are disabled, decoding speed will be slower    │··········\n"
            "    Reason: Driver supports cuda toolkit version 12.2, but the driver needs at least 12,3.  │···\n"
            "[NeMo I 2026-04-16 13:14:02 rnnt_models:292 rank:0] Timestamps requested, setting decoding timestamps "
            "│··········\n")
    assert all(x.category != "bad-output" for x in classify_text(nemo, "nemo.log").findings)
    # a degenerate answer is still one, and a time of day in an answer is not a log's prefix
    assert _catalogue("The meeting starts at 10:30:00 and " + "!" * 300 + "\n") == "bad-output"


def test_a_review_diff_of_four_backticks_and_a_suggestion_block_are_code_under_change() -> None:
    assert described.has_diff("````diff\n+ a line\n````\n")
    assert described.has_diff("```suggestion\n> [!WARNING] text\n```\n")
    assert not described.has_diff("```python\nprint(1)\n```\n")
    review = ("docs/architecture/disaggregation.md\n````diff\n"
              "+> Robustness against Decode Worker failure is a weakness of the design, since the timeout is long.\n"
              "````\n**reviewer**:\n```suggestion\n"
              "> Robustness against Decode Worker failure is a weakness of the design, since the timeout is long.\n"
              "```\n")
    assert all(x.category != "bad-output" for x in classify_text(review, "review.md").findings)


_ENGINE_CORE_CUDA_ERROR = """\
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1133, in run_engine_core
    engine_core.run_busy_loop()
  File "/usr/local/lib/python3.12/dist-packages/flashinfer/decode.py", line 752, in __init__
    self._pin_memory_int_workspace_buffer = torch.empty(
torch.AcceleratorError: CUDA error: OS call failed or operation not supported on this OS
"""


def test_a_cuda_error_no_signature_names_is_a_cuda_failure_ranked_below_the_named_ones() -> None:
    f = classify_text(_ENGINE_CORE_CUDA_ERROR, "engine.log")
    assert (f.kind, f.category, f.incident_hint) == ("cuda_runtime_error", "other-failure", None)
    # a named error keeps its own reading (the catch-all is a warning below it)
    ecc = _ENGINE_CORE_CUDA_ERROR.replace("OS call failed or operation not supported on this OS",
                                          "uncorrectable ECC error encountered")
    assert classify_text(ecc, "engine.log").category == "gpu-memory"
    # a capture error cut by the paste is left to the CUDA-graph reading, and code that formats the message is no event
    assert "cuda_runtime_error" not in {x.kind for x in classify_text(
        "# torch.AcceleratorError: CUDA error: operation not permitt\n", "mre.py").findings}
    assert "cuda_runtime_error" not in {x.kind for x in classify_text(
        '    raise RuntimeError(f"CUDA error: {msg}")\n', "utils.py").findings}
