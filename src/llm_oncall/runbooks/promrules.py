"""Prometheus rules and a Grafana dashboard from the runbooks: `llm-oncall rules export`.

An export form only: the diagnosis engine never evaluates these expressions (it reads Snapshots). Three pieces:

- **recording rules** for the golden signals per pod (`pod:…`) and per fleet (`namespace:…`), each with its
  baseline (`…:…_baseline`: the same quantity over the `baseline` window ending `offset` ago, so a threshold is
  "× the fleet's own past", never a constant tuned to one fleet's size);
- **alerting rules**, one per runbook that has a `prometheus:` block (all but `healthy`), plus one symptom alert
  (TTFT / ITL / error share over the SLOs given at export) for what no runbook explains;
- a **Grafana dashboard** over the recording rules (per-pod golden signals, KV, queue, hit rate, preemptions).

Spelling: expressions are written with the current vLLM names as a live `/metrics` page shows them (counters with
`_total`: `vllm:num_preemptions_total`, not the code name `vllm:num_preemptions` that upstream rule files query).
Each exported expression that names a `vllm:` metric is the `or` of its variants: the `vllm:` spelling, the
underscore-escaped `vllm_` spelling, and the legacy names of older vLLM (signals/catalog.py:
`vllm:gpu_cache_usage_perc`, `vllm:time_per_output_token_seconds`, `vllm:gpu_prefix_cache_*`), left one first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from llm_oncall.evidence import xid
from llm_oncall.runbooks import alertql
from llm_oncall.runbooks.dashboard import DASHBOARD_FILE, dashboard, panel_exprs
from llm_oncall.runbooks.expr import compile_expr
from llm_oncall.runbooks.promql import metric_name, selectors
from llm_oncall.runbooks.schema import Runbook
from llm_oncall.runbooks.thresholds import ERROR_SYMPTOM_SHARE
from llm_oncall.signals.catalog import SIGNALS

DEFAULTS: dict[str, str] = {
    "window": "5m",        # rates and quantiles "now"
    "short": "1m",         # forward progress (engine steps, tokens): a hang shows within it
    "baseline": "1h",      # the baseline window ...
    "offset": "10m",       # ... ending this long ago (so an incident's onset is not its own baseline)
    "slo_ttft_p99": "2",   # seconds
    "slo_itl_p99": "0.2",  # seconds
    "slo_error_ratio": f"{ERROR_SYMPTOM_SHARE:g}",  # the diagnosis' own line (runbooks/thresholds.py)
}
_DURATIONS = ("window", "short", "baseline", "offset")
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]*)\}")
_VLLM_NAME = re.compile(r"(?<![A-Za-z0-9_:])vllm:[A-Za-z0-9_:]*")
_SUFFIXES = ("_bucket", "_count", "_sum")

RULES_FILE = "llm-oncall-rules.yaml"
PROMETHEUSRULE_FILE = "llm-oncall-prometheusrule.yaml"


def _legacy_names() -> dict[str, str]:
    """Current vLLM name → the name older vLLM wrote for the same signal (the catalog's second vLLM spelling)."""
    out: dict[str, str] = {}
    for sig in SIGNALS:
        names = [s.name for s in sig.spellings if s.name.startswith("vllm:")]
        if len(names) >= 2:
            out[names[0]] = names[1]
    return out


LEGACY = _legacy_names()


class ParamError(ValueError):
    pass


def params(overrides: Mapping[str, str | float | None] | None = None) -> dict[str, str]:
    """The export parameters: defaults, then the given overrides (None = keep the default), validated."""
    out = dict(DEFAULTS)
    for k, v in (overrides or {}).items():
        if k not in DEFAULTS:
            raise ParamError(f"unknown parameter {k!r}; known: {', '.join(DEFAULTS)}")
        if v is not None:
            out[k] = str(v)
    for k in _DURATIONS:
        if not _DURATION.match(out[k]):
            raise ParamError(f"{k}: not a Prometheus duration: {out[k]!r}")
    for k in DEFAULTS.keys() - set(_DURATIONS):
        try:
            if not float(out[k]) > 0:
                raise ValueError
        except ValueError:
            raise ParamError(f"{k}: expected a positive number, got {out[k]!r}") from None
    return out


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill `${name}` placeholders; every one must be known."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            raise ParamError(f"unknown placeholder ${{{name}}}")
        return values[name]
    return " ".join(_PLACEHOLDER.sub(sub, template).split())


def _rename(expr: str, legacy: bool, underscore: bool) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(0)
        if legacy:
            base, suffix = name, ""
            for s in _SUFFIXES:
                if name.endswith(s) and name[: -len(s)] in LEGACY:
                    base, suffix = name[: -len(s)], s
            name = LEGACY.get(base, base) + suffix
        return name.replace(":", "_") if underscore else name
    return _VLLM_NAME.sub(one, expr)


def spellings(expr: str) -> list[str]:
    """The variants of an expression, preferred first: current `vllm:`, `vllm_`, legacy `vllm:`, legacy `vllm_`."""
    out: list[str] = []
    for legacy in (False, True):
        for underscore in (False, True):
            v = _rename(expr, legacy, underscore)
            if v not in out:
                out.append(v)
    return out


def all_spellings(expr: str) -> str:
    """One expression matching any spelling: the variants joined by `or` (the left one wins per label set)."""
    vs = spellings(expr)
    return vs[0] if len(vs) == 1 else " or ".join(f"({v})" for v in vs)


# ---- the rules ----------------------------------------------------------------------------------------------------

_P = "namespace, pod"
_N = "namespace"


def _q99(metric: str, by: str, window: str = "[${window}]") -> str:
    return f"histogram_quantile(0.99, sum by ({by}, le) (rate({metric}_bucket{window})))"


def _hit(by: str, window: str = "[${window}]") -> str:
    return (f"sum by ({by}) (rate(vllm:prefix_cache_hits_total{window})) / "
            f"sum by ({by}) (rate(vllm:prefix_cache_queries_total{window}))")


_BASE = "[${baseline}] offset ${offset}"
_OK = '{finished_reason=~"stop|length"}'
_BAD = '{finished_reason=~"abort|error"}'

# (record, expression, what it is). Order matters: a rule may read one recorded before it in the same group.
POD_RULES: tuple[tuple[str, str, str], ...] = (
    ("pod:vllm_ttft_seconds:p99", _q99("vllm:time_to_first_token_seconds", _P), "TTFT p99 (queueing included)"),
    ("pod:vllm_itl_seconds:p99", _q99("vllm:inter_token_latency_seconds", _P), "inter-token latency p99"),
    ("pod:vllm_requests:rate", f"sum by ({_P}) (rate(vllm:request_success_total[${{window}}]))",
     "finished requests per second (every finished_reason)"),
    ("pod:vllm_request_errors:ratio",
     f"sum by ({_P}) (rate(vllm:request_success_total{_BAD}[${{window}}])) / "
     f"sum by ({_P}) (rate(vllm:request_success_total[${{window}}]))",
     "share of finished requests that were aborted or failed"),
    ("pod:vllm_requests_waiting:sum", f"sum by ({_P}) (vllm:num_requests_waiting)", "queued requests"),
    ("pod:vllm_requests_running:sum", f"sum by ({_P}) (vllm:num_requests_running)", "requests in the batch"),
    ("pod:vllm_kv_cache_usage:max", f"max by ({_P}) (vllm:kv_cache_usage_perc)", "KV-cache usage 0–1"),
    ("pod:vllm_prefix_cache_hit:ratio", _hit(_P), "prefix-cache hit rate (tokens hit / tokens looked up)"),
    ("pod:vllm_preemptions:rate", f"sum by ({_P}) (rate(vllm:num_preemptions_total[${{window}}]))",
     "preemptions per second (KV blocks ran out)"),
    ("pod:vllm_generation_tokens:rate", f"sum by ({_P}) (rate(vllm:generation_tokens_total[${{short}}]))",
     "generated tokens per second"),
    ("pod:vllm_engine_steps:increase", f"sum by ({_P}) (increase(vllm:iteration_tokens_total_count[${{short}}]))",
     "engine steps in the short window (the forward-progress heartbeat)"),
    ("pod:vllm_request_arrivals:rate",
     f"sum by ({_P}) (rate(vllm:request_success_total[${{window}}])) + "
     f"sum by ({_P}) (deriv(vllm:num_requests_waiting[${{window}}])) + "
     f"sum by ({_P}) (deriv(vllm:num_requests_running[${{window}}]))",
     "arriving requests per second: finished + growth of running and waiting"),
)

FLEET_RULES: tuple[tuple[str, str, str], ...] = (
    ("namespace:vllm_pods:count", f"count by ({_N}) (pod:vllm_requests_running:sum)", "vLLM pods reporting"),
    ("namespace:vllm_ttft_seconds:p99", _q99("vllm:time_to_first_token_seconds", _N), "fleet TTFT p99"),
    ("namespace:vllm_ttft_seconds:p99_baseline", _q99("vllm:time_to_first_token_seconds", _N, _BASE),
     "fleet TTFT p99 over the baseline window"),
    ("namespace:vllm_itl_seconds:p99", _q99("vllm:inter_token_latency_seconds", _N), "fleet ITL p99"),
    ("namespace:vllm_request_arrivals:rate",
     f"sum by ({_N}) (rate(gateway_requests_received_total[${{window}}])) or "
     f"sum by ({_N}) (pod:vllm_request_arrivals:rate)",
     "arriving requests per second (the gateway's count when there is one)"),
    ("namespace:vllm_request_arrivals:rate_baseline",
     f"sum by ({_N}) (rate(gateway_requests_received_total{_BASE})) or "
     f"sum by ({_N}) (rate(vllm:request_success_total{_BASE}))",
     "arrivals over the baseline window (steady state: arrivals = finished)"),
    ("namespace:vllm_requests_succeeded:rate",
     f"sum by ({_N}) (rate(vllm:request_success_total{_OK}[${{window}}]))", "requests finished stop|length"),
    ("namespace:vllm_requests_succeeded:rate_baseline",
     f"sum by ({_N}) (rate(vllm:request_success_total{_OK}{_BASE}))", "successes over the baseline window"),
    ("namespace:vllm_request_errors:ratio",
     f"sum by ({_N}) (rate(vllm:request_success_total{_BAD}[${{window}}])) / "
     f"sum by ({_N}) (rate(vllm:request_success_total[${{window}}]))", "fleet abort/error share"),
    ("namespace:vllm_requests_waiting:avg", f"avg by ({_N}) (pod:vllm_requests_waiting:sum)", "waiting per pod"),
    ("namespace:vllm_kv_cache_usage:max", f"max by ({_N}) (pod:vllm_kv_cache_usage:max)", "fullest pod's KV"),
    ("namespace:vllm_prefix_cache_hit:ratio", _hit(_N), "fleet prefix-cache hit rate"),
    ("namespace:vllm_prefix_cache_hit:ratio_baseline", _hit(_N, _BASE), "hit rate over the baseline window"),
    ("namespace:vllm_prompt_tokens:p99", _q99("vllm:request_prompt_tokens", _N), "prompt length p99 (tokens)"),
    ("namespace:vllm_prompt_tokens:p99_baseline", _q99("vllm:request_prompt_tokens", _N, _BASE),
     "prompt length p99 over the baseline window"),
    ("namespace:vllm_preemptions:rate", f"sum by ({_N}) (pod:vllm_preemptions:rate)", "fleet preemptions/s"),
)

GROUP_POD = "llm-oncall-vllm-pod"
GROUP_FLEET = "llm-oncall-vllm-fleet"
GROUP_ALERTS = "llm-oncall-alerts"


@dataclass(frozen=True)
class Rule:
    group: str
    kind: Literal["record", "alert"]
    name: str
    canonical: str
    """The rendered expression in the current `vllm:` spelling only (what the checks take apart)."""
    expr: str
    """The exported expression: every spelling."""
    hold: str = "0s"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    incident: str | None = None
    scope: tuple[str, ...] = ()
    help: str = ""

    def to_yaml(self) -> dict[str, Any]:
        if self.kind == "record":
            return {"record": self.name, "expr": self.expr}
        out: dict[str, Any] = {"alert": self.name, "expr": self.expr}
        if self.hold != "0s":
            out["for"] = self.hold
        out["labels"] = dict(self.labels)
        out["annotations"] = dict(self.annotations)
        return out


def alert_name(incident: str) -> str:
    return "LlmOncall" + "".join(part.capitalize() for part in incident.split("-"))


def knowledge() -> dict[str, str]:
    """Placeholders filled from the knowledge catalogues, not by the user: the GPU-memory Xids (evidence/catalog)."""
    codes = sorted(code for code, e in xid.catalog().items() if e.category == "gpu-memory")
    return {"xid_gpu_memory": " or ".join(f"DCGM_FI_DEV_XID_ERRORS == {c}" for c in codes)}


def alert_rule(rb: Runbook, values: Mapping[str, str] | None = None) -> Rule:
    """The runbook's exported alert (`values`: the export parameters, the defaults if None)."""
    values = values if values is not None else params()
    pa = rb.prometheus
    assert pa is not None and rb.alert is not None
    condition = alertql.translate(compile_expr(rb.alert))
    canonical = render(condition.expr, {**values, **knowledge()})
    scope = ", ".join(f"{{{{ $labels.{s} }}}}" for s in condition.scope)
    return Rule(
        GROUP_ALERTS, "alert", alert_name(rb.id), canonical, all_spellings(canonical), pa.hold,
        labels={"severity": pa.severity, "incident": rb.id, "source": "llm-oncall"},
        annotations={"summary": f"{rb.title.en} ({scope})", "description": rb.symptom.en,
                     "runbook": f"llm-oncall runbooks show {rb.id}"},
        incident=rb.id, scope=condition.scope)


SYMPTOM_ALERT = "LlmOncallSymptom"
_SYMPTOM = ("namespace:vllm_ttft_seconds:p99 > ${slo_ttft_p99} or namespace:vllm_itl_seconds:p99 > ${slo_itl_p99} "
            "or namespace:vllm_request_errors:ratio > ${slo_error_ratio}")


def _symptom_alert(values: Mapping[str, str]) -> Rule:
    """A user-facing symptom over its SLO, whichever runbook explains it (or none: `unknown`): it wakes the
    autopilot, whose diagnosis names the incident."""
    canonical = render(_SYMPTOM, values)
    return Rule(GROUP_ALERTS, "alert", SYMPTOM_ALERT, canonical, canonical, "5m",
                labels={"severity": "page", "incident": "unknown", "source": "llm-oncall"},
                annotations={"summary": "vLLM fleet over its SLO ({{ $labels.namespace }})",
                             "description": f"TTFT p99 > {values['slo_ttft_p99']} s, ITL p99 > "
                                            f"{values['slo_itl_p99']} s or abort/error share > "
                                            f"{values['slo_error_ratio']}: llm-oncall diagnoses which runbook "
                                            "applies.", "runbook": "llm-oncall runbooks list"},
                incident="unknown", scope=("namespace",))


def build(runbooks: Iterable[Runbook], overrides: Mapping[str, str | float | None] | None = None) -> list[Rule]:
    """Recording rules (pod, then fleet) and one alert per runbook with a PromQL form, in triage order."""
    values = params(overrides)
    rules: list[Rule] = []
    for group, table in ((GROUP_POD, POD_RULES), (GROUP_FLEET, FLEET_RULES)):
        for name, template, what in table:
            canonical = render(template, values)
            rules.append(Rule(group, "record", name, canonical, all_spellings(canonical), help=what))
    books = sorted((rb for rb in runbooks if rb.prometheus is not None), key=lambda rb: (rb.priority, rb.id))
    rules += [alert_rule(rb, values) for rb in books]
    rules.append(_symptom_alert(values))
    return rules


def rule_groups(rules: Sequence[Rule]) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rules:
        groups.setdefault(r.group, []).append(r.to_yaml())
    return {"groups": [{"name": g, "rules": rs} for g, rs in groups.items()]}


# ---- export -------------------------------------------------------------------------------------------------------

def prometheus_rule(rules: Sequence[Rule], name: str = "llm-oncall", namespace: str = "llm-oncall",
                    labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The rule groups as a prometheus-operator `PrometheusRule` (monitoring.coreos.com/v1): the same groups under
    `spec`, so `promtool check rules` on its spec checks what the operator loads. `labels` are what the
    Prometheus' `ruleSelector` matches (e.g. `release: kube-prometheus-stack`)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "labels": {"app.kubernetes.io/name": "llm-oncall", **dict(labels or {})}}
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": meta,
            "spec": rule_groups(rules)}


FORMATS = ("prometheus", "prometheusrule")


def export(out: Path, runbooks: Iterable[Runbook],
           overrides: Mapping[str, str | float | None] | None = None, fmt: str = "prometheus",
           namespace: str = "llm-oncall", labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Write the rule file (`fmt` prometheus: a plain rule file; prometheusrule: the PrometheusRule object) and the
    dashboard under `out`; the listing (what `rules export --json` prints)."""
    if fmt not in FORMATS:
        raise ParamError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    values = params(overrides)
    rules = build(runbooks, values)
    board = dashboard()
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "prometheusrule":
        rules_file = PROMETHEUSRULE_FILE
        head = ("# Generated by `llm-oncall rules export --format prometheusrule`; prometheus-operator loads it "
                "(promtool checks its spec).\n")
        body: dict[str, Any] = prometheus_rule(rules, namespace=namespace, labels=labels)
    else:
        rules_file = RULES_FILE
        head = "# Generated by `llm-oncall rules export`; check with `promtool check rules`.\n"
        body = rule_groups(rules)
    text = head + yaml.safe_dump(body, sort_keys=False, width=100000, allow_unicode=True)
    (out / rules_file).write_text(text, encoding="utf-8")
    (out / DASHBOARD_FILE).write_text(json.dumps(board, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return listing(rules, board, values, rules_file)


def listing(rules: Sequence[Rule], board: Mapping[str, Any], values: Mapping[str, str],
            rules_file: str = RULES_FILE) -> dict[str, Any]:
    return {
        "files": [rules_file, DASHBOARD_FILE],
        "params": dict(values),
        "groups": sorted({r.group for r in rules}, key=[r.group for r in rules].index),
        "recording_rules": [r.name for r in rules if r.kind == "record"],
        "alerts": [{"alert": r.name, "incident": r.incident, "for": r.hold, "severity": r.labels["severity"],
                    "scope": list(r.scope)} for r in rules if r.kind == "alert"],
        "dashboard": {"uid": board["uid"], "panels": [p["title"] for p in board["panels"]]},
    }


__all__ = ["DASHBOARD_FILE", "DEFAULTS", "FORMATS", "LEGACY", "PROMETHEUSRULE_FILE", "RULES_FILE", "ParamError",
           "Rule", "alert_rule", "all_spellings", "build", "dashboard", "export", "knowledge", "listing", "metric_name",
           "panel_exprs", "params",
           "prometheus_rule", "render", "rule_groups", "selectors", "spellings"]
