"""Tokens and the kubeconfig from `{file: PATH}` / `{env: NAME}` (a mounted Secret), and a fleet selected by labels
next to its namespace: clear errors on bad input, label keys and values validated before they reach the API."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.service.conftest import APPROVE, WEBHOOK, write_config

from llm_oncall.actions import plan as planner
from llm_oncall.actions.kube import Kube
from llm_oncall.actions.model import UnsafeName, parse_selector
from llm_oncall.service.config import ConfigError, load
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster

API_TOKEN = "api-token-from-a-secret-0123456789"
KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": {"server": "https://k:6443"}}],
              "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x",
              "users": [{"name": "u", "user": {"token": "t"}}]}


def _error(tmp_path: Path, **over: Any) -> str:
    with pytest.raises(ConfigError) as exc:
        load(write_config(tmp_path, **over))
    return str(exc.value)


def test_tokens_from_a_file_an_env_variable_or_a_file_of_tokens(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "api-token").write_text(API_TOKEN + "\n")
    (tmp_path / "approvers").write_text(f"{APPROVE}\n\napprover-two-0123456789\n")
    monkeypatch.setenv("LLM_ONCALL_WEBHOOK_TOKEN", WEBHOOK)
    cfg = load(write_config(tmp_path, auth={"webhook": [{"env": "LLM_ONCALL_WEBHOOK_TOKEN"}],
                                            "api": [{"file": str(tmp_path / "api-token")}],
                                            "approve": {"file": str(tmp_path / "approvers")}}))
    assert cfg.auth.webhook == [WEBHOOK] and cfg.auth.api == [API_TOKEN]
    assert cfg.auth.approve == [APPROVE, "approver-two-0123456789"]


@pytest.mark.parametrize(("auth", "says"), [
    ({"api": [{"env": "NOT_SET_ANYWHERE_42"}]}, "environment variable NOT_SET_ANYWHERE_42 is not set"),
    ({"api": [{"file": "/nonexistent/token"}]}, "cannot read /nonexistent/token"),
    ({"api": [{"env": "1BAD"}]}, "not an environment variable name"),
    ({"api": [{"vault": "x"}]}, "{file: PATH} or {env: NAME}"),
    ({"api": ["short"]}, "≥ 16 characters"),
])
def test_bad_token_references_say_what_is_wrong(tmp_path: Path, auth: dict[str, Any], says: str) -> None:
    msg = _error(tmp_path, auth={"webhook": [WEBHOOK], "approve": [APPROVE], **auth})
    assert "auth.api" in msg and says in msg, msg


def test_kubeconfig_from_a_mounted_secret_or_an_env_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kc").write_text(yaml.safe_dump(KUBECONFIG))
    cfg = load(write_config(tmp_path, kubeconfig={"file": "kc"}))  # relative to the config file
    assert cfg.kubeconfig == tmp_path / "kc"
    monkeypatch.setenv("KUBECONFIG_YAML", yaml.safe_dump(KUBECONFIG))
    cfg = load(write_config(tmp_path, kubeconfig={"env": "KUBECONFIG_YAML"}))
    assert cfg.kubeconfig is not None and yaml.safe_load(cfg.kubeconfig.read_text()) == KUBECONFIG
    assert stat.S_IMODE(cfg.kubeconfig.stat().st_mode) == 0o600  # only this user reads the credentials


def test_bad_kubeconfigs_are_refused_without_quoting_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "not-kc").write_text("token: s3cr3t-value\n")
    msg = _error(tmp_path, kubeconfig={"file": "not-kc"})
    assert "no clusters/contexts" in msg and "s3cr3t" not in msg
    monkeypatch.setenv("EMPTY_KC", "")
    assert "is empty" in _error(tmp_path, kubeconfig={"env": "EMPTY_KC"})
    assert "cannot read" in _error(tmp_path, kubeconfig={"file": "missing"})


def test_label_selector_is_validated(tmp_path: Path) -> None:
    cfg = load(write_config(tmp_path, namespace="llm", label_selector="app.kubernetes.io/name=vllm, model==llama"))
    assert cfg.selector == {"app.kubernetes.io/name": "vllm", "model": "llama"}
    for bad, says in (("app in (a,b)", "only equality"), ("app!=x", "only equality"), ("app", "not key=value"),
                      ("app=a b", "not a valid Kubernetes label value"), ("a/b/c=x", "label key"),
                      ("app=x,", "stray comma"), ("app=x&y=z", "label value"), ("app=../x", "label value")):
        assert says in _error(tmp_path, label_selector=bad), bad


@pytest.mark.parametrize("bad", ["x=" + "a" * 64, "-x=1", "x=1,x=2", "x=$(reboot)", "x=a;b"])
def test_parse_selector_refuses(bad: str) -> None:
    with pytest.raises(UnsafeName):
        parse_selector(bad)


def test_the_fleet_is_what_the_selector_selects(tmp_path: Path) -> None:
    cfg, fault = scenario("gpu-ecc", 7)
    server = KubeApiServer(KubeCluster(Fleet(cfg, seed=7, fault=fault))).start()
    try:
        kube = Kube(server.write_kubeconfig(tmp_path / "kc"))
        dep = kube.list("Deployment", cfg.namespace)[0]
        labels = dep["metadata"].get("labels") or {}
        key, value = next(iter(sorted(labels.items())))
        scope = planner.Scope(namespace=cfg.namespace, selector={key: value})
        assert planner._workload(kube, scope, {}) is not None  # selected
        scope = planner.Scope(namespace=cfg.namespace, selector={key: value + "-other"})
        assert planner._workload(kube, scope, {}) is None  # another fleet's label: nothing of ours is acted on
        with pytest.raises(UnsafeName):
            kube.list("Pod", cfg.namespace, {"app": "x,y=z"})  # never reaches the labelSelector query
    finally:
        server.stop()


def test_act_plan_refuses_a_bad_label_selector_before_anything_else() -> None:
    from typer.testing import CliRunner

    from llm_oncall.cli import app

    r = CliRunner().invoke(app, ["act", "plan", "--replay", "/nonexistent", "--label-selector", "app!=x"])
    assert r.exit_code == 2 and "only equality" in r.output
