"""`rules export`: Prometheus recording and alerting rules and a Grafana dashboard, generated from the runbooks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from llm_oncall.cli.common import JsonOpt, RunbooksOpt, console, fail, print_json, registry
from llm_oncall.runbooks import promrules

app = typer.Typer(help="Prometheus rules and a Grafana dashboard from the runbooks.", no_args_is_help=True)


@app.command("export")
def rules_export(
    out: Annotated[Path, typer.Option("--out", help="Directory to write the rule file and the dashboard into.")],
    slo_ttft_p99: Annotated[float | None, typer.Option("--slo-ttft-p99", help="TTFT p99 SLO in seconds.")] = None,
    slo_itl_p99: Annotated[float | None, typer.Option("--slo-itl-p99", help="ITL p99 SLO in seconds.")] = None,
    slo_error_ratio: Annotated[float | None, typer.Option("--slo-error-share",
                                                          help="Abort/error share SLO (0–1).")] = None,
    window: Annotated[str | None, typer.Option("--window", help="Rate/quantile window (default 5m).")] = None,
    short: Annotated[str | None, typer.Option("--short", help="Forward-progress window (default 1m).")] = None,
    baseline: Annotated[str | None, typer.Option("--baseline", help="Baseline window (default 1h).")] = None,
    offset: Annotated[str | None, typer.Option("--offset", help="How long ago the baseline ends (default 10m).")
                      ] = None,
    fmt: Annotated[str, typer.Option("--format", help="prometheus: a rule file (promtool check rules); "
                                     "prometheusrule: a prometheus-operator PrometheusRule object.")] = "prometheus",
    namespace: Annotated[str, typer.Option("--namespace", help="The PrometheusRule's namespace.")] = "llm-oncall",
    label: Annotated[list[str], typer.Option("--label", help="KEY=VALUE on the PrometheusRule (what the "
                                             "Prometheus' ruleSelector matches); repeatable.")] = [],  # noqa: B006
    runbooks: RunbooksOpt = [],  # noqa: B006
    as_json: JsonOpt = False,
) -> None:
    """Write llm-oncall-rules.yaml (recording + alerting rules; with --format prometheusrule
    llm-oncall-prometheusrule.yaml, the PrometheusRule object) and llm-oncall-dashboard.json into --out."""
    reg = registry(runbooks)
    overrides: dict[str, str | float | None] = {
        "slo_ttft_p99": slo_ttft_p99, "slo_itl_p99": slo_itl_p99, "slo_error_ratio": slo_error_ratio,
        "window": window, "short": short, "baseline": baseline, "offset": offset}
    labels: dict[str, str] = {}
    for item in label:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise fail(f"--label {item!r}: expected KEY=VALUE")
        labels[key] = value
    try:
        listing = promrules.export(out, reg.in_triage_order(), overrides, fmt=fmt, namespace=namespace,
                                   labels=labels)
    except promrules.ParamError as exc:
        raise fail(str(exc)) from exc
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc}") from exc
    listing["out"] = str(out)
    if as_json:
        print_json(listing)
        return
    console.print(f"wrote {out / listing['files'][0]}: {len(listing['recording_rules'])} recording rules, "
                  f"{len(listing['alerts'])} alerts")
    for a in listing["alerts"]:
        typer.echo(f"  {a['alert']:<32} {a['incident']:<24} for {a['for']:<4} {a['severity']:<8} "
                   f"by {', '.join(a['scope'])}")
    console.print(f"wrote {out / promrules.DASHBOARD_FILE}: {len(listing['dashboard']['panels'])} panels")
    if fmt == "prometheus":
        console.print(f"check: promtool check rules {out / promrules.RULES_FILE}")
    else:
        console.print(f"apply: kubectl apply -f {out / promrules.PROMETHEUSRULE_FILE}")
