"""The signature catalogue: schema, every signature's own examples, user additions and overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_oncall.cli.evidence import app
from llm_oncall.evidence import catalog, classify, matcher
from llm_oncall.evidence.model import CATEGORIES, SEVERITIES

runner = CliRunner()
SIGS = catalog.builtin()


def test_builtin_catalogue_loads() -> None:
    assert len(SIGS) >= 60
    assert len({c.id for c in SIGS}) == len(SIGS)


@pytest.mark.parametrize("c", SIGS, ids=lambda c: c.id)
def test_signature_examples(c: catalog.Compiled) -> None:
    assert catalog.check([c]) == []
    s = c.sig
    assert s.source.strip()
    assert s.category in CATEGORIES and s.severity in SEVERITIES
    if s.role == "finding" and s.xid_group is None and s.xid_code is None:
        assert s.incident_hint == catalog.HINT_OF_CATEGORY[s.category]
        # an example line classified alone gives this signature's kind (or a more severe reading of the line)
        found = matcher.findings(s.examples.match[0], "ex", SIGS)
        if not s.requires and s.min_count == 1:
            assert any(f.kind == s.kind for f in found), [f.kind for f in found]


def _write(tmp: Path, body: str) -> Path:
    d = tmp / "sigs"
    d.mkdir(exist_ok=True)
    (d / "mine.yaml").write_text(body, encoding="utf-8")
    return d


NEW_FORMAT = r"""
signatures:
  - id: acme-engine-wedged
    kind: acme_wedged
    category: hang
    incident_hint: engine-hang
    severity: error
    confidence: 0.7
    needles: ["ACME scheduler wedged"]
    pattern: 'ACME scheduler wedged after (?P<seconds>\d+)s'
    numbers: [seconds]
    source: "acme-serve scheduler.py"
    examples:
      match: ["2025-01-01 ERROR ACME scheduler wedged after 120s"]
      no_match: ["ACME scheduler ok"]
"""


def test_a_new_real_format_is_a_data_change(tmp_path: Path) -> None:
    text = "2025-01-01 INFO start\n2025-01-01 ERROR ACME scheduler wedged after 120s\n"
    before = classify.classify_text(text, "log")
    assert before.kind == "unknown" and before.incident_hint is None  # unknown format: no guess
    d = _write(tmp_path, NEW_FORMAT)
    sigs = catalog.load([d])
    assert catalog.check(sigs) == []
    classify.use_signatures([d])
    try:
        after = classify.classify_text(text, "log")
    finally:
        classify.reset_signatures()
    assert (after.kind, after.incident_hint, after.category, after.lines) == ("acme_wedged", "engine-hang", "hang",
                                                                             (2,))
    assert after.facts["seconds"] == 120


def test_same_id_overrides_the_builtin(tmp_path: Path) -> None:
    body = """
signatures:
  - id: nccl-info
    kind: nccl_chatter
    category: benign
    severity: info
    confidence: 0.4
    needles: ["NCCL INFO"]
    pattern: 'NCCL INFO'
    source: "override"
    examples:
      match: ["x NCCL INFO y"]
"""
    sigs = catalog.load([_write(tmp_path, body)])
    (mine,) = [c for c in sigs if c.id == "nccl-info"]
    assert mine.sig.kind == "nccl_chatter"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("signatures:\n  - id: x\n    kind: k\n    category: hang\n    needles: [a]\n    pattern: '('\n"
         "    source: s\n    examples: {match: [a]}\n", "does not compile"),
        ("signatures:\n  - id: x\n    kind: k\n    category: hang\n    incident_hint: gpu-ecc\n    needles: [a]\n"
         "    pattern: a\n    source: s\n    examples: {match: [a]}\n", "goes with incident_hint"),
        ("signatures:\n  - id: x\n    kind: k\n    category: benign\n    severity: error\n    needles: [a]\n"
         "    pattern: a\n    source: s\n    examples: {match: [a]}\n", "severity info"),
        ("signatures:\n  - id: x\n    kind: k\n    category: hang\n    incident_hint: engine-hang\n    needles: [a]\n"
         "    pattern: a\n    source: s\n    requires: [{any_of: [nope]}]\n    examples: {match: [a]}\n",
         "unknown signature"),
        ("signatures:\n  - id: x\n    kind: k\n    category: hang\n    incident_hint: engine-hang\n    needles: [a]\n"
         "    pattern: a\n    source: s\n    examples: {match: [a]}\n    colour: red\n", "colour"),
    ],
)
def test_invalid_signatures_name_the_problem(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(catalog.CatalogError) as exc:
        catalog.load([_write(tmp_path, body)])
    assert message in str(exc.value) and "mine.yaml" in str(exc.value)


def test_examples_that_do_not_behave_are_reported(tmp_path: Path) -> None:
    body = NEW_FORMAT.replace('no_match: ["ACME scheduler ok"]', 'no_match: ["ACME scheduler wedged after 9s"]')
    sigs = catalog.load([_write(tmp_path, body)])
    assert any("no_match example matches" in p for p in catalog.check(sigs))


def test_cli_signatures_check(tmp_path: Path) -> None:
    ok = runner.invoke(app, ["signatures", "check", str(_write(tmp_path, NEW_FORMAT)), "--json"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["signatures", "check", str(_write(tmp_path, "signatures: [{id: x}]"))])
    assert bad.exit_code == 2


def test_cli_classify_with_user_signatures(tmp_path: Path) -> None:
    log = tmp_path / "acme.log"
    log.write_text("ERROR ACME scheduler wedged after 30s\n", encoding="utf-8")
    d = _write(tmp_path, NEW_FORMAT)
    res = runner.invoke(app, ["classify", str(log), "--signatures", str(d), "--json"])
    assert res.exit_code == 0, res.output
    assert '"acme_wedged"' in res.stdout
    # the registry is back to the built-in catalogue afterwards
    assert classify.classify_file(log).kind == "unknown"
