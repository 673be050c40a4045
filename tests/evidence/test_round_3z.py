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


# ---- round 3z, second audit: command output of the GPU node (DCGM, nvidia-smi, nccl-tests, the fabric manager) and
# vLLM's own lines across its releases (0.4.3 to 0.11.0). Formats from DCGM's source (dcgmi/Diag.cpp,
# dcgmlib/dcgm_errors.h, dcgmlib/src/dcgm_fields.cpp), nccl-tests' (src/common.cu, src/util.cu) and vLLM's (the
# release's files named in each signature's source); nvidia-smi and the fabric manager from real pastes.

_DIAG_4X = """\
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Deployment  --------+------------------------------------------------|
| software                  | Fail                                           |
|                           | GPU4: Pass                                     |
|                           | GPU5: Fail                                     |
| Warning: GPU5             | GPU 5 had uncorrectable memory errors and row  |
|                           |  remapping failed. Run a field diagnostic on   |
|                           | the GPU.                                       |
+---------------------------+------------------------------------------------+
"""


def test_a_dcgm_diag_is_read_by_what_its_messages_say_not_the_tests_name() -> None:
    f = classify_text(_DIAG_4X, "dcgmi-diag.txt")
    assert (f.kind, f.category, f.incident_hint) == ("dcgm_diag_memory_fail", "gpu-memory", "gpu-ecc")
    down = _DIAG_4X.replace("GPU 5 had uncorrectable memory errors and row  ",
                            "GPU 5's NvLink link 7 is currently down       ").replace(
        " remapping failed. Run a field diagnostic on   ", " Check the cable and the switch.               ")
    assert classify_text(down, "dcgmi-diag.txt").category == "nvlink"


def test_a_word_dcgm_cut_at_its_45_character_cell_is_joined_again() -> None:
    diag = ("| Diagnostic                | Result                                         |\n"
            "| Targeted Power            | Pass - GPU: 0, 1, 3                            |\n"
            "|                           | Fail - GPU: 2                                  |\n"
            "| Warning                   | GPU 2 Detected clocks event due to thermal vi |\n"
            "|                           | olation in GPU 2. Verify that the cooling on  |\n")
    f = classify_text(diag, "dcgmi-diag.txt")
    assert (f.kind, f.category) == ("dcgm_diag_hardware_fail", "gpu-hardware")
    assert any("thermal violation in GPU 2" in m for m in f.facts["messages"])


def test_dcgm_health_thermal_and_pcie_are_the_gpus_hardware_at_warning() -> None:
    report = ("| Overall Health            | Warning                                                  |\n"
              "| -> 5                      | Warning                                                  |\n"
              "|       -> Thermal system   | Warning                                                  |\n"
              "|                           | Detected clocks event due to thermal violation in GPU    |\n")
    f = classify_text(report, "dcgmi-health.txt")
    assert (f.category, f.incident_hint, f.severity) == ("gpu-hardware", "gpu-ecc", "warning")


def test_dcgm_dmon_row_remap_columns() -> None:
    dmon = ("#Entity   RRF     RRP     \nID                        \nGPU 5     0       0       \n"
            "GPU 6     0       1       \n")
    f = classify_text(dmon, "dmon.txt")
    assert (f.kind, f.category, f.facts["bad_gpus"]) == ("row_remap_pending", "gpu-memory", ["6"])
    assert _quiet(dmon.replace("GPU 6     0       1", "GPU 6     0       0"), "dmon.txt")


def test_nvidia_smi_hardware_slowdown_now_not_its_history() -> None:
    q = ("    Clocks Event Reasons\n        Idle                              : Not Active\n"
         "        HW Slowdown                       : Active\n"
         "            HW Thermal Slowdown           : Active\n"
         "            HW Power Brake Slowdown       : Not Active\n")
    f = classify_text(q, "nvidia-smi-q.txt")
    assert (f.kind, f.category, f.lines) == ("gpu_hw_slowdown", "gpu-hardware", (3, 4))
    history = ("    Clocks Event Reasons Counters\n        HW Thermal Slowdown               : 14822915 us\n"
               "    Clocks Event Reasons\n        HW Slowdown                       : Not Active\n")
    assert _quiet(history, "nvidia-smi-q.txt")


def test_repeated_fabric_blocks_are_command_output_not_a_repeating_answer() -> None:
    block = "    Fabric\n        State                             : Completed\n" \
            "        Status                            : Success\n"
    assert _quiet(block * 8, "nvidia-smi-q.txt")


def test_nccl_tests_wrong_values_and_its_own_timeout() -> None:
    wrong = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong\n"
             "  8589934592    2147483648     float     sum      -1  38100.1  225.46  394.55       4\n"
             "# Out of bounds values : 12 FAILED\n# Avg bus bandwidth    : 187.2\n")
    assert classify_text(wrong, "nccl-tests.txt").kind == "nccl_tests_wrong_values"
    assert _quiet(wrong.replace("12 FAILED", "0 OK").replace("       4\n", "       0\n"), "nccl-tests.txt")
    stuck = ("    16777216       4194304     float     sum      -1    79.42  211.24  369.67       0\n"
             "gpu-h100-07: Test timeout (300s) common.cu:523\n .. gpu-h100-07 pid 41210: Test failure common.cu:588\n")
    f = classify_text(stuck, "nccl-tests.txt")
    assert (f.kind, f.category) == ("nccl_tests_timeout", "hang")


