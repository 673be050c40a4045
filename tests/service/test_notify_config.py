"""The `notify` config is strict: unknown keys refused by name, URLs validated, PagerDuty's routing key required and
read from a file or the environment like other secrets, vendor-only keys refused elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.service.conftest import write_config

from llm_oncall.service.config import ConfigError, NotifyConfig, load

KEY = "0123456789abcdef0123456789ABCDEF"


def config_error(tmp_path: Path, notify: list[dict[str, Any]]) -> str:
    with pytest.raises(ConfigError) as exc:
        load(write_config(tmp_path, notify=notify))
    return str(exc.value)


def test_unknown_key_is_refused_with_its_name(tmp_path: Path) -> None:
    msg = config_error(tmp_path, [{"kind": "slack", "url": "https://hooks.slack.com/x", "chanel": "#oncall"}])
    assert "notify.0.chanel" in msg and "Extra inputs are not permitted" in msg


@pytest.mark.parametrize("entry, says", [
    ({"kind": "slack", "url": "hooks.slack.com/x"}, "http:// or https:// URL"),
    ({"kind": "slack", "url": "https:///x"}, "with a host"),
    ({"kind": "teams", "url": "https://example.com/a b"}, "spaces or control characters"),
    ({"kind": "mattermost", "url": "https://example.com:99999/x"}, "invalid port"),
    ({"kind": "slack"}, "kind slack needs url"),
    ({"kind": "pagerduty"}, "needs routing_key"),
    ({"kind": "pagerduty", "routing_key": "short"}, "32-character integration key"),
    ({"kind": "slack", "url": "https://h.example/x", "routing_key": KEY}, "routing_key goes with kind pagerduty"),
    ({"kind": "slack", "url": "https://h.example/x", "severities": {"page": "critical"}}, "severities goes with"),
    ({"kind": "pagerduty", "routing_key": KEY, "severities": {"page": "sev1"}}, "notify.0.severities.page"),
    ({"kind": "slack", "url": "https://h.example/x", "console_url": "https://c.example/?a=1"}, "without ?query"),
    ({"kind": "slack", "url": "https://h.example/x", "events": ["paged"]}, "notify.0.events.0"),
    ({"kind": "slack", "url": "https://h.example/x", "timeout": "2m"}, "at most 60s"),
    ({"kind": "sms", "url": "https://h.example/x"}, "notify.0.kind"),
    ({"kind": "pagerduty", "routing_key": {"env": "LLM_ONCALL_UNSET_KEY"}}, "LLM_ONCALL_UNSET_KEY is not set"),
    ({"kind": "pagerduty", "routing_key": {"vault": "x"}}, "{file: PATH} or {env: NAME}"),
])
def test_invalid_entries_say_what_is_wrong(tmp_path: Path, entry: dict[str, Any], says: str) -> None:
    assert says in config_error(tmp_path, [entry])


def test_routing_key_and_url_from_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "pd-key"
    secret.write_text(KEY + "\n")
    monkeypatch.setenv("SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/T0/B0/secret")
    cfg = load(write_config(tmp_path, notify=[
        {"kind": "pagerduty", "routing_key": {"file": str(secret)}, "console_url": "https://oncall.example.com/"},
        {"kind": "slack", "url": {"env": "SLACK_WEBHOOK_URL"}, "timeout": "2500ms", "events": ["opened", "plan"]}]))
    pd, sl = cfg.notify
    assert pd.routing_key is not None and pd.routing_key.get_secret_value() == KEY
    assert KEY not in repr(pd) and pd.endpoint == "https://events.pagerduty.com/v2/enqueue"
    assert pd.console_url == "https://oncall.example.com"
    assert sl.endpoint.endswith("/secret") and sl.timeout == 2.5 and sl.events == ["opened", "plan"]
    assert sl.label == "slack https://hooks.slack.com"  # what logs and the timeline show: no token


def test_the_design_example_still_loads(tmp_path: Path) -> None:
    path = write_config(tmp_path, notify=[{"kind": "webhook", "url": "http://127.0.0.1:9/x"},
                                          {"kind": "slack", "url": "https://hooks.slack.com/x"}])
    assert [t.kind for t in load(path).notify] == ["webhook", "slack"]
    assert yaml.safe_load(path.read_text())["notify"][0]["kind"] == "webhook"


def test_model_directly() -> None:
    t = NotifyConfig.model_validate({"kind": "teams", "url": "https://x.webhook.office.com/webhookb2/abc"})
    assert t.retries == 5 and t.timeout == 5.0 and t.queue_size == 1000
