"""vLLM and kernel log lines in the formats the real processes write."""

from __future__ import annotations

from datetime import UTC, datetime


def stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%m-%d %H:%M:%S")


def _line(level: str, epoch: float, src: str, msg: str) -> str:
    return f"{level} {stamp(epoch)} [{src}] {msg}"


def stats_line(epoch: float, prompt_tps: float, gen_tps: float, running: int, waiting: int, kv: float,
               hit_rate: float) -> str:
    return _line("INFO", epoch, "loggers.py:123", (
        f"Engine 000: Avg prompt throughput: {prompt_tps:.1f} tokens/s, Avg generation throughput: "
        f"{gen_tps:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: "
        f"{kv * 100:.1f}%, Prefix cache hit rate: {hit_rate * 100:.1f}%"))


def preemption_line(epoch: float, total: int) -> str:
    return _line("WARNING", epoch, "scheduler.py:1421", (
        "Sequence group is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
        "space. This can affect the end-to-end performance. Increase gpu_memory_utilization or "
        f"tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption={total}"))


def startup_lines(epoch: float, version: str, model: str, tp: int, eager: bool, blocks: int) -> list[str]:
    lines = [
        _line("INFO", epoch, "api_server.py:1896", f"vLLM API server version {version}"),
        _line("INFO", epoch, "utils.py:326", f"non-default args: {{'model': '{model}', "
              f"'tensor_parallel_size': {tp}, 'enforce_eager': {eager}}}"),
        _line("INFO", epoch + 2, "core.py:74", f"Initializing a V1 LLM engine (v{version}) with config: "
              f"model='{model}', tensor_parallel_size={tp}, enforce_eager={eager}"),
        _line("INFO", epoch + 30, "gpu_model_runner.py:2007", "Model loading took 14.9889 GiB and "
              "27.512 seconds"),
        _line("INFO", epoch + 38, "gpu_worker.py:276", "Available KV cache memory: 52.73 GiB"),
        _line("INFO", epoch + 38, "kv_cache_utils.py:849", f"GPU KV cache size: {blocks * 16:,} tokens"),
    ]
    return lines


def capture_progress(epoch: float, done: int, total: int = 67) -> str:
    pct = int(100 * done / total)
    bar = ("█" * (pct // 10)).ljust(10)
    return f"Capturing CUDA graph shapes: {pct:3d}%|{bar}| {done}/{total} [00:0{done // 10}<00:05, 12.1it/s]"


def ready_lines(epoch: float) -> list[str]:
    return [
        capture_progress(epoch, 67),
        _line("INFO", epoch, "gpu_model_runner.py:2708", "Graph capturing finished in 9 secs, took 0.53 GiB"),
        _line("INFO", epoch + 1, "api_server.py:1818", "Starting vLLM API server 0 on http://0.0.0.0:8000"),
        "INFO:     Application startup complete.",
    ]


def eager_ready_lines(epoch: float) -> list[str]:
    return [
        _line("WARNING", epoch, "gpu_model_runner.py:2650", "Skipping CUDA graph capture. To turn on CUDA "
              "graph capture, ensure `enforce_eager` is False."),
        _line("INFO", epoch + 1, "api_server.py:1818", "Starting vLLM API server 0 on http://0.0.0.0:8000"),
        "INFO:     Application startup complete.",
    ]


def capture_crash_lines(epoch: float) -> list[str]:
    return [
        capture_progress(epoch, 23),
        _line("ERROR", epoch + 1, "core.py:708", "EngineCore failed to start."),
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 699, in '
        "run_engine_core",
        "    engine_core = EngineCoreProc(*args, **kwargs)",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2690, in '
        "capture_model",
        "    self._dummy_run(num_tokens, capture_attn_cudagraph=full_cg)",
        '  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/graphs.py", line 186, in __exit__',
        "    self.cuda_graph.capture_end()",
        "RuntimeError: CUDA error: operation not permitted when stream is capturing",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        _line("ERROR", epoch + 1, "core.py:710", "CUDA graph capture failed; consider --enforce-eager"),
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]


def oom_lines(epoch: float) -> list[str]:
    return [
        _line("ERROR", epoch, "core.py:588", "EngineCore encountered a fatal error."),
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
        "of 79.19 GiB of which 1.06 GiB is free.",
    ]


_XID_TEXT = {
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, "
        "subpartition 0.",
    63: "Row Remapper: New row (0x0000000000a1f2c0) marked for remapping, reset gpu to activate.",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    79: "GPU has fallen off the bus.",
    74: "NVLink: fatal error detected on link 5(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
}


def xid_line(uptime_s: float, pci: str, xid: int, pid: int) -> str:
    """dmesg format: `pci` like "0000:3b:00"."""
    return f"[{uptime_s:12.6f}] NVRM: Xid (PCI:{pci}): {xid}, pid={pid}, name=python3, {_XID_TEXT[xid]}"
