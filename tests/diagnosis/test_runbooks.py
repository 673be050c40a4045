from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.diagnosis.features import known_feature_names
from llm_oncall.runbooks.loader import lint, load_registry
from llm_oncall.runbooks.schema import INCIDENTS

runner = CliRunner()


def test_builtin_runbooks_cover_every_incident_and_lint_clean() -> None:
    reg = load_registry()
    assert set(reg.ids()) == set(INCIDENTS) - {"unknown"}  # unknown is what no runbook explains
    builtin = Path(__file__).parents[2] / "src" / "llm_oncall" / "runbooks" / "builtin"
    assert lint([builtin], known_feature_names()) == []


def test_every_runbook_has_actions_long_term_and_chinese_text() -> None:
    for rb in load_registry().in_triage_order():
        if rb.id == "healthy":
            continue
        assert rb.emergency, rb.id
        assert rb.long_term, rb.id
        assert rb.title.zh and rb.symptom.zh, rb.id
        assert all(a.text.zh for a in rb.emergency), rb.id
        assert rb.look_alikes or rb.id == "healthy", rb.id


def test_lint_reports_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: my-runbook\n"
        "title: {en: Mine}\n"
        "priority: 5\n"
        "symptom: {en: something}\n"
        "signature:\n"
        "  - when: \"waiting >\"\n"
        "    text: {en: broken}\n"
        "emergency:\n"
        "  - action: reboot_everything\n"
        "    text: {en: no}\n",
        encoding="utf-8",
    )
    problems = lint([bad])
    lines = {p.line for p in problems}
    assert 6 in lines  # the broken expression
    assert 9 in lines  # the unknown action
    assert all(p.file == str(bad) for p in problems)


def test_lint_flags_unknown_features(tmp_path: Path) -> None:
    f = tmp_path / "x.yaml"
    f.write_text("id: x-runbook\ntitle: {en: X}\npriority: 1\nsymptom: {en: s}\n"
                 "signature:\n  - when: \"no_such_feature > 1\"\n    text: {en: t}\n", encoding="utf-8")
    problems = lint([f], known_feature_names())
    assert any("no_such_feature" in p.message for p in problems)


def test_user_runbook_overrides_builtin(tmp_path: Path) -> None:
    (tmp_path / "kv.yaml").write_text(
        "id: kv-capacity\ntitle: {en: Our KV runbook}\npriority: 70\nsymptom: {en: s}\n"
        "signature:\n  - when: \"waiting > 1000\"\n    text: {en: t}\n", encoding="utf-8")
    reg = load_registry([tmp_path])
    rb = reg.get("kv-capacity")
    assert rb is not None and rb.title.en == "Our KV runbook"


def test_cli_lint_and_show(tmp_path: Path) -> None:
    res = runner.invoke(app, ["runbooks", "show", "engine-hang", "--lang", "zh"])
    assert res.exit_code == 0, res.output
    assert "推理引擎挂起" in res.output
    res = runner.invoke(app, ["runbooks", "show", "nope"])
    assert res.exit_code == 2
    (tmp_path / "b.yaml").write_text("id: [", encoding="utf-8")
    res = runner.invoke(app, ["runbooks", "lint", str(tmp_path)])
    assert res.exit_code == 1
    assert "b.yaml:1" in res.output


def test_the_user_written_runbook_in_the_docs_lints_clean_and_loads(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "runbooks.md").read_text(encoding="utf-8")
    section = doc.split("## A runbook of your own", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pod-outlier.yaml").write_text(example, encoding="utf-8")
    assert lint([tmp_path], known_feature_names()) == []
    reg = load_registry([tmp_path])
    rb = reg.get("pod-outlier")
    assert rb is not None and rb.min_fit == 0.75 and rb.signature[1].required is False
