"""Focused tests for the general rules round 3s added (docs/evidence.md, "Round 3s"): signatures written from the
producers' own format strings, not from a sample's wording, and a wider reading of a reference page.

Producers (each signature names the file and commit it was read from):
- ollama runner/llamarunner/cache.go: slog.Debug("context limit hit - shifting", "id", ..., "limit", ..., "input", ...)
- llama.cpp tools/server/server.cpp: SLT_WRN(slot, "slot context shift, n_keep = %d, n_left = %d, n_discard = %d\\n"),
  older examples/server/server.cpp: LOG_TEE("slot %d: context shift - n_keep = %d, n_left = %d, n_discard = %d\\n")
- ollama llama/llama.go: ErrKvCacheFull = errors.New("could not find a kv cache slot")
- TensorRT-LLM cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: "Can't allocate new blocks. No free blocks left."
- vLLM vllm/v1/core/kv_cache_utils.py: "Maximum concurrency for %s tokens per request: %.2fx"
- grpc-go internal/transport/http2_client.go: "error reading from server: %v" (status Unavailable)
- cutorch lib/THC/THCGeneral.c: "cuda runtime error (%d) : %s"; PyTorch "CUDA error: %s"; cudaErrorUnknown
- Linux arch/x86/mm/fault.c: "%s%s[%d]: segfault at %lx ip %px sp %px error %lx" + " in %s[%lx+%lx]"

Lines are rendered from those format strings with made-up values; texts are written for the tests, not copied from
the samples. Each rule has a look-alike. The signatures' own must-match / must-not-match examples run in
test_signatures.py.
"""

from __future__ import annotations

import pytest
from tests.evidence.rounds import category as _cat
from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence import described, outputs
from llm_oncall.evidence.classify import classify_text

# ---- KV pressure: context shifts in a loop ----------------------------------------------------------------------

def _ollama_shifts(n: int) -> str:
    return "".join(
        f'time=2025-03-01T10:00:{10 + i:02d}.000Z level=DEBUG source=cache.go:221 msg="context limit hit - shifting" '
        "id=0 limit=4096 input=4096 keep=4 discard=2046\n" for i in range(n))


def _llamacpp_shifts(n: int) -> str:
    return "".join("slot update_slots: id  0 | task 7 | slot context shift, n_keep = 1, n_left = 8190, "
                   "n_discard = 4095\n" for _ in range(n))


def test_ollama_context_shift_loop_is_kv_pressure() -> None:
    assert _cat("The runner never finishes the answer:\n\n" + _ollama_shifts(6), "ollama.log") == "kv-pressure"


def test_llamacpp_context_shift_loop_is_kv_pressure() -> None:
    assert _cat(_llamacpp_shifts(5), "server.log") == "kv-pressure"


def test_old_llamacpp_context_shift_format_loop_is_kv_pressure() -> None:
    text = "".join("slot 0: context shift - n_keep = 64, n_left = 1982, n_discard = 991\n" for _ in range(5))
    assert _cat(text, "server.log") == "kv-pressure"


@pytest.mark.parametrize("n", [1, 3])
def test_a_few_context_shifts_are_not_kv_pressure(n: int) -> None:
    # the mechanism working: a test of context shift with a tiny context shows a few of them
    assert classify_text(_ollama_shifts(n), "ollama.log").category != "kv-pressure"
    assert classify_text(_llamacpp_shifts(n), "server.log").category != "kv-pressure"


def test_context_shift_format_string_in_source_is_not_kv_pressure() -> None:
    text = "```cpp\n" + "".join(
        '    SLT_WRN(slot, "slot context shift, n_keep = %d, n_left = %d, n_discard = %d\\n", n_keep, n_left, '
        "n_discard);\n" for _ in range(5)) + "```\n"
    assert classify_text(text, "review.md").category != "kv-pressure"


# ---- KV pressure: block managers and cache slots ----------------------------------------------------------------