def test_a_healthy_fabric_manager_start_is_quiet() -> None:
    journal = ("Mar 11 08:02:14 node-3 nvidia-fabricmanager-start.sh[4711]: Detected Pre-NVL5 system\n"
               "Mar 11 08:02:15 node-3 nv-fabricmanager[4766]: Successfully configured all the available NVSwitches "
               "to route GPU NVLink traffic. NVLink Peer-to-Peer support will be enabled once the GPUs are "
               "successfully registered with the NVLink fabric.\n"
               "Mar 11 08:02:15 node-3 systemd[1]: Started NVIDIA fabric manager service.\n")
    assert _quiet(journal, "journal.txt")


def test_vllm_v0_lines_of_a_stuck_engine_are_a_hang() -> None:
    assert _cat("ERROR 06-11 01:20:15 async_llm_engine.py:525] Engine iteration timed out. This should never "
                "happen!\n", "vllm.log") == "hang"
    assert _cat("TimeoutError: MQLLMEngine didn't reply within 10000ms\n", "vllm.log") == "hang"
    assert _cat("vllm.engine.multiprocessing.MQEngineDeadError: Engine loop is not running. Inspect the stacktrace "
                "to find the original error: TimeoutError('No heartbeat received from MQLLMEngine').\n",
                "vllm.log") == "hang"


def test_vllm_v0_lines_of_a_dead_engine_or_worker_are_other_failures() -> None:
    died = "ERROR 09-03 11:02:41 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 1841 died, exit code: -9\n"
    assert classify_text(died, "vllm.log").kind == "worker_died"
    # the SIGTERM of a shutdown someone asked for is logged the same way
    assert classify_text(died.replace("-9", "-15"), "vllm.log").kind != "worker_died"
    assert classify_text("CRITICAL 08-29 08:03:01 launcher.py:82] AsyncLLMEngine has failed, terminating server "
                         "process\n", "vllm.log").kind == "engine_dead"
    too_long = ("WARNING 10-21 08:02:19 scheduler.py:917] Input prompt (40000 tokens) + lookahead slots (0) is too "
                "long and exceeds the capacity of block_manager\n")
    assert classify_text(too_long, "vllm.log").kind == "prompt_exceeds_kv_capacity"


def test_vllms_ray_shutdown_and_a_process_prefixed_exception() -> None:
    assert _quiet("INFO 03-01 10:00:00 ray_distributed_executor.py:105] Shutting down Ray distributed executor. If "
                  "you see error log from logging.cc regarding SIGTERM received, please ignore because this is the "
                  "expected termination process in Ray.\n", "vllm.log")
    line = ("\x1b[1;36m(EngineCore_DP0 pid=402)\x1b[0;0m ValueError: CUDAGraphMode.FULL is not supported with "
            "FlashInferMetadataBuilder backend\n")
    f = classify_text(line, "vllm.log")
    assert (f.category, f.benign) == ("unknown", False)


def test_a_lost_peer_is_a_dead_peer_and_a_completion_error_stays_a_hang() -> None:
    lost = ("[rank1]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            "NCCLUtils.cpp:77, remote process exited or there was a network error, NCCL version 2.26.2\n"
            "[rank1]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
            "prematurely.\n")
    f = classify_text(lost, "rank1.log")
    assert (f.kind, f.category, f.incident_hint) == ("nccl_peer_lost", "other-failure", None)
    closed = ("gpu-node-03:2201:2290 [5] misc/socket.cc:58 (socketProgress) NCCL WARN socketProgress: Connection "
              "closed by remote peer gpu-node-09.cluster.local<51234>\n")
    assert classify_text(closed, "nccl.log").kind == "nccl_peer_lost"
    qp = ("gpu-node-02:8812:9001 [0] misc/ibvwrap.cc:376 (wrap_ibv_modify_qp) NCCL WARN Call to ibv_modify_qp failed "
          "with 110 Connection timed out, on dev mlx5_0:1, curr state INIT, next state RTR\n")
    assert classify_text(qp, "nccl.log").category == "other-failure"
    # a completion error on a live connection: the job waits on it (the gate's samples of it are hangs)
    ib = ("host:2231:2598 [2] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
          "10.42.3.17<57844> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n")
    assert _cat(ib, "nccl.log") == "hang"
    # the watchdog that reports the lost peer keeps its reading (round 3n)
    watchdog = ("[rank3]:[E301 10:00:00.000000000 ProcessGroupNCCL.cpp:1693] [Rank 3] Process group watchdog thread "
                "terminated with exception: NCCL error: remote process exited or there was a network error\n")
    assert _cat(watchdog, "rank3.log") == "hang"


