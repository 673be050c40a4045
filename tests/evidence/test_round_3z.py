"""Focused tests for the rules round 3z added (docs/evidence.md, "Round 3z"): an audit of the lines the layers under
an engine print (PyTorch distributed, NCCL, the CUDA runtime as PyTorch reports it, Kubernetes and NVIDIA's device
plugin), each rendered from its producer's format string and read by the classifier before any rule was written.

Producers:
- pytorch aten/src/ATen/cuda/CUDABlas.cpp TORCH_CUDABLAS_CHECK ("CUDA error: ", _cublasGetErrorEnum(__err),
  " when calling `" #EXPR "`"); the CUDA runtime's cudaErrorLaunchTimeout ("the launch timed out and was terminated")
- pytorch torch/distributed/elastic/multiprocessing/errors/__init__.py (ChildFailedError.format_msg, ProcessFailure:
  "Signal {sig} ({name}) received by PID {pid}"), torch/distributed/elastic/agent/server/api.py
  ("[{role}] Worker group {state}. {remaining}/{max} attempts left; will restart worker group")
- kubernetes pkg/kubelet/eviction/helpers.go ("The node was low on resource: %v. "), pkg/kubelet/prober/prober.go
  (event Unhealthy: "%s probe failed: %s"), kuberuntime ("Container %s failed %s probe, will be restarted")
- NVIDIA/k8s-device-plugin internal/plugin/server.go ("'%s' device marked unhealthy: %s")
- pytorch ProcessGroupNCCL.cpp ("ProcessGroupNCCL initialization options: "), c10/cuda/impl/CUDAGuardImpl.h
  (C10_CUDA_CHECK_WARN "CUDA warning: driver shutting down")

Lines are rendered from those formats with made-up values; texts are written for the tests. Each rule has a
look-alike. The signatures' own must-match / must-not-match examples run in test_signatures.py.
"""

from __future__ import annotations

from tests.evidence.rounds import catalogue_category as _catalogue
from tests.evidence.rounds import category as _cat
from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence.classify import classify_text

_CHILD_FAILED = """\
[rank3]:[E1201 03:20:50.998877665 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group \
watchdog thread terminated with exception: [Rank 3] Watchdog caught collective operation timeout: \
WorkNCCL(SeqNum=5123, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds \
before timing out.
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-12-01_03:20:51
  host      : gpu-node-07
  rank      : 3 (local_rank: 3)
  exitcode  : -6 (pid: 41234)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 41234
============================================================
"""


def test_torchruns_failure_report_is_a_dead_worker_not_a_garbage_output() -> None:
    banner = _CHILD_FAILED.split("\n", 1)[1]
    f = classify_text(banner, "torchrun.log")
    assert (f.kind, f.category, f.incident_hint) == ("torch_elastic_worker_failed", "other-failure", None)
    assert not any(x.category == "bad-output" for x in f.findings)
    agent = ("[2025-12-01 03:20:51,220] torch.distributed.elastic.agent.server.api: [WARNING] [default] Worker group "
             "FAILED. 3/3 attempts left; will restart worker group\n")
    assert _catalogue(agent, "agent.log") == "other-failure"


def test_the_cause_above_the_report_names_the_file() -> None:
    # the report is a warning: the watchdog's timeout printed before it is the reading
    assert _cat(_CHILD_FAILED, "torchrun.log") == "hang"


def test_a_finished_worker_group_and_the_import_are_quiet() -> None:
    assert _quiet("[2025-12-01 05:44:10,002] torch.distributed.elastic.agent.server.api: [INFO] Local worker group "
                  "finished (WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish\n", "agent.log")
    assert _catalogue("from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, record\n",
                      "train.py") != "other-failure"


def test_a_module_qualified_exception_is_never_read_as_a_models_answer() -> None:
    # the rules and record rows of a report around a raised exception are a process's format
    text = ("vllm.v1.engine.exceptions.EngineDeadError:\n" + "=" * 60 + "\n" + "-" * 60 + "\n" + "-" * 60 + "\n"
            + "=" * 60 + "\n")
    assert not any(x.category == "bad-output" for x in classify_text(text, "out.txt").findings)
    # a run of one mark with nothing around it is still a degenerate answer
    assert _cat("!" * 400 + "\n", "answer.txt") == "bad-output"


