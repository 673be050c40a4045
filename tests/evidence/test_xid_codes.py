"""Every Xid code of the catalogue, through the kernel line and the device-plugin line, gives the catalogue's
reading: memory/remap/fallen off the bus/GSP → gpu-ecc's hardware path, NVLink → engine-hang's path,
application faults → benign for the node."""

from __future__ import annotations

import pytest

from llm_oncall.evidence import classify, matcher, xid
from llm_oncall.evidence.model import INCIDENT_IDS

CODES = sorted(xid.catalog())


def _line(code: int) -> str:
    return f"[Tue Mar 11 03:14:02 2025] NVRM: Xid (PCI:0000:3b:00): {code}, pid=4242, name=python3, a message\n"


@pytest.mark.parametrize("code", CODES, ids=lambda c: f"xid{c}")
def test_kernel_line_gives_the_catalogue_reading(code: int) -> None:
    e = xid.catalog()[code]
    f = classify.classify_text(_line(code), "dmesg")
    assert f.parser == "xid" and f.lines == (1,)
    if e.node_benign:
        assert (f.kind, f.benign, f.incident_hint, f.category) == ("xid_app_fault", True, None, "benign")
        assert code in f.facts["codes"]
        return
    assert f.kind == f"xid_{code}"
    assert f.incident_hint == e.incident_hint
    assert f.facts["worst"]["code"] == code and f.facts["worst"]["action"] == e.action
    assert f.facts["action"] == xid.ACTION_TEXT[e.action]
    if e.incident_hint == "gpu-ecc":
        assert f.category == ("gpu-memory" if e.memory else "gpu-hardware") and not f.benign
    elif e.incident_hint == "engine-hang":
        assert f.category == "nvlink" and not f.benign
    elif e.severity == "info":
        assert f.benign and f.category == "benign"
    else:
        assert f.category == "other-failure" and not f.benign


@pytest.mark.parametrize("code", CODES, ids=lambda c: f"xid{c}")
def test_device_plugin_line_agrees(code: int) -> None:
    text = f"I0312 08:14:02.118 1 health.go:159] XidCriticalError: Xid={code} on Device=GPU-9d2e; marking device\n"
    (f,) = matcher.findings(text, "plugin")
    kernel = classify.classify_text(_line(code), "dmesg")
    assert (f.kind, f.incident_hint, f.category) == (kernel.kind, kernel.incident_hint, kernel.category)


@pytest.mark.parametrize(("code", "category"), [(48, "gpu-memory"), (63, "gpu-memory"), (64, "gpu-memory"),
                                                (94, "gpu-memory"), (95, "gpu-memory"), (79, "gpu-hardware"),
                                                (109, "gpu-hardware"), (119, "gpu-hardware"), (120, "gpu-hardware"),
                                                (74, "nvlink"), (144, "nvlink"), (149, "nvlink"), (13, "benign"),
                                                (31, "benign"), (43, "benign")])
def test_issue_classes(code: int, category: str) -> None:
    f = classify.classify_text(_line(code), "dmesg")
    assert f.category == category
    assert f.incident_hint in INCIDENT_IDS or f.incident_hint is None


def test_unlisted_code_says_unknown() -> None:
    f = classify.classify_text(_line(250), "dmesg")
    assert f.kind == "xid_250" and f.category == "unknown" and f.incident_hint is None and f.confidence <= 0.3


def test_recovery_action_names_the_reboot() -> None:
    text = ("NVRM: Xid (PCI:0000:b3:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
            "(Node Reboot Required)\n")
    f = classify.classify_text(text, "dmesg")
    assert (f.kind, f.category, f.incident_hint) == ("xid_154", "gpu-hardware", "gpu-ecc")
    assert f.facts["recovery_action"] == "Node Reboot Required"
    none = classify.classify_text(text.replace("0x2 (Node Reboot Required)", "0x0 (None)"), "dmesg")
    assert none.benign


def test_app_fault_beside_hardware_is_not_benign() -> None:
    text = _line(13) + _line(48)
    f = classify.classify_text(text, "dmesg")
    assert f.kind == "xid_48" and not f.benign
    assert {x.kind for x in f.findings} >= {"xid_48", "xid_app_fault"}


def test_root_cause_named_by_a_cleanup_xid() -> None:
    text = "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=python3, Ch 00000001 caused by previous Xid 149\n"
    f = classify.classify_text(text, "dmesg")
    assert f.kind == "xid_149" and f.category == "nvlink"