def test_trtllm_no_free_blocks_is_kv_pressure_not_an_engine_error() -> None:
    text = ("[TensorRT-LLM][ERROR] Encountered an error in forwardAsync function: [TensorRT-LLM][ERROR] Assertion "
            "failed: Can't allocate new blocks. No free blocks left. (/src/cpp/tensorrt_llm/batch_manager/"
            "kvCacheManager.cpp:598)\n"
            "[TensorRT-LLM][ERROR] Encountered error for requestId 12: Encountered an error in forwardAsync function\n")
    assert _cat(text, "triton.log") == "kv-pressure"


def test_trtllm_docs_sentence_about_no_free_blocks_is_quiet() -> None:
    # docs/source/reference/memory.md
    text = ("If paged KV cache is used without in-flight batching, TensorRT-LLM may report OOM errors with message "
            "\"Can't allocate new blocks. No free blocks left\", if the paged KV cache is not large enough for the "
            "whole batch.\n")
    assert _quiet(text, "memory.md")


def test_ollama_kv_cache_slot_error_is_kv_pressure() -> None:
    text = ('time=2025-02-11T08:00:00.000Z level=ERROR source=runner.go:400 msg="failed to decode batch" '
            'error="could not find a kv cache slot"\n')
    assert _cat(text, "ollama.log") == "kv-pressure"


def test_ollama_kv_cache_slot_declaration_is_quiet() -> None:
    assert _quiet('```go\nvar ErrKvCacheFull = errors.New("could not find a kv cache slot")\n```\n', "review.md")


def test_vllm_concurrency_below_one_is_kv_pressure() -> None:
    text = ("INFO 05-01 10:00:00 [kv_cache_utils.py:576] GPU KV cache size: 27,504 tokens\n"
            "INFO 05-01 10:00:00 [kv_cache_utils.py:581] Maximum concurrency for 131,072 tokens per request: 0.21x\n"
            "INFO 05-01 10:01:10 [gpu_model_runner.py:1700] Graph capturing finished in 70 secs, took 0.52 GiB\n")
    assert _cat(text, "vllm.log") == "kv-pressure"


def test_vllm_concurrency_above_one_is_quiet() -> None:
    text = ("INFO 05-01 10:00:00 [kv_cache_utils.py:581] Maximum concurrency for 32,768 tokens per request: 4.27x\n"
            "INFO 05-01 10:01:10 [gpu_model_runner.py:1700] Graph capturing finished in 70 secs, took 0.52 GiB\n")
    assert _quiet(text, "vllm.log")


# ---- other failures and GPU hardware ------------------------------------------------------------------------------

def test_grpc_backend_eof_is_other_failure() -> None:
    text = ("curl http://localhost:8080/v1/chat/completions returns\n"
            '{"error":{"code":500,"message":"rpc error: code = Unavailable desc = error reading from server: EOF",'
            '"type":""}}\n')
    assert _cat(text) == "other-failure"


def test_grpc_connection_refused_is_not_a_backend_crash() -> None:
    text = ('rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp '
            '127.0.0.1:35555: connect: connection refused"\n')
    assert classify_text(text, "localai.log").kind != "backend_process_died"


@pytest.mark.parametrize("line", [
    "luajit: cuda runtime error (30) : unknown error at /tmp/luarocks/cutorch/lib/THC/THCGeneral.c:66",
    "RuntimeError: CUDA error: unknown error",
])
def test_cuda_unknown_error_is_gpu_hardware(line: str) -> None:
    assert _cat("It ran for six hours, then:\n\n" + line + "\n") == "gpu-hardware"


def test_cuda_unknown_error_in_source_is_quiet() -> None:
    text = '```c\n    _THError(file, line, "cuda runtime error (%d) : %s", err,\n```\n'
    assert _quiet(text, "review.md")


def test_kernel_segfault_in_libcuda_is_other_failure() -> None:
    text = ("Mar  7 09:00:00 host kernel: [57889.986583] python3[96830]: segfault at 215003fcc ip 00007f78774f9c97 "
            "sp 00007f69217f67f0 error 4 in libcuda.so.570.86.15[7f78771cf000+1e5c000]\n")
    assert _cat(text, "kern.log") == "other-failure"


