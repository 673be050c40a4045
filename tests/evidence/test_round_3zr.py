"""Round 3zr (docs/evidence.md, "Check set 3zr ... and round 3zr"): read from check set 3zr's misses after it was
measured, each a producer's format with its look-alikes. (Round 3zr's reader, written before the set, was reverted by
its rule; its record is in the docs.)"""

from __future__ import annotations

import pytest

from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize(("text", "kind", "category"), [
    # ggml's CUDA buffer allocation, journald-prefixed as Ollama's service logs it
    ("Nov 25 06:44:10 ai ollama[95]: ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9220.57 MiB on device 1: "
     "cudaMalloc failed: out of memory", "cuda_oom", "other-failure"),
    # Vulkan's device allocation through ggml-vulkan / vulkan-hpp, and the C API's result name
    ("ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory", "cuda_oom", "other-failure"),
    ("vkAllocateMemory returned VK_ERROR_OUT_OF_DEVICE_MEMORY", "cuda_oom", "other-failure"),
    # i915's error state (/sys/class/drm/card0/error) opens with the hang message alone on its line
    ("GPU HANG: ecode 12:1:85def5fb, in llama-bench [1538400]\nKernel: 6.8.0-45-generic x86_64",
     "intel_gpu_reset", "gpu-hardware"),
])
def test_the_producers_formats_of_round_3zr(text: str, kind: str, category: str) -> None:
    f = classify_text(text + "\n", "paste.txt")
    assert (f.kind, f.category) == (kind, category)


def test_an_xid_line_without_the_colon_after_nvrm_is_an_xid() -> None:
    f = classify_text("[12146.826127] NVRM Xid (PCI:0000:0b:00) : 79, GPU has fallen off the bus.\n", "dmesg.txt")
    assert (f.kind, f.category) == ("xid_79", "gpu-hardware")


@pytest.mark.parametrize(("text", "kind"), [
    ("ggml_vulkan: 0 = AMD Radeon AI PRO R9700 (RADV GFX1201) | uma: 0 | fp16: 1 | warp size: 64", "cuda_oom"),
    ("If cudaMalloc fails, ggml falls back to host memory.", "cuda_oom"),
    ("The error state starts with a GPU HANG: ecode line; attach it to the bug.", "intel_gpu_reset"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05", "xid_79"),
])
def test_look_alikes_of_round_3zr(text: str, kind: str) -> None:
    assert classify_text(text + "\n", "paste.txt").kind != kind
