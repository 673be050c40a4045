"""Focused tests for the fixes the 2026-12 held-out samples drove (docs/evidence.md, "Held-out set of 2026-12").

Each format is taken from its producer (DCGM dcgmi/Nvlink.cpp, NCCL misc/socket.cc / checks.h / ibvwrap.cc,
vLLM shm_broadcast.py, kubectl, docker compose, py-spy); the real files are in tests/evidence/real.
"""

from __future__ import annotations

from pathlib import Path

from llm_oncall.evidence import crashloop, dcgm_health, outputs, pyspy
from llm_oncall.evidence.classify import classify_file, classify_text

REAL = Path(__file__).parent / "real"

NVLINK_HEADER = "+----------------------+\n|  NvLink Link Status  |\n+----------------------+\nGPUs:\n"
NVLINK_KEY = "NvSwitches:\n    No NvSwitches found.\n\nKey: Up=U, Down=D, Disabled=X, Not Supported=_\n"


def _nvlink(rows: list[str]) -> str:
    body = "".join(f"    gpuId {i}:\n        {r}\n" for i, r in enumerate(rows))
    return "dcgmi nvlink -s\n" + NVLINK_HEADER + body + NVLINK_KEY


# --- 1. dcgmi nvlink --link-status; repetition judges model outputs only ---------------------------------

def test_dcgmi_nvlink_all_up_is_benign() -> None:
    f = classify_text(_nvlink(["U " * 17 + "U"] * 8), "nvlink")
    assert (f.kind, f.benign, f.category) == ("nvlink_links_up", True, "benign")


def test_dcgmi_nvlink_links_down_is_nvlink() -> None:
    f = classify_text(_nvlink(["D D D D D D", "U U U U U U"]), "nvlink")
    assert (f.kind, f.benign, f.category, f.incident_hint) == ("nvlink_link_down", False, "nvlink", "engine-hang")
    assert f.facts["links_down"] == {"gpu 0": 6} and f.facts["all_down"] == ["gpu 0"]
    some = dcgm_health.parse_nvlink_status(_nvlink(["U U D U", "U U U U"]), "n")
    assert some is not None and not some.benign and some.confidence < f.confidence


def test_dcgmi_nvlink_disabled_or_unsupported_is_no_fault() -> None:
    f = dcgm_health.parse_nvlink_status(_nvlink(["U U X X _ _", "_ _ _ _ _ _"]), "n")
    assert f is not None and f.benign


def test_dcgmi_nvlink_real_all_down() -> None:
    f = classify_file(REAL / "gpu" / "dcgmi_nvlink_link_status_all_down_dcgm_198.txt")
    assert f.category == "nvlink" and f.kind == "nvlink_link_down"


def test_repeated_driver_lines_are_a_log_not_a_model_output() -> None:
    line = ("      nvidia-modeset: ERROR: GPU:0: Failed to query display engine channel state: "
            "0x0000ca7e:{}:0:0x00000062\n")
    text = "".join(line.format(i) for i in range(0, 12, 2))
    assert outputs.samples_of(text) == ([], "")
    assert classify_text(text, "modeset").category != "bad-output"


def test_a_repetitive_completion_is_still_bad_output() -> None:
    f = classify_text("The answer is alembic alembic alembic " + "alembic " * 200, "completion")
    assert f.category == "bad-output"


# --- 2. NCCL WARNs: harmless look-alikes benign, real failures not --------------------------------------

def test_libibverbs_missing_is_a_benign_fallback() -> None:
    text = ("host:14605:14673 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), "
            "using internal implementation\n"
            "host:14605:14673 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
            "host:14605:14673 [0] NCCL INFO NET/Socket : Using [0]ens5:172.31.0.137<0>\n"
            "host:14605:14673 [0] NCCL INFO Using network Socket\n")
    f = classify_text(text, "nccl")
    assert f.benign and f.category == "benign"
    assert "nccl_ib_unavailable" in {g.kind for g in f.findings}


def test_warn_then_connected_after_retries_is_benign() -> None:
    # the real benign look-alike (google/nccl-fastsocket#4) stays benign
    f = classify_file(REAL / "engine" / "nccl_warn_fastsocket_cannot_get_cpu_4.txt")
    assert f.benign
    text = "h:1:2 [0] net_fastsocket.cc:765 NCCL WARN Cannot get incoming CPU.\n"
    assert not classify_text(text, "warn-alone").benign
    assert classify_text(text + "h:1:2 [0] NCCL INFO NET/FastSocket : Connected after 1000 retries.\n", "w").benign


def test_real_nccl_warn_failures_stay_non_benign() -> None:
    f = classify_file(REAL / "engine" / "nccl_warn_socket_finalize_accept_nccl_tests_188.txt")
    assert (f.kind, f.category) == ("nccl_connect_error", "other-failure")
    refused = ("h:1:2 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : "
               "Connection refused\nh:1:2 [0] NCCL INFO misc/socket.cc:564 -> 2\n")
    g = classify_text(refused, "refused")
    assert not g.benign and g.category == "other-failure"
    trail = "h:1:2 [0] NCCL INFO include/net.h:25 -> 2\nh:1:2 [0] NCCL INFO transport/net.cc:515 -> 2\n"
    assert classify_text(trail, "trail").kind == "nccl_setup_error"
    unhandled = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.18.1\n"
    assert not classify_text(unhandled, "u").benign
    # a remote-error trail (-> 6) with an IB completion error stays a hang
    ib = ("h:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.3<5> with status=12 "
          "opcode=0 len=0 vendor err 129 (Recv)\nh:1:2 [0] NCCL INFO transport/net.cc:1117 -> 6\n")
    assert classify_text(ib, "ib").category == "hang"