def test_kernel_segfault_in_libc_is_not_a_driver_crash() -> None:
    text = ("Mar  7 09:00:00 host kernel: [57889.986583] bash[9683]: segfault at 0 ip 00007f78774f9c97 "
            "sp 00007f69217f67f0 error 4 in libc.so.6[7f78771cf000+195000]\n")
    assert classify_text(text, "kern.log").kind != "driver_library_segfault"


# ---- reference pages: glossary sections, Chinese guides ------------------------------------------------------------

_GLOSSARY = """ECC Errors
Memory bit flips detected by the GPU's error-correcting code.
What it is
Single-bit errors are corrected silently; a double-bit (uncorrectable) ECC error cannot be corrected and the driver
reports an Uncorrectable ECC Error to the application.
Why it matters
Rising counts of corrected errors come before uncorrectable ones.
How to monitor
Read the volatile and aggregate counters with nvidia-smi -q -d ECC or DCGM.
"""


def test_glossary_entry_quoting_an_ecc_error_is_quiet() -> None:
    assert described.is_guide(_GLOSSARY)
    assert _quiet(_GLOSSARY, "page.txt")


_ZH_GUIDE = """GPU显存ECC错误排查指南

一、ECC功能的原理

显存控制器为每次写入生成校验位。

二、常见错误类型与诊断方法

错误类型 触发场景 表现形式
单比特可纠正错误 长期运行 系统日志记录"ECC Correctable Error"
双比特不可纠正错误 显存颗粒损坏 驱动报错"Uncorrectable ECC Error"

三、解决方法

更换显卡或联系厂商。
"""


def test_chinese_guide_with_an_error_table_is_quiet() -> None:
    assert described.is_guide(_ZH_GUIDE)
    assert _quiet(_ZH_GUIDE, "page.txt")


def test_chinese_bug_report_with_guide_like_headings_still_alarms() -> None:
    # a report: a first person who ran into the error, with sections that look like a guide's
    text = ("一、问题描述\n\n我们在部署 Qwen 模型时遇到以下报错:\n\n"
            "RuntimeError: CUDA error: uncorrectable ECC error encountered\n\n"
            "二、原因分析\n\n不清楚。\n")
    assert not described.is_guide(text)
    assert _cat(text) in {"gpu-memory", "gpu-hardware"}


def test_english_report_with_a_single_section_heading_still_alarms() -> None:
    text = ("## What it is\n\nI get this on every start:\n\n"
            "RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    assert not described.is_guide(text)
    assert not _quiet(text)


# ---- ROCm builds: the same failures in HIP's words -------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 191.98 GiB "
    "of which 1.20 GiB is free.",
    "RuntimeError: HIP error: out of memory",
])
def test_hip_oom_is_read_as_the_cuda_oom(line: str) -> None:
    assert classify_text(line + "\n", "server.log").kind == "cuda_oom"


def test_hip_stream_capture_error_is_cuda_graph() -> None:
    assert _cat("hipStreamEndCapture failed: hipErrorStreamCaptureInvalidated\n", "server.log") == "cuda-graph"


# ---- Japanese prose is one script family, not a script soup ----------------------------------------------------------

def test_japanese_prose_with_prolonged_sound_and_iteration_marks_is_not_garbage() -> None:
    # katakana words carry ー (KATAKANA-HIRAGANA PROLONGED SOUND MARK), kanji words 々 (IDEOGRAPHIC ITERATION MARK)
    text = ("NVIDIAのドライバはエラーの発生を監視しており、メモリーのページを切り離す。\n"
            "DBEのエラーはケージ2の温度が高いことが原因と考えられる。\n"
            "全体としてGPUの信頼度は高く、時々起きるのはPCIeのバスエラーである。\n"
            "サーバーのSBEは様々な位置で記録されている。\n")
    assert not outputs.is_garbage("", text)
    assert _quiet(text, "page.txt")


def test_a_script_soup_is_still_garbage() -> None:
    assert outputs.is_garbage("", "Привет世界helloมนุษย์ текст中文mixed ภาษาword кот猫cat ーー々 データword")
