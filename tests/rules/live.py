"""Evaluate the exported rules in a real Prometheus: every recording rule and every selector inside every alert
must return series (an expression that matches nothing, like upstream's `rate(vllm:num_preemptions[5m])`, fails).

Shared by the simulator test (tests/rules/test_live_sim.py) and the real-engine tier
(tests/real_engine/test_rules_real.py). The rules are exported with windows scaled to a test's minute
(`LIVE_PARAMS`): the expressions are the ones a user gets, only `[5m]`/`[1h] offset 10m` become seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from llm_oncall.runbooks import promrules
from llm_oncall.runbooks.loader import builtin

LIVE_PARAMS = {"window": "20s", "short": "10s", "baseline": "30s", "offset": "15s"}


def export_for_test(out: Path) -> list[promrules.Rule]:
    promrules.export(out, builtin(), LIVE_PARAMS)
    return promrules.build(builtin(), LIVE_PARAMS)


def rule_files_config(out: Path) -> str:
    """The `rule_files:` stanza for testkit.run_prometheus (it appends the given text to the config)."""
    return f"rule_files: ['{out / promrules.RULES_FILE}']\n"


def query(url: str, expr: str) -> list[dict[str, Any]]:
    """The instant vector of `expr`; raises on a PromQL error (an expression Prometheus refuses)."""
    r = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=20)
    body = r.json()
    if body.get("status") != "success":
        raise AssertionError(f"Prometheus refused {expr!r}: {body.get('error')}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@dataclass
class Coverage:
    empty_rules: list[str] = field(default_factory=list)
    empty_selectors: list[tuple[str, str]] = field(default_factory=list)
    empty_panels: list[str] = field(default_factory=list)
    checked_selectors: int = 0
    firing: list[str] = field(default_factory=list)

    def ok(self) -> bool:
        return not (self.empty_rules or self.empty_selectors or self.empty_panels)


def coverage(url: str, rules: Iterable[promrules.Rule], want: Callable[[str], bool],
             exempt: frozenset[str] = frozenset()) -> Coverage:
    """What returns nothing right now: recording rules, the selectors inside each rule and alert (those `want`
    keeps, by metric name; `exempt` selectors are emitted only during their incident), and the dashboard's
    panels."""
    cov = Coverage()
    rules = list(rules)
    for r in rules:
        if r.kind == "record":
            if not query(url, r.name):
                cov.empty_rules.append(r.name)
        else:
            query(url, r.expr)  # the whole alert must evaluate (it should not fire on a healthy fleet)
        for sel in promrules.selectors(r.canonical):
            if sel in exempt or not want(promrules.metric_name(sel)):
                continue
            cov.checked_selectors += 1
            if not query(url, f"count({sel})"):
                cov.empty_selectors.append((r.name, sel))
    for expr in promrules.panel_exprs(promrules.dashboard()):
        if "ALERTS" not in expr and not query(url, expr):
            cov.empty_panels.append(expr)
    cov.firing = sorted({s["metric"].get("alertname", "") for s in query(url, 'ALERTS{source="llm-oncall"}')})
    return cov


def recorded_or(prefix: str, rules: Iterable[promrules.Rule]) -> Callable[[str], bool]:
    """`want` for `coverage`: metric names starting with `prefix`, and the recorded names."""
    recorded = {r.name for r in rules if r.kind == "record"}
    return lambda name: name.startswith(prefix) or name in recorded


def wait_for_coverage(url: str, rules: Iterable[promrules.Rule], want: Callable[[str], bool],
                      exempt: frozenset[str] = frozenset(), timeout_s: float = 240.0,
                      poll_s: float = 5.0) -> Coverage:
    """Poll until everything returns series (windows fill over the first half minute), bounded by a timeout;
    the last coverage either way."""
    deadline = time.monotonic() + timeout_s
    rules = list(rules)
    while True:
        cov = coverage(url, rules, want, exempt)
        if cov.ok() or time.monotonic() > deadline:
            return cov
        time.sleep(poll_s)
