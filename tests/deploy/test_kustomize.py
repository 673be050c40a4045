"""The add-on install (deploy/base and deploy/overlays/production, rendered by `kubectl kustomize`): every core
object validates against the Kubernetes schemas (kubernetes-validate, strict), the prometheus-operator objects
field by field (PrometheusRule, ServiceMonitor, AlertmanagerConfig — no schema ships for them), the PrometheusRule
is exactly what `rules export --format prometheusrule` writes and promtool accepts its spec, and in production the
config and its bearer tokens come from Secrets and still load.

(Helm: no Debian or PyPI package of it exists here — PyPI's `helm` is an unrelated system monitor — so the add-on
is a kustomize base with overlays, rendered by the kustomize built into kubectl.)"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.deploy.test_manifests import CRDS, DEPLOY, K8S, OWN_NS, _validate_part, kv, render
from tests.rules.conftest import promtool

from llm_oncall.runbooks import promrules
from llm_oncall.runbooks.loader import builtin
from llm_oncall.service.config import load

PRODUCTION = DEPLOY / "overlays" / "production"
# prometheus-operator's CRDs (monitoring.coreos.com/v1 PrometheusRule): the fields a group and a rule may have
GROUP_FIELDS = {"name", "interval", "limit", "labels", "partial_response_strategy", "query_offset", "rules"}
RULE_FIELDS = {"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def by_kind(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


@pytest.mark.parametrize("where", ["base", "overlays/production"])
def test_every_rendered_object_validates(where: str) -> None:
    docs = render(DEPLOY / where)
    assert len(docs) >= 17
    for d in docs:
        if (d["apiVersion"], d["kind"]) in CRDS:
            _validate_part(d["metadata"], "objectmeta-meta-v1.json")
            continue
        try:
            kv.validate(d, K8S, strict=True)
        except kv.ValidationError as exc:
            raise AssertionError(f"{where}: {d['kind']} {d['metadata']['name']}: {exc}") from None
    dep = by_kind(docs)[("Deployment", "llm-oncall")]
    assert dep["spec"]["replicas"] == 2  # two replicas, one leader (the Lease RBAC is in the base)
    assert ("Role", "llm-oncall-leader-election") in by_kind(docs)


def test_the_prometheusrule_is_the_export_field_by_field(tmp_path: Path) -> None:
    base = by_kind(render(DEPLOY / "base"))
    pr = base[("PrometheusRule", "llm-oncall")]
    listing = promrules.export(tmp_path, builtin(), fmt="prometheusrule")
    assert listing["files"] == [promrules.PROMETHEUSRULE_FILE, promrules.DASHBOARD_FILE]
    fresh = yaml.safe_load((tmp_path / promrules.PROMETHEUSRULE_FILE).read_text(encoding="utf-8"))
    committed = yaml.safe_load((DEPLOY / "base" / "prometheusrule.yaml").read_text(encoding="utf-8"))
    assert committed == fresh, "deploy/base/prometheusrule.yaml is stale: re-run rules export --format prometheusrule"
    assert pr["spec"] == fresh["spec"] and pr["metadata"]["namespace"] == OWN_NS
    assert set(pr) == {"apiVersion", "kind", "metadata", "spec"} and set(pr["spec"]) == {"groups"}
    names = [g["name"] for g in pr["spec"]["groups"]]
    assert len(names) == len(set(names))
    alerts = 0
    for g in pr["spec"]["groups"]:
        assert set(g) <= GROUP_FIELDS and isinstance(g["name"], str) and g["rules"]
        for r in g["rules"]:
            assert set(r) <= RULE_FIELDS and isinstance(r["expr"], str) and r["expr"]
            assert ("record" in r) != ("alert" in r), r
            if "for" in r:
                assert DURATION.match(r["for"]), r["for"]
            for part in ("labels", "annotations"):
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in (r.get(part) or {}).items())
            assert all(LABEL_NAME.match(k) for k in r.get("labels") or {})
            alerts += "alert" in r
    assert alerts == len(listing["alerts"]) and alerts >= 9
    # what the operator hands Prometheus is a rule file: promtool checks the spec
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(pr["spec"]), encoding="utf-8")
    out = promtool("check", "rules", tmp_path / "spec.yaml")
    assert out.returncode == 0, out.stdout + out.stderr


def test_rules_export_cli_writes_the_object_with_its_labels(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from llm_oncall.cli import app

    res = CliRunner().invoke(app, ["rules", "export", "--out", str(tmp_path), "--format", "prometheusrule",
                                   "--namespace", "monitoring", "--label", "release=kube-prometheus-stack"])
    assert res.exit_code == 0, res.output
    obj = yaml.safe_load((tmp_path / promrules.PROMETHEUSRULE_FILE).read_text(encoding="utf-8"))
    assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["kind"] == "PrometheusRule"
    assert obj["metadata"] == {"name": "llm-oncall", "namespace": "monitoring", "labels": {
        "app.kubernetes.io/name": "llm-oncall", "release": "kube-prometheus-stack"}}
    _validate_part(obj["metadata"], "objectmeta-meta-v1.json")
    assert not (tmp_path / promrules.RULES_FILE).exists()
    bad = CliRunner().invoke(app, ["rules", "export", "--out", str(tmp_path), "--format", "helm"])
    assert bad.exit_code == 2 and "unknown format" in bad.output
    bad = CliRunner().invoke(app, ["rules", "export", "--out", str(tmp_path), "--label", "novalue"])
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.output


def test_production_takes_the_config_and_tokens_from_secrets(tmp_path: Path) -> None:
    docs = by_kind(render(PRODUCTION))
    assert ("ConfigMap", "llm-oncall-config") not in docs
    config, hook = docs[("Secret", "llm-oncall-config")], docs[("Secret", "llm-oncall-webhook")]
    assert config["metadata"]["namespace"] == hook["metadata"]["namespace"] == OWN_NS
    text = base64.b64decode(config["data"]["serve.yaml"]).decode()
    token = base64.b64decode(hook["data"]["token"]).decode().strip()
    (tmp_path / "serve.yaml").write_text(text, encoding="utf-8")
    cfg = load(tmp_path / "serve.yaml")
    assert token in cfg.auth.webhook and cfg.in_cluster and cfg.leader_election.enabled
    assert "CHANGE-ME" not in text  # the overlay's own placeholders, not the base's
    pod = docs[("Deployment", "llm-oncall")]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"] == {"name": "config", "secret": {"secretName": "llm-oncall-config", "defaultMode": 0o440}}
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "config")
    assert pod["containers"][0]["args"][-1] == f"{mount['mountPath']}/serve.yaml"
    # Alertmanager sends the token of the Secret the AlertmanagerConfig names
    amc = docs[("AlertmanagerConfig", "llm-oncall")]["spec"]
    cred = amc["receivers"][0]["webhookConfigs"][0]["httpConfig"]["authorization"]["credentials"]
    assert cred == {"name": "llm-oncall-webhook", "key": "token"}
    assert docs[("PrometheusRule", "llm-oncall")]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