def test_a_failed_cublas_call_and_a_killed_kernel_are_kernel_failures() -> None:
    tb = ("Traceback (most recent call last):\n"
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/linear.py", line 512, '
          "in forward\n"
          "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, "
          "m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, "
          "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`\n")
    f = classify_text(tb, "worker.log")
    assert (f.kind, f.category, f.lines) == ("cuda_kernel_failed", "other-failure", (3,))
    timeout = ("RuntimeError: CUDA error: the launch timed out and was terminated\n"
               "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
               "might be incorrect.\n")
    assert classify_text(timeout, "worker.log").kind == "cuda_kernel_failed"


def test_the_status_names_in_code_are_not() -> None:
    code = ('const char* _cublasGetErrorEnum(cublasStatus_t error) {\n  switch (error) {\n'
            '    case CUBLAS_STATUS_EXECUTION_FAILED:\n      return "CUBLAS_STATUS_EXECUTION_FAILED";\n')
    assert _catalogue(code, "CUDABlas.cpp") not in {"other-failure", "bad-output"}


def test_an_evicted_pod_is_a_node_resource_failure() -> None:
    describe = ("Name:             vllm-0\nNamespace:        inference\nStatus:           Failed\n"
                "Reason:           Evicted\n"
                "Message:          The node was low on resource: memory. Threshold quantity: 100Mi, available: "
                "87344Ki. Container vllm was using 61234560Ki, request is 32Gi, has larger consumption of memory.\n")
    f = classify_text(describe, "describe.txt")
    assert (f.kind, f.category) == ("pod_evicted", "other-failure")
    assert f.facts.get("resource") == "memory"
    assert _catalogue("We found the node was low on resource headroom, so we raised the requests.\n") != \
        "other-failure"


def test_a_gpu_the_device_plugin_marks_unhealthy_is_a_gpu_fault() -> None:
    log = ("I1201 03:12:39.998001       1 health.go:159] Processing event {Device:{Handle:0x7f} EventType:8 "
           "EventData:0 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
           "I1201 03:12:40.123789       1 server.go:262] 'nvidia.com/gpu' device marked unhealthy: "
           "GPU-8f3c2a1b-4d5e-6f70-8192-a3b4c5d6e7f8\n")
    f = classify_text(log, "nvidia-device-plugin.log")
    assert (f.kind, f.category, f.incident_hint) == ("gpu_marked_unhealthy", "gpu-hardware", "gpu-ecc")
    assert f.lines == (2,)
    assert _quiet('\t\tklog.Infof("\'%s\' device marked unhealthy: %s", plugin.rm.Resource(), d.ID)\n', "server.go")


def test_a_startup_probe_that_waits_for_the_model_is_routine_until_it_restarts() -> None:
    waiting = ("Events:\n  Type     Reason     Age               From     Message\n"
               "  Warning  Unhealthy  95s (x9 over 2m)  kubelet  Startup probe failed: Get "
               '"http://10.244.3.17:8000/health": dial tcp 10.244.3.17:8000: connect: connection refused\n')
    assert _quiet(waiting, "describe.txt")
    restarted = waiting + ("  Normal   Killing    10s               kubelet  Container vllm failed startup probe, "
                           "will be restarted\n")
    assert classify_text(restarted, "describe.txt").kind == "probe_restart_reported"


def test_start_up_and_exit_banners_of_pytorch_are_quiet() -> None:
    assert _quiet("[rank0]:[I1201 03:01:02.000123456 ProcessGroupNCCL.cpp:926] [PG ID 0 PG GUID 0 Rank 0] "
                  "ProcessGroupNCCL initialization options: size: 8, global rank: 0, TIMEOUT(ms): 600000, "
                  "USE_HIGH_PRIORITY_STREAM: 0, SPLIT_FROM: 0, SPLIT_COLOR: 0, PG Name: 0\n", "train.log")
    assert _quiet("[W1201 05:44:13.000123456 CUDAGuardImpl.h:119] Warning: CUDA warning: driver shutting down "
                  "(function uncheckedDestroyEvent)\n", "train.log")
