"""Round 3zj (docs/evidence.md, "Round 3zj"): written before check set 3zj was read, each with its look-alikes."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import outputs, reported
from llm_oncall.evidence.classify import classify_text


@pytest.mark.parametrize("heading", [
    "### What happened?",  # llama.cpp, Kubernetes
    "### What is the issue?",  # Ollama
    "**Describe the Issue**",  # KoboldCpp
    "### Problem description & steps to reproduce",  # llama.cpp
    "### Problem Description",  # ROCm
])
def test_a_bug_templates_report_heading_counts_even_as_a_question(heading: str) -> None:
    assert reported.line_reports(heading) == "report_heading"


def test_a_question_or_a_heading_in_prose_is_still_no_report() -> None:
    assert reported.line_reports("What happened to the second GPU after the reboot?") is None
    assert reported.line_reports("Is there a problem description somewhere?") is None
    assert reported.line_reports("## Feature request") is None


# Read from check set 3zj's misses after it was measured (docs/evidence.md, "Check set 3zj, and round 3zj").

@pytest.mark.parametrize(("line", "kind", "category"), [
    ("2021-Nov-01 06:02:18.0992 13660:14125 ERROR  NMGR:dlr_infer                               Inference "
     "completed with err: 1004", "accelerator_runtime_fatal", "other-failure"),
    ('RuntimeError: nrt_load_collectives status=4 message="Allocation Failure"', "accelerator_runtime_fatal",
     "other-failure"),
    ('The message shows `"RuntimeError: Neuron runtime cannot be initialized; cannot determine the number of '
     'available NeuronCores"` when I load the unet', "accelerator_runtime_fatal", "other-failure"),
    ("HCCL demo error: In function initDevice(): synDeviceAcquire(&resources.deviceHandle, nullptr) failed with "
     "synapse error: 20", "accelerator_runtime_fatal", "other-failure"),
    ("Feb 02 09:52:07 worker slurmd[12912]: slurmd: fatal: can't stat gres.conf file /dev/nvidia0: No such file or "
     "directory", "slurm_daemon_fatal", "other-failure"),
    ('the result show "Out of bounds values : 248 FAILED", I have no idea about this error', "nccl_tests_wrong_values",
     "other-failure"),
    ('%RuntimeError{message: "Command buffer has to have a graph executable to be updated"}, [{EXLA.NIF, :run_io, '
     "[]}]", "cuda_graph_capture_error", "cuda-graph"),
])
def test_the_producers_formats_of_round_3zj(line: str, kind: str, category: str) -> None:
    f = classify_text(line + "\n", "paste.txt")
    assert (f.kind, f.category) == (kind, category)


@pytest.mark.parametrize("text", [
    "2024-Jul-30 14:22:31.244396 65191:69012 INFO   NRT:nrt_init   NRT version: 2.21.41.0\n",
    "Feb 02 09:51:48 worker slurmd[12912]: slurmd: error: Waiting for gres.conf file /dev/nvidia0\n",
    "# Out of bounds values : 0 OK\n",
    '    return absl::InternalError(\n        "Command buffer has to have a graph executable to be updated.");\n',
])
def test_their_healthy_or_source_look_alikes_are_not(text: str) -> None:
    assert classify_text(text, "paste.txt").kind not in (
        "accelerator_runtime_fatal", "slurm_daemon_fatal", "nccl_tests_wrong_values", "cuda_graph_capture_error")


def test_a_programs_message_repeated_per_device_is_no_degenerate_output() -> None:
    """The output analyzer reads a text nothing recognised as one model output; a message that names its source
    location is a program's, repeated once per device, not a model's loop."""
    msg = ("hcl_device_control_factory.cpp::71(initDevice): The condition [ false ] failed. Invalid server type "
           "requested to generate controller.\n\n")
    assert outputs.parse_plain(msg * 3, "paste.txt") is None
