"""Focused tests for the general rules round 3l added (docs/evidence.md), from the wordings round 3j's check set
showed: KV pressure in other engines' words (TGI's "Out of available cache blocks", llama.cpp's "Context size has
been exceeded.", a request larger than the whole KV cache with requests waiting); hangs seen from the client
(requests never answered, a green /health while the engine stays stuck) and syslog-escaped ANSI codes; NVLink
fabric errors (an NVSwitch SXid line explains a contained Xid 94, the fabric manager killed or failed, IMEX and
fabric-memory failures); GPU hardware in other words (AMD RAS, a first-hand Xid event in prose); CUDA graphs
(XLA's "Failed to instantiate CUDA graph", a crash tied to CUDA graphs); other failures (ollama's runner, a driver
too old, an engine or replica that failed to start, Ray's actor creation, an OOM killer in prose); bad outputs (a
syllable loop under a lone "outputs" cue, Chinese 乱码 in samples); and look-alikes: reference pages that quote
example lines, a review's "looks correct to me", "if it gets stuck", a host DIMM's ECC errors. Each rule has a
look-alike. The signatures' own must-match / must-not-match examples run in test_signatures.py.
"""

from __future__ import annotations

import pytest
from tests.evidence.rounds import catalogue_category

from llm_oncall.evidence import paste
from llm_oncall.evidence.classify import classify_text
from llm_oncall.evidence.outputs import garbage


def _cat(text: str) -> str:
    return classify_text(text, "issue.md").category


def _quiet(text: str) -> bool:
    """No alarm: a benign reading, or nothing recognised at all (scored as benign by the corpus)."""
    f = classify_text(text, "issue.md")
    return f.category == "benign" or (f.category == "unknown" and f.confidence == 0.0)


# ---- KV pressure in other engines' words ------------------------------------------------------------------------

TGI_KV = (
    "2024-03-01T10:00:00.100000Z ERROR batch{batch_size=16}:decode:decode{size=16}: text_generation_client: "
    "router/client/src/lib.rs:33: Server error: Out of available cache blocks: asked 40, only 12 free blocks\n"
    "2024-03-01T10:00:00.200000Z ERROR infer:send_error: text_generation_router::infer: router/src/infer.rs:588: "
    "Request failed during generation: Server error: Out of available cache blocks: asked 40, only 12 free blocks\n"
)


def test_tgi_out_of_cache_blocks_is_kv_pressure_not_a_startup_error() -> None:
    f = classify_text(TGI_KV, "tgi.log")
    assert f.category == "kv-pressure" and f.kind == "kv_cache_blocks_exhausted"


def test_tgi_shard_failure_alone_stays_other_failure() -> None:
    text = ("2024-03-01T10:00:00Z ERROR text_generation_router::infer: Request failed during generation: Server error: "
            "error trying to connect: Connection refused (os error 111)\n")
    assert _cat(text) == "other-failure"


def test_llamacpp_context_size_exceeded_is_kv_pressure() -> None:
    text = "srv  send_error: task id = 12, error: Context size has been exceeded.\n"
    assert _cat(text) == "kv-pressure"


def test_a_fix_naming_context_exceeded_is_not() -> None:
    text = "This PR fixes the Context size has been exceeded. error for embedding requests.\n"
    assert _cat(text) != "kv-pressure"


def test_a_request_larger_than_the_kv_cache_with_requests_waiting_is_kv_pressure() -> None:
    text = ("We send one request with more tokens than the KV cache size (but below max_model_len).\n"
            "The logs then show Waiting: 1 reqs, Running: 0 reqs and every later request is blocked.\n")
    assert _cat(text) == "kv-pressure"


def test_a_request_larger_than_the_kv_cache_as_a_hypothesis_is_not() -> None:
    text = ("A request longer than the KV cache would block the queue, so we reject it up front.\n"
            "Waiting: 3\n")
    assert _cat(text) != "kv-pressure"


# ---- hangs seen from the client ---------------------------------------------------------------------------------

def test_requests_never_answered_is_a_hang() -> None:
    text = "Under load the unfinished requests stayed open and never received an HTTP response.\n"
    assert _cat(text) == "hang"


def test_requests_never_answered_in_a_fix_is_not() -> None:
    text = "This PR fixes requests that never received a response after the client aborted.\n"
    assert _cat(text) != "hang"


def test_green_health_with_a_stuck_state_is_a_hang() -> None:
    text = ("/health returned 200 throughout; the state never recovered on its own and a restart cleared it.\n")
    assert _cat(text) == "hang"


