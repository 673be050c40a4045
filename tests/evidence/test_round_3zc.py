"""Focused tests for the rules round 3zc added from check set 3zc's misses (docs/evidence.md, "Round 3zc"), each a
producer's format:
- ROCm's HSA runtime aborting a queue on a kernel's fault ("Callback: Queue 0x… aborting with error :
  HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: …", "Queue error - HSA_STATUS_ERROR_MEMORY_FAULT")
- c10's TORCH_INTERNAL_ASSERT ("<cond> INTERNAL ASSERT FAILED at "<file>":<line>, please report a bug to PyTorch.")
- TensorRT-LLM's KV cache check with its numbers ("maxTokensInPagedKvCache (29184) must be large enough to process at
  least 1 sequence to completion …"), as Triton's backend relays it
- a feature template's questions (GitHub's "**Is your feature request related to a problem? …**", AWS's roadmap
  "**Tell us about your request**"): a request quotes failures as its motivation, it reports none

Lines are rendered from those formats with made-up values; texts are written for the tests. Each rule has a
look-alike. The signatures' own must-match / must-not-match examples run in test_signatures.py.
"""

from __future__ import annotations

from tests.evidence.rounds import quiet as _quiet

from llm_oncall.evidence.classify import classify_text


def test_a_rocm_queue_aborted_on_a_memory_fault_is_a_kernel_fault() -> None:
    log = (":0:rocdevice.cpp            :3675: 2139490044663 us:  Callback: Queue 0x7ee7b4200000 aborting with error : "
           "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest legal "
           "address. code: 0x29\nAborted (core dumped)\n")
    f = classify_text(log, "server.log")
    assert (f.kind, f.category) == ("cuda_illegal_memory_access", "other-failure")
    assert classify_text("Warning: Queue error - HSA_STATUS_ERROR_MEMORY_FAULT\n", "x.log").category == "other-failure"
    # a status that is not a fault of the kernel is not this reading
    assert "cuda_illegal_memory_access" not in {x.kind for x in classify_text(
        "hipMalloc returned HSA_STATUS_ERROR_OUT_OF_RESOURCES\n", "x.log").findings}


def test_pytorchs_internal_assert_is_a_failure_ranked_below_a_named_cause() -> None:
    line = ('RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":844, '
            "please report a bug to PyTorch.\n")
    f = classify_text(line, "predictor.log")
    assert (f.kind, f.category) == ("torch_internal_assert", "other-failure")
    oom = line + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    assert classify_text(oom, "predictor.log").kind == "cuda_oom"
    assert "torch_internal_assert" not in {x.kind for x in classify_text(
        "#define TORCH_INTERNAL_ASSERT(cond, ...) ... INTERNAL ASSERT FAILED at ...\n", "Exception.h").findings}


def test_trtllms_kv_cache_check_with_its_numbers_is_a_cache_too_small_to_start() -> None:
    line = ("E0306 16:40:07.708802 117 backend_model.cc:691] ERROR: Failed to create instance: unexpected error when "
            "creating modelInstanceState: maxTokensInPagedKvCache (29184) must be large enough to process at least 1 "
            "sequence to completion (i.e. must be larger than beam_width (1) * tokensPerBlock (128) * maxBlocksPerSeq "
            "(272))\n")
    f = classify_text(line, "triton.log")
    assert (f.kind, f.category) == ("kv_cache_too_small", "other-failure")
    assert _quiet("Set maxTokensInPagedKvCache to bound the KV cache of the executor.\n")


def test_a_feature_request_quoting_xids_reports_no_failure() -> None:
    request = ("**Tell us about your request**\n"
               "For large GPU clusters the agent should detect kernel errors reported by the NVIDIA driver (XID "
               "errors) and mark the instance unhealthy.\n\nCommon NVIDIA XID GPU errors include:\n\n"
               "* XID 79: GPU has fallen off the bus\n"
               "* XID 48: An uncorrectable double bit error (DBE) has been detected on GPU\n\n"
               "**Which service(s) is this request for?**\nECS\n")
    assert _quiet(request)
    github = request.replace("**Tell us about your request**",
                             "**Is your feature request related to a problem? Please describe.**")
    assert _quiet(github)
    # the same list in a bug report is the user's evidence
    report = "### Describe the bug\nOur node logged this and the job died:\n" + \
        "[ 12.3] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
    assert classify_text(report, "issue.md").category == "gpu-hardware"
