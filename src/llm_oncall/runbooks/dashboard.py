"""The Grafana dashboard of `llm-oncall rules export`: per-pod golden signals over the recording rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DASHBOARD_FILE = "llm-oncall-dashboard.json"
DASHBOARD_UID = "llm-oncall-vllm"

_SEL = '{namespace=~"$namespace", pod=~"$pod"}'
PANELS: tuple[tuple[str, str, str, str], ...] = (
    # (title, expression, unit, legend)
    ("TTFT p99 per pod", f"pod:vllm_ttft_seconds:p99{_SEL}", "s", "{{pod}}"),
    ("ITL p99 per pod", f"pod:vllm_itl_seconds:p99{_SEL}", "s", "{{pod}}"),
    ("Request rate per pod (finished/s)", f"pod:vllm_requests:rate{_SEL}", "reqps", "{{pod}}"),
    ("Error ratio per pod (abort + error)", f"pod:vllm_request_errors:ratio{_SEL}", "percentunit", "{{pod}}"),
    ("Waiting requests per pod", f"pod:vllm_requests_waiting:sum{_SEL}", "short", "{{pod}}"),
    ("Running requests per pod", f"pod:vllm_requests_running:sum{_SEL}", "short", "{{pod}}"),
    ("KV-cache usage per pod", f"pod:vllm_kv_cache_usage:max{_SEL}", "percentunit", "{{pod}}"),
    ("Prefix-cache hit rate per pod", f"pod:vllm_prefix_cache_hit:ratio{_SEL}", "percentunit", "{{pod}}"),
    ("Preemptions per pod (/s)", f"pod:vllm_preemptions:rate{_SEL}", "short", "{{pod}}"),
    ("Generated tokens per pod (/s)", f"pod:vllm_generation_tokens:rate{_SEL}", "short", "{{pod}}"),
    ("Fleet TTFT p99 vs baseline", 'namespace:vllm_ttft_seconds:p99{namespace=~"$namespace"}', "s",
     "{{namespace}} now"),
    ("Fleet arrivals vs baseline (/s)", 'namespace:vllm_request_arrivals:rate{namespace=~"$namespace"}', "reqps",
     "{{namespace}} now"),
)
# Second targets of the fleet panels: their baselines.
_PANEL_BASELINES = {
    "Fleet TTFT p99 vs baseline": 'namespace:vllm_ttft_seconds:p99_baseline{namespace=~"$namespace"}',
    "Fleet arrivals vs baseline (/s)": 'namespace:vllm_request_arrivals:rate_baseline{namespace=~"$namespace"}',
}
_DS = {"type": "prometheus", "uid": "${datasource}"}


def dashboard() -> dict[str, Any]:
    """A Grafana dashboard (schemaVersion 39) over the recording rules, with namespace and pod variables."""
    panels: list[dict[str, Any]] = []
    for i, (title, expr, unit, legend) in enumerate(PANELS):
        targets = [{"refId": "A", "datasource": _DS, "expr": expr, "legendFormat": legend}]
        if title in _PANEL_BASELINES:
            targets.append({"refId": "B", "datasource": _DS, "expr": _PANEL_BASELINES[title],
                            "legendFormat": "{{namespace}} baseline"})
        panels.append({
            "id": i + 1, "type": "timeseries", "title": title, "datasource": _DS,
            "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}},
            "targets": targets,
        })

    def var(name: str, query: str) -> dict[str, Any]:
        return {"name": name, "label": name, "type": "query", "datasource": _DS, "query": query,
                "definition": query, "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*",
                "current": {"text": "All", "value": "$__all"}, "sort": 1}

    return {
        "uid": DASHBOARD_UID, "title": "vLLM fleet (llm-oncall)", "tags": ["vllm", "llm-oncall"],
        "timezone": "utc", "schemaVersion": 39, "version": 1, "editable": True, "refresh": "30s",
        "time": {"from": "now-3h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0},
            var("namespace", "label_values(pod:vllm_requests_running:sum, namespace)"),
            var("pod", 'label_values(pod:vllm_requests_running:sum{namespace=~"$namespace"}, pod)'),
        ]},
        "annotations": {"list": [{"name": "llm-oncall alerts", "datasource": _DS, "enable": True,
                                  "iconColor": "red", "expr": 'ALERTS{source="llm-oncall", alertstate="firing"}',
                                  "titleFormat": "{{alertname}}", "textFormat": "{{incident}} {{namespace}}"}]},
        "panels": panels,
    }


def panel_exprs(board: Mapping[str, Any], namespace: str = ".*", pod: str = ".*") -> list[str]:
    """Every panel query (and the annotation query) with the dashboard variables filled in."""
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in board["annotations"]["list"]]
    return [e.replace("$namespace", namespace).replace("$pod", pod) for e in exprs]