def test_green_health_alone_is_not_a_hang() -> None:
    assert _cat("/health returned 200 and all 4096 requests completed in 118 seconds.\n") != "hang"


def test_syslog_escaped_ansi_codes_are_removed() -> None:
    line = "#033[2m2025-03-12T09:36:06.501161Z#033[0m #033[31mERROR#033[0m #033[1mrouter#033[0m: boom"
    assert paste.read(line).lines[0] == "2025-03-12T09:36:06.501161Z ERROR router: boom"


# ---- NVLink fabric ----------------------------------------------------------------------------------------------

def test_nvswitch_sxid_with_contained_xid94_is_nvlink() -> None:
    text = ("[Mon Feb 2 22:52:45 2026] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 12028, Non-fatal, Link 62 egress "
            "non-posted PRIV error (First)\n"
            "[Mon Feb 2 22:52:45 2026] NVRM: Xid (PCI:0000:4c:00): 94, Contained: SM (0x1). RST: No, D-RST: No\n"
            "[Mon Feb 2 22:52:45 2026] NVRM: Xid (PCI:0000:4c:00): 94, pid=538574, name=python, channel 0x0000000a\n")
    assert _cat(text) == "nvlink"


def test_contained_xid94_alone_stays_gpu_memory() -> None:
    text = "[Mon Feb 2 22:52:45 2026] NVRM: Xid (PCI:0000:4c:00): 94, Contained: SM (0x1). RST: No, D-RST: No\n"
    assert _cat(text) == "gpu-memory"


def test_fabric_manager_killed_in_prose_is_nvlink() -> None:
    assert _cat("On node 1 the fabric manager was killed and failed to start after the driver update.\n") == "nvlink"


def test_fabric_manager_rule_in_a_guide_is_not() -> None:
    assert _quiet("If the fabric manager fails to start, jobs cannot use NVLink on that node.\n")


def test_systemd_failed_fabric_manager_unit_is_nvlink() -> None:
    text = ("# systemctl status nvidia-fabricmanager.service\n"
            "× nvidia-fabricmanager.service - NVIDIA fabric manager service\n")
    assert _cat(text) == "nvlink"


def test_imex_memory_reference_failure_is_nvlink() -> None:
    text = "[ERROR] Failed to get new memory reference with rc: 87\n[ERROR] Failed to allocate memory reference.\n"
    assert _cat(text) == "nvlink"


def test_cumemsetaccess_fabric_failure_is_nvlink() -> None:
    assert _cat("cuMemSetAccess() intermittently fails with: CUDA_ERROR_NOT_SUPPORTED on fabric handles\n") == "nvlink"


# ---- GPU hardware -----------------------------------------------------------------------------------------------

def test_amdgpu_uncorrectable_hardware_error_is_gpu_hardware() -> None:
    text = "[13850.912648] amdgpu 0000:1c:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!\n"
    assert _cat(text) == "gpu-hardware"


def test_amdgpu_zero_errors_is_not() -> None:
    assert _quiet("amdgpu 0000:0a:00.0: amdgpu: 0 uncorrectable hardware errors detected in gfx block\n")


def test_a_first_hand_xid_62_is_gpu_hardware() -> None:
    text = "I have experienced two GPU crashes with the exact same NVIDIA Xid 62 signature, both in llama-server.\n"
    assert _cat(text) == "gpu-hardware"


def test_an_xid_named_in_a_rule_is_not() -> None:
    assert _quiet("If you see Xid 62 in dmesg, reset the GPU.\n")


def test_a_host_dimm_ecc_error_is_not_gpu_memory() -> None:
    text = "Uncorrectable ECC / other uncorrectable memory error @P2-DIMMH2(CPU2) - Assertion\n"
    f = classify_text(text, "sel.txt")
    assert f.category == "other-failure" and f.kind == "host_memory_ecc"


def test_a_sensor_deassert_is_no_failure() -> None:
    assert _cat("Memory  | Uncorrectable ECC - Deassert | Green\n") not in ("gpu-memory", "other-failure")


# ---- CUDA graphs ------------------------------------------------------------------------------------------------

def test_xla_failed_to_instantiate_cuda_graph_is_cuda_graph() -> None:
    text = "CUDA error: Failed to instantiate CUDA graph: CUDA_ERROR_NOT_PERMITTED: operation not permitted\n"
    assert _cat(text) == "cuda-graph"