# --- 3. crash loop: cuda-graph only with capture evidence ----------------------------------------------

GET_PODS = ("NAME                                            READY   STATUS             RESTARTS        AGE\n"
            "deepseek-r1-distill-llama-8b-5cc594fd46-hg5rw   0/1     CrashLoopBackOff   5 (2m30s ago)   13m\n")


def test_crashloop_without_capture_evidence_is_other_failure() -> None:
    f = crashloop.parse(GET_PODS, "k")
    assert f is not None and (f.kind, f.category, f.incident_hint) == ("crashloop", "other-failure", None)
    real = classify_file(REAL / "engine" / "kubectl_crashloop_startup_probe_vllm_aibrix_1054.txt")
    assert real.category == "other-failure" and real.incident_hint is None


def test_crashloop_with_capture_evidence_keeps_the_tentative_hint() -> None:
    text = GET_PODS + "Capturing CUDA graph shapes:  23%|##        | 8/35 [00:04<00:14,  1.86it/s]\n"
    f = crashloop.parse(text, "k")
    assert f is not None and f.incident_hint == "cuda-graph-crash" and f.confidence <= 0.3


# --- 4. exit 137 / Killed; Running pods with a recent restart --------------------------------------------

def test_compose_exit_137_is_a_kill() -> None:
    f = classify_file(REAL / "engine" / "docker_exit137_killed_scalellm_38.txt")
    assert (f.kind, f.category, f.benign) == ("process_killed", "other-failure", False)
    assert classify_text("vllm exited with code 0\n", "ok").benign


def test_running_pod_with_a_recent_restart_is_not_benign() -> None:
    text = ("NAME                        READY   STATUS    RESTARTS        AGE\n"
            "vllm-sim-5dcf64b47c-xk2kg   2/2     Running   3 (6m29s ago)   6m43s\n")
    f = crashloop.parse(text, "k")
    assert f is not None and (f.kind, f.category, f.benign) == ("container_restarts", "other-failure", False)
    assert f.confidence <= 0.3 and f.facts["restarted_recently"] == {"vllm-sim-5dcf64b47c-xk2kg": 3}
    old = text.replace("3 (6m29s ago)", "3 (5d ago)    ").replace("6m43s", "12d")
    assert crashloop.parse(old, "k") is None
    assert crashloop.parse(text.replace("3 (6m29s ago)", "0            "), "k") is None


# --- 5. the old shared-memory broadcast wording ----------------------------------------------------------

def test_old_shm_wording_is_a_hang() -> None:
    line = ("(VllmWorkerProcess pid=10344{}) WARNING 07-28 21:01:32 shm_broadcast.py:394] "
            "No available block found in 60 second. \n")
    f = classify_text("".join(line.format(i) for i in range(3)), "shm")
    assert (f.kind, f.category) == ("shm_broadcast_wait", "hang")


# --- 6. py-spy frames pasted without a Thread header -----------------------------------------------------

def test_headerless_pyspy_stacks_in_a_collective() -> None:
    f = classify_file(REAL / "engine" / "sglang_pyspy_hicache_allreduce_vs_broadcast_22607.txt")
    assert (f.kind, f.category) == ("pyspy_stuck_in_collective", "hang")
    assert set(f.facts["collectives"]) == {"all_reduce", "broadcast"}


def test_headerless_idle_stack_and_lone_frame() -> None:
    idle = ("```\nselect (selectors.py:469)\n  _run_once (asyncio/base_events.py:1871)\n"
            "  run_forever (asyncio/base_events.py:608)\n```\n")
    f = pyspy.parse(idle, "p")
    assert f is not None and f.benign
    assert pyspy.parse("see my_function (module.py:12) for details\n", "p") is None


# --- a benign look-alike the held-out set showed: DCGM's SysMon module on an unsupported CPU ---------------

def test_dcgm_sysmon_module_errors_are_benign() -> None:
    f = classify_file(REAL / "gpu" / "dcgm_hostengine_sysmon_module_errors_dcgm_149.txt")
    assert f.benign and f.kind == "dcgm_sysmon_unavailable"
    other = "2024-02-01 14:12:01.207 ERROR [9596:9598] Failed to load module 7 [DcgmHostEngineHandler.cpp:1831]\n"
    assert not classify_text(other, "m").benign


# --- the second held-out set: the watchdog's stack without its message; torchrun's agent line ----------------

def test_watchdog_timeout_stack_without_its_message_is_a_hang() -> None:
    f = classify_file(REAL / "engine" / "watchdog_checktimeout_frames_particleflow_390.txt")
    assert (f.kind, f.category, f.incident_hint) == ("nccl_collective_timeout", "hang", "engine-hang")
    # the watchdog raising a CUDA error it found is not a timeout: no checkTimeout frame, no hang
    cuda_error = ("Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43\n"
                  "frame #2: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x52 (0x7f in "
                  "libtorch_cuda.so)\nframe #3: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f in "
                  "libtorch_cuda.so)\n")
    assert classify_text(cuda_error, "w").kind != "nccl_collective_timeout"


def test_torchrun_worker_failed_names_no_cause_and_steps_back_for_one() -> None:
    agent = ("E0323 21:57:08.583000 23 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
             "local_rank: 0 (pid: 88) of binary: /opt/venv/bin/python3\n")
    f = classify_text(agent, "t")
    assert (f.kind, f.category, f.benign, f.incident_hint) == ("worker_process_failed", "other-failure", False, None)
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
           "79.15 GiB of which 1.06 GiB is free.\n")
    assert classify_text(oom + agent, "t").kind != "worker_process_failed"
