"""`promtool test rules` on the exported rules: each alert has a firing and a not-firing case (alerts_test.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from llm_oncall.runbooks import promrules
from llm_oncall.runbooks.loader import builtin

from .conftest import promtool

CASES = Path(__file__).with_name("alerts_test.yaml")


def filled_tests(rules_file: Path) -> dict[str, Any]:
    """alerts_test.yaml with the rule file and the annotations each firing alert renders (title, symptom)."""
    books = {rb.id: rb for rb in builtin()}
    rules = {r.name: r for r in promrules.build(builtin()) if r.kind == "alert"}
    tests: dict[str, Any] = yaml.safe_load(CASES.read_text(encoding="utf-8"))
    tests["rule_files"] = [str(rules_file)]
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            rule = rules[check["alertname"]]
            for alert in check["exp_alerts"]:
                labels = alert["exp_labels"]
                ann = dict(rule.annotations)
                if rule.incident in books:
                    scope = ", ".join(str(labels[s]) for s in rule.scope)
                    ann["summary"] = f"{books[rule.incident].title.en} ({scope})"
                else:
                    ann["summary"] = ann["summary"].replace("{{ $labels.namespace }}", labels["namespace"])
                alert["exp_annotations"] = ann
    return tests


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases: dict[str, set[bool]] = {}
    for case in yaml.safe_load(CASES.read_text(encoding="utf-8"))["tests"]:
        for check in case.get("alert_rule_test", []):
            cases.setdefault(check["alertname"], set()).add(bool(check["exp_alerts"]))
    alerts = [r.name for r in promrules.build(builtin()) if r.kind == "alert"]
    assert sorted(cases) == sorted(alerts)
    assert all(v == {True, False} for v in cases.values()), cases


def test_promtool_test_rules(exported: tuple[Path, dict[str, Any]]) -> None:
    out, _ = exported
    test_file = out / "alerts_test.yaml"
    test_file.write_text(yaml.safe_dump(filled_tests(out / promrules.RULES_FILE), sort_keys=False,
                                        allow_unicode=True), encoding="utf-8")
    res = promtool("test", "rules", test_file)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_a_wrong_expectation_fails(exported: tuple[Path, dict[str, Any]]) -> None:
    """promtool really evaluates the cases: a quiet case that expects an alert fails."""
    out, _ = exported
    tests = filled_tests(out / promrules.RULES_FILE)
    quiet = next(c for c in tests["tests"] if c.get("alert_rule_test") and not c["alert_rule_test"][0]["exp_alerts"])
    quiet["alert_rule_test"][0]["exp_alerts"] = [{"exp_labels": {"incident": "kv-capacity"}}]
    tests["tests"] = [quiet]
    test_file = out / "mutant_test.yaml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False), encoding="utf-8")
    assert promtool("test", "rules", test_file).returncode != 0