def test_a_graph_fallback_warning_is_not() -> None:
    assert _cat("WARNING: Failed to instantiate CUDA graph, falling back to stream execution\n") != "cuda-graph"


def test_a_crash_with_cuda_graphs_enabled_is_cuda_graph() -> None:
    assert _cat("On A100, llama.cpp crashes when CUDA graphs are enabled; here are the repro steps.\n") == "cuda-graph"


def test_a_fix_for_a_crash_with_cuda_graphs_is_not() -> None:
    assert _cat("This PR fixes a crash when CUDA graphs are enabled with LoRA adapters.\n") != "cuda-graph"


# ---- other failures ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Error: llama runner process has terminated: exit status 0xc0000409 CUDA error\n",
    "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n",
    "vLLM failed to start.  Retry with --enable-serving-output to learn more about the failure.\n",
    "          A replica failed to start with exception. Retrying 19 more time(s). Error:\n",
    "(pid=gcs_server) [2021-11-08 14:04:01,117 E 145 145] gcs_actor_scheduler.cc:498: Cannot create an actor "
    "Worker.__init__ of an id 7ede because the runtime env setup failed.\n",
    "looks like OOMK is killing the model pod, did you try to increase the memory of your Minikube instance?\n",
])
def test_other_failures_in_other_producers_words(text: str) -> None:
    assert _cat(text) == "other-failure"


@pytest.mark.parametrize("text", [
    "If your NVIDIA driver is too old, upgrade it first.\n",
    "This PR fixes the case where vLLM failed to start without a message.\n",
])
def test_other_failure_look_alikes(text: str) -> None:
    assert _quiet(text)


# ---- bad outputs ------------------------------------------------------------------------------------------------

def test_a_syllable_loop_is_garbage() -> None:
    assert garbage("metryryryryryryryryryryryryryryryryryryry").garbage
    assert not garbage("hahaha that is funny").garbage


def test_a_lone_cue_word_above_a_fence_quotes_the_output() -> None:
    text = "I call the client with a short prompt.\n\noutputs\n```\nmetryryryryryryryryryryryryryryryryryryry\n```\n"
    assert _cat(text) == "bad-output"


def test_chinese_garbled_samples_are_bad_output() -> None:
    assert _cat("批量测试后部分样本偶现乱码，乱码字样为‘be separable by常规?’\n") == "bad-output"


def test_chinese_garbled_console_is_not() -> None:
    assert catalogue_category("日志输出中文乱码，Windows 控制台编码问题\n") != "bad-output"


# ---- look-alikes ------------------------------------------------------------------------------------------------

def test_a_reference_page_quoting_an_xid_line_is_benign() -> None:
    text = ("Xid 48: Double Bit ECC Error (DBE)\n"
            "What it means\n"
            "Xid 48 is a double-bit ECC error that ECC can detect but cannot correct.\n"
            "Typical kernel-log signature\n"
            "NVRM: Xid (PCI:0000:65:00): 48, pid='N/A', Double Bit ECC\n"
            "What to do\n"
            "Drain the node and reset the GPU.\n")
    assert _quiet(text)


def test_an_xid_line_in_a_report_stays_an_event() -> None:
    text = ("What it means is unclear to me, we got this on node 7 tonight:\n"
            "NVRM: Xid (PCI:0000:65:00): 48, pid='N/A', Double Bit ECC\n")
    assert _cat(text) == "gpu-memory"


def test_a_review_approval_makes_a_change_document() -> None:
    text = ('Capture failed for every batch size with "operation not permitted when stream is capturing" at the '
            "first conv1d. Pin the device and share one persistent side stream between warmup and capture.\n\n"
            "looks correct to me\n")
    assert _quiet(text)


def test_if_it_gets_stuck_is_a_hypothesis() -> None:
    assert _quiet("vLLM has no watchdog. If it gets stuck, it stays stuck until one of us restarts the container.\n")


def test_llamacpp_kshift_abort_is_other_failure() -> None:
    assert _cat("/llama.cpp/src/llama.cpp:18430: Deepseek2 does not support K-shift\n") == "other-failure"


def test_kshift_abort_in_source_is_not() -> None:
    assert _quiet('            GGML_ABORT("The current KV cache / model configuration does not support K-shift");\n')


def test_observe_garbled_output_as_a_repro_step_is_bad_output() -> None:
    assert _cat("### Steps to Reproduce\n1. Load any GGUF model\n2. Observe garbled/corrupted output\n") == "bad-output"