def test_the_container_runtime_failing_to_use_the_driver_is_a_setup_failure() -> None:
    describe = ("  Warning  Failed     12s   kubelet  Error: failed to start container \"nvidia-driver-ctr\": Error "
                "response from daemon: OCI runtime create failed: container_linux.go:370: starting container process "
                "caused: process_linux.go:459: container init caused: Running hook #0:: error running hook: exit "
                "status 1, stdout: , stderr: nvidia-container-cli.real: initialization error: driver error: failed to "
                "process request: unknown\n")
    f = classify_text(describe, "describe.txt")
    assert (f.kind, f.category, f.incident_hint) == ("container_runtime_gpu_error", "other-failure", None)


def test_a_go_programs_fatal_line_is_an_error_line_and_logfmt_errors_are_not() -> None:
    fata = ("INFO[0000] Starting dcgm-exporter\nINFO[0000] DCGM successfully initialized!\n"
            "FATA[0000] Error adding GPU 1 to group: This GPU is not supported by DCGM\n")
    f = classify_text(fata, "exporter.log")
    assert (f.category, f.benign, f.lines) == ("unknown", False, (3,))
    routine = ('Apr 28 15:08:10 node containerd[3862]: time="2026-04-28T15:08:10.865+08:00" level=error '
               'msg="Failed to pipe stdout of container \\"8c9e\\"" error="reading from a closed fifo"\n')
    assert classify_text(routine, "containerd.log", word_prior=False).benign


# ---- round 3z, third audit: SGLang 0.2.15 to 0.5.10 and vLLM 0.12 to 0.29, each release's own files

def test_sglang_nan_logits_are_a_bad_output_even_beside_a_healthy_batch_line() -> None:
    log = ("[2024-11-28 10:12:04 TP0] Decode batch. #running-req: 8, #token: 5012, token usage: 0.21, "
           "gen throughput (token/s): 412.55, #queue-req: 0\n"
           "[2024-11-28 10:12:05 TP0] Detected errors during sampling! NaN in the logits.\n")
    f = classify_text(log, "sglang.log")
    assert (f.kind, f.category, f.lines) == ("nan_logits", "bad-output", (2,))
    assert _quiet('            logger.warning("Detected errors during sampling! NaN in the logits.")\n', "sampler.py")


def test_sglang_start_up_refusals_are_sizing_and_setup_failures() -> None:
    assert classify_text("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current "
                         "value: mem_fraction_static=0.7\n", "sglang.log").kind == "kv_cache_too_small"
    f = classify_text("ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other "
                      "processes.\n", "sglang.log")
    assert (f.kind, f.category) == ("gpu_memory_unbalanced", "other-failure")


def test_the_custom_allreduce_fallback_notice_is_quiet() -> None:
    assert _quiet("WARNING 06-02 10:00:00 custom_all_reduce.py:183] Custom allreduce is disabled because it's not "
                  "supported on more than two PCIe-only GPUs. To silence this warning, specify "
                  "disable_custom_all_reduce=True explicitly.\n", "vllm.log")


def test_vllm_v1_era_ranks_that_never_arrive_are_a_hang() -> None:
    assert _cat("RuntimeError: Barrier timed out after 300.00 seconds\n", "vllm.log") == "hang"
    assert _cat("(EngineCore pid=212) ERROR 03-02 11:20:45 [gpu_model_runner.py:394] Fault detected in EP all2all "
                "communication: one or more ranks timed out during dispatch/combine. Mask: [1, 1, 0, 1]\n",
                "vllm.log") == "hang"


def test_vllm_v1_era_start_up_failures_and_ray_worker_death() -> None:
    assert classify_text("TimeoutError: Timed out waiting for engine core processes to start. This is often caused "
                         "by slow weight loading for large models. Waited 600s (configured by "
                         "VLLM_ENGINE_READY_TIMEOUT_S).\n", "vllm.log").kind == "engine_start_timeout"
    f = classify_text("(EngineCore pid=212) ERROR 03-02 11:20:45 [ray_executor_v2.py:465] RayWorkerProc rank=3 died "
                      "unexpectedly, shutting down executor.\n", "vllm.log")
    assert (f.kind, f.category) == ("engine_dead", "other-failure")
    log = ("(APIServer pid=1) ERROR 03-02 11:20:45 [utils.py:1315] ValueError: max_model_len (131072) exceeds the "
           "model's maximum\n(APIServer pid=1) RuntimeError: Frontend process failed during engine core "
           "initialization. See root cause above. Failed frontend proc(s): ['ApiServer_1']\n")
    assert classify_text(log, "vllm.log").category == "other-failure"


def test_vllm_v1_era_start_up_notices_are_quiet() -> None:
    assert _quiet("(Worker_TP0 pid=318) WARNING 12-01 10:00:03 [symm_mem.py:99] SymmMemCommunicator: symmetric "
                  "memory initialization failed: CUDA error: operation not supported Communicator is not available. "
                  "To suppress this warning set VLLM_ALLREDUCE_USE_SYMM_MEM=0\n", "vllm.log")
    assert _quiet("(EngineCore pid=212) INFO 03-02 11:20:45 [monitor.py:34] torch.compile took 41.23 s in total\n",
                  "vllm.log")
