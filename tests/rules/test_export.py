"""`llm-oncall rules export`: the listing (golden), promtool-clean rules, every spelling, a well-formed dashboard."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.runbooks import promrules
from llm_oncall.runbooks.loader import builtin, parse_text
from llm_oncall.service.webhook import Webhook

from .conftest import promtool

GOLDEN = Path(__file__).parent / "golden" / "export.json"
REAL_PAGE = Path(__file__).parents[1] / "real_engine" / "data" / "vllm-cpu-loaded.prom"
UPDATE = os.environ.get("LLM_ONCALL_UPDATE_GOLDEN") == "1"


def _export_json(out: Path, *args: str) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["rules", "export", "--out", str(out), "--json", *args])
    assert res.exit_code == 0, res.output
    data: dict[str, Any] = json.loads(res.output)
    return data


def test_export_listing_golden(tmp_path: Path) -> None:
    listing = _export_json(tmp_path / "out")
    assert listing.pop("out") == str(tmp_path / "out")
    if UPDATE:
        GOLDEN.write_text(json.dumps(listing, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert listing == json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(listing["files"])


def test_one_alert_per_runbook_with_a_promql_form() -> None:
    books = builtin()
    alerts = [r for r in promrules.build(books) if r.kind == "alert"]
    assert {r.incident for r in alerts} == {rb.id for rb in books if rb.id != "healthy"} | {"unknown"}
    assert all(rb.prometheus is not None for rb in books if rb.id != "healthy")
    for r in alerts:  # what the Alertmanager receiver and the store read
        assert {"severity", "incident", "source"} <= set(r.labels)
        assert r.name.startswith("LlmOncall") and "namespace" in r.scope


def test_promtool_check_rules_clean(exported: tuple[Path, dict[str, Any]]) -> None:
    out, listing = exported
    res = promtool("check", "rules", out / promrules.RULES_FILE)
    assert res.returncode == 0, res.stdout + res.stderr
    n = len(listing["recording_rules"]) + len(listing["alerts"])
    assert f"SUCCESS: {n} rules found" in res.stdout


def test_export_parameters_reach_the_rules(tmp_path: Path) -> None:
    _export_json(tmp_path, "--slo-ttft-p99", "0.8", "--window", "2m", "--baseline", "30m", "--offset", "5m")
    text = (tmp_path / promrules.RULES_FILE).read_text()
    assert "> 0.8" in text and "[2m]" in text and "[30m] offset 5m" in text and "${" not in text
    assert promtool("check", "rules", tmp_path / promrules.RULES_FILE).returncode == 0


@pytest.mark.parametrize("args", [["--window", "5 minutes"], ["--slo-ttft-p99", "-1"]])
def test_bad_parameters_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    res = CliRunner().invoke(app, ["rules", "export", "--out", str(tmp_path), *args])
    assert res.exit_code == 2


def test_every_vllm_name_in_both_spellings() -> None:
    for r in promrules.build(builtin()):
        for name in {m for m in re.findall(r"(?<![\w:])vllm:[\w:]+", r.canonical)}:
            assert name in r.expr and name.replace(":", "_") in r.expr, (r.name, name)
    kv = next(r for r in promrules.build(builtin()) if r.name == "pod:vllm_kv_cache_usage:max")
    assert promrules.spellings(kv.canonical) == [
        "max by (namespace, pod) (vllm:kv_cache_usage_perc)", "max by (namespace, pod) (vllm_kv_cache_usage_perc)",
        "max by (namespace, pod) (vllm:gpu_cache_usage_perc)", "max by (namespace, pod) (vllm_gpu_cache_usage_perc)"]


def test_every_vllm_selector_is_on_a_real_vllm_page() -> None:
    """Counters with `_total` as the wire names them: no `vllm:num_preemptions` that matches nothing."""
    names = {line.split("{")[0].split(" ")[0] for line in REAL_PAGE.read_text().splitlines()
             if line and not line.startswith("#")}
    used = {promrules.metric_name(s) for r in promrules.build(builtin()) for s in promrules.selectors(r.canonical)}
    vllm = {n for n in used if n.startswith("vllm:")}
    assert {"vllm:num_preemptions_total", "vllm:prefix_cache_hits_total", "vllm:request_success_total"} <= vllm
    assert vllm <= names, sorted(vllm - names)


def test_selectors() -> None:
    expr = ('histogram_quantile(0.99, sum by (namespace, le) (rate(vllm:x_bucket{a="1",b=~"x|y"}[5m] offset 10m)))'
            ' / on (namespace) group_left () max without (pod) (up) > 1e-3 and {__name__="m"} unless absent(q)')
    assert promrules.selectors(expr) == ['vllm:x_bucket{a="1",b=~"x|y"}', "up", '{__name__="m"}', "q"]
    assert promrules.metric_name('{__name__="m"}') == "m"


def test_alert_labels_pass_the_webhook_validation() -> None:
    rules = [r for r in promrules.build(builtin()) if r.kind == "alert"]
    alerts = [{"status": "firing", "labels": {"alertname": r.name, **r.labels, "namespace": "llm", "pod": "p-1"},
               "annotations": dict(r.annotations), "startsAt": "2026-01-01T00:00:00Z", "fingerprint": f"{i:x}"}
              for i, r in enumerate(rules)]
    Webhook.model_validate({"version": "4", "groupKey": "{}:{alertname=~\"LlmOncall.*\"}", "status": "firing",
                            "alerts": alerts})


def test_dashboard_structure(exported: tuple[Path, dict[str, Any]]) -> None:
    out, listing = exported
    board = json.loads((out / promrules.DASHBOARD_FILE).read_text())
    assert board["uid"] == listing["dashboard"]["uid"] and board["schemaVersion"] >= 36
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource", "namespace", "pod"]
    ids = [p["id"] for p in board["panels"]]
    assert len(set(ids)) == len(ids)
    recorded = set(listing["recording_rules"])
    titles = " ".join(p["title"] for p in board["panels"]).lower()
    for signal in ("ttft", "itl", "request rate", "error", "waiting", "kv", "hit rate", "preemptions"):
        assert signal in titles
    cells = set()
    for p in board["panels"]:
        g = p["gridPos"]
        assert g["w"] > 0 and g["h"] > 0 and g["x"] + g["w"] <= 24
        cells.add((g["x"], g["y"]))
        assert p["targets"] and all(t["expr"] and t["refId"] for t in p["targets"])
        for t in p["targets"]:
            assert promrules.metric_name(promrules.selectors(t["expr"])[0]) in recorded
    assert len(cells) == len(board["panels"])  # no two panels on the same spot


def test_dashboard_expressions_parse(tmp_path: Path) -> None:
    """Every panel query, variables filled in, is a valid PromQL expression for promtool."""
    exprs = promrules.panel_exprs(promrules.dashboard())
    rules = {"groups": [{"name": "panels", "rules": [{"record": f"panel:q{i}", "expr": e}
                                                     for i, e in enumerate(exprs)]}]}
    f = tmp_path / "panels.yaml"
    f.write_text(yaml.safe_dump(rules))
    res = promtool("check", "rules", f)
    assert res.returncode == 0, res.stdout + res.stderr


def test_promql_block_is_validated() -> None:
    text = (Path(promrules.__file__).parent / "builtin" / "kv-capacity.yaml").read_text()
    # The condition is stated once: an alert the export cannot translate is refused with the reason ...
    bad = text.replace("waiting_per_pod >= 2) and", "waiting_per_pod >= 2) and max(kv_max, kv_median) > 0.9 and", 1)
    rb, problems = parse_text(bad, "kv.yaml")
    assert rb is None and any("no PromQL form" in p.message and "max()" in p.message for p in problems)
    # ... and a second statement of it in PromQL is an unknown key.
    rb, problems = parse_text(text.replace("prometheus:\n", "prometheus:\n  expr: up == 0\n", 1), "kv.yaml")
    assert rb is None and any("expr" in p.message for p in problems)
    rb, problems = parse_text(text.replace("for: 2m", "for: soon", 1), "kv.yaml")
    assert rb is None and any("duration" in p.message for p in problems)
