"""Classifier behaviour: registry, strongest finding, robustness on odd input, file reading."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_oncall.evidence import classify as cl
from llm_oncall.evidence import xid
from llm_oncall.evidence.model import INCIDENT_IDS, Finding, unknown

SAMPLES = Path(__file__).parent / "samples"


@pytest.fixture
def clean_registry() -> Iterator[None]:
    before = cl.parsers()
    yield
    for name in set(cl.parsers()) - set(before):
        cl.unregister(name)
    for name, fn in before.items():
        cl.register(name, fn)


def test_unknown_text() -> None:
    f = cl.classify_text("hello world\n", "x.txt")
    assert f.to_json() == unknown("x.txt").to_json()
    assert (f.kind, f.benign, f.incident_hint, f.confidence) == ("unknown", True, None, 0.0)


def test_empty_text() -> None:
    assert cl.classify_text("", "empty").kind == "unknown"


def test_register_plugin_and_strongest_wins(clean_registry: None) -> None:
    def mine(text: str, name: str) -> Finding | None:
        if "MAGIC" not in text:
            return None
        # The file is classified by its most severe finding, then confidence: a plugin says how severe.
        return Finding(name, "magic", False, "pod-outlier", 0.99, {"n": 1}, (1,), severity="critical")

    cl.register("mine", mine)
    f = cl.classify_text("MAGIC\nNVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n", "f")
    assert f.kind == "magic" and f.parser == "mine"
    assert "xid_79" in f.facts["also"]
    cl.unregister("mine")
    assert cl.classify_text("MAGIC", "f").kind == "unknown"


def test_a_failing_parser_is_skipped_and_named(clean_registry: None) -> None:
    def broken(text: str, name: str) -> Finding | None:
        raise RuntimeError("boom")

    cl.register("broken", broken)
    f = cl.classify_text((SAMPLES / "dmesg_xid79.log").read_text(), "dmesg")
    assert f.kind == "xid_79"
    assert f.facts["parser_errors"] == ["broken"]
    g = cl.classify_text("nothing here", "n")
    assert g.kind == "unknown" and g.facts["parser_errors"] == ["broken"]


def test_problem_beats_benign_in_the_same_file() -> None:
    text = (SAMPLES / "nccl_info_startup.log").read_text() + (SAMPLES / "nccl_watchdog_timeout.log").read_text()
    assert cl.classify_text(text, "mixed").kind == "nccl_watchdog_timeout"
    text = (SAMPLES / "pg_not_destroyed.log").read_text() + (SAMPLES / "vllm_capture_error.log").read_text()
    assert cl.classify_text(text, "mixed").incident_hint == "cuda-graph-crash"


def test_non_utf8_bytes_are_replaced(tmp_path: Path) -> None:
    p = tmp_path / "bin.log"
    p.write_bytes(b"\xff\xfe\x00garbage\x80\n" + (SAMPLES / "dmesg_xid79.log").read_bytes())
    f = cl.classify_file(p)
    assert f.kind == "xid_79"


def test_huge_file_is_read_head_and_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cl, "MAX_READ_BYTES", 4096)
    monkeypatch.setattr(cl, "HEAD_BYTES", 512)
    p = tmp_path / "big.log"
    filler = b"INFO routine line that says nothing at all\n" * 2000
    p.write_bytes(b"HEAD-MARKER\n" + filler + (SAMPLES / "nccl_watchdog_timeout.log").read_bytes())
    text = cl.read_text(p)
    assert len(text.encode()) <= 4096 + 1
    assert text.startswith("HEAD-MARKER")
    assert cl.classify_file(p).kind == "nccl_watchdog_timeout"


def test_missing_file_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        cl.classify_file(tmp_path / "nope.log")


def test_long_single_line_is_fast() -> None:
    import time

    evil = "Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=" + "A" * 2_000_000
    evil += "\n" + "| " * 500_000 + "\n" + "NVRM: Xid (PCI:" + "0" * 1_000_000 + "\n"
    start = time.perf_counter()
    cl.classify_text(evil, "evil")
    assert time.perf_counter() - start < 5.0


def test_finding_rejects_unknown_incident_and_clamps_confidence() -> None:
    with pytest.raises(ValueError):
        Finding("f", "k", False, "not-an-incident", 0.5)
    assert Finding("f", "k", True, None, 7.0).confidence == 1.0
    assert Finding("f", "k", True, None, -1.0).confidence == 0.0


def test_xid_catalogue_covers_the_reference_codes() -> None:
    reference = {8, 13, 31, 32, 38, 43, 44, 45, 46, 48, 56, 61, 62, 63, 64, 74, 79, 92, 94, 95, 109, 110}
    reference |= {119, 120, 121, 136, 140, 143, 144, 145, 149, 154, 155}
    assert reference <= set(xid.catalog())
    for code in xid.catalog():
        info = xid.info(code)
        assert info.incident is None or info.incident in INCIDENT_IDS
        assert info.severity in xid.SEVERITY_RANK
    for code in (48, 63, 64, 92, 94, 95):
        assert xid.info(code).incident == "gpu-ecc" and xid.info(code).category == "gpu-memory"
    for code in (74, 144, 145, 149, 155):
        assert xid.info(code).incident == "engine-hang" and xid.info(code).category == "nvlink"
    assert xid.info(79).category == "gpu-hardware" and xid.info(79).scope == "node"
    assert xid.info(999).meaning == "unlisted Xid" and xid.info(999).category == "unknown"


def test_a_container_log_stream_is_not_read_as_a_document() -> None:
    """A PR that names an Xid is a mention (benign); the same lines as a container's own output (the live loop's
    log tail, `stream=True`) are an event: the document-level readings do not apply to a process's output."""
    text = ("## Summary\nThis PR fixes the handling of Xid 79 so the node is cordoned.\n"
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n## Test plan\nunit tests")
    as_document = cl.classify_text(text, "pr.md")
    as_stream = cl.classify_text(text, "pod/vllm", stream=True)
    assert as_document.benign and as_document.kind == "error_named_in_prose"
    assert not as_stream.benign and as_stream.kind == "xid_79" and as_stream.category == "gpu-hardware"
