"""`act plan` and `act apply`: the emergency fix for the current diagnosis, dry-run against the cluster, then
executed only for the actions a human approves (or the policy allows in auto mode)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from llm_oncall.actions.model import target_ref
from llm_oncall.cli import common
from llm_oncall.cli.common import (
    DcgmOpt,
    JsonOpt,
    RunbooksOpt,
    TargetOpt,
    TargetsFileOpt,
    console,
    err_console,
    fail,
    print_json,
    seconds,
)
from llm_oncall.termtable import Column, FitTable

app = typer.Typer(help="Plan and apply guarded emergency fixes through the Kubernetes API.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)

KubeconfigOpt = Annotated[Path | None, typer.Option("--kubeconfig", help="Kubeconfig (default: $KUBECONFIG, "
                                                                          "~/.kube/config, in-cluster).")]
DbOpt = Annotated[Path, typer.Option("--db", help="SQLite store (plans, idempotency keys, cooldowns, audit).")]
PolicyOpt = Annotated[Path | None, typer.Option("--policy", help="Policy YAML (auto-mode kinds, caps, cooldowns).")]


@app.callback()
def _group() -> None:
    """Plan and apply guarded emergency fixes through the Kubernetes API."""


def _policy(path: Path | None) -> Any:
    from llm_oncall.actions.guard import Policy

    if path is None:
        return Policy()
    try:
        return Policy.load(path)
    except (OSError, ValueError) as exc:
        raise fail(f"--policy {path}: {exc}") from exc


def _kube(kubeconfig: Path | None, namespace: str | None) -> Any:
    from llm_oncall.actions.kube import Kube

    try:
        return Kube(kubeconfig, namespace)
    except Exception as exc:  # lightkube's ConfigError and file errors alike: a usage error
        raise fail(f"cannot load the kubeconfig: {exc}") from exc


@app.command("plan")
def plan_cmd(
    replay: Annotated[Path | None, typer.Option(help="A capture bundle directory.")] = None,
    target: TargetOpt = [],  # noqa: B006 — Typer reads the default
    dcgm: DcgmOpt = [],  # noqa: B006
    targets_file: TargetsFileOpt = [],  # noqa: B006
    prometheus: Annotated[str | None, typer.Option(help="Prometheus base URL.")] = None,
    selector: Annotated[str, typer.Option(help='Label matchers for Prometheus, e.g. job="vllm".')] = "",
    kubeconfig: KubeconfigOpt = None,
    namespace: Annotated[str | None, typer.Option(help="Namespace of the model server.")] = None,
    label_selector: Annotated[str | None, typer.Option(
        "--label-selector", help="The fleet's Kubernetes labels in its namespace (key=value,…): only matching "
                                 "workloads and pods are acted on.")] = None,
    interval: Annotated[float, typer.Option(help="Between scrapes (live): 5s, or seconds.", parser=seconds)] = 5.0,
    samples: Annotated[int, typer.Option(help="Scrapes to take (live).", min=2)] = 4,
    db: DbOpt = Path("llm-oncall.db"),
    policy: PolicyOpt = None,
    mode: Annotated[str, typer.Option(help="propose | approve | auto (what the guard column says).")] = "propose",
    out: Annotated[Path | None, typer.Option(help="Also write the plan JSON here (for act apply --plan).")] = None,
    runbooks: RunbooksOpt = [],  # noqa: B006
    simulate: Annotated[bool, typer.Option(
        "--simulate", help="Try each action, and doing nothing, on a twin of the fleet first (a simulated fleet "
                           "calibrated from this telemetry, the diagnosed fault reproduced): predicted seconds to "
                           "recovery, SLO minutes and rank on each action (docs/actions.md, Twin).")] = False,
    horizon: Annotated[float, typer.Option(
        "--horizon", help="With --simulate: simulated seconds each candidate runs after its action.",
        parser=seconds)] = 480.0,
    model_load: Annotated[float | None, typer.Option(
        "--model-load", help="With --simulate: a pod's start to Ready in this fleet (default: 90 s, an 8B model; "
                             "tensor-parallel groups +25 % per extra rank).", parser=seconds)] = None,
    as_json: JsonOpt = False,
) -> None:
    """The plan for the current diagnosis, every action dry-run on the cluster (server-side); changes nothing."""
    from llm_oncall.actions.kube import KubeError
    from llm_oncall.actions.ledger import Ledger
    from llm_oncall.actions.run import Actuator
    from llm_oncall.cli.diagnose import REPLAY_SCRAPES_KEPT, _live, _replay, _targets
    from llm_oncall.diagnosis.autopilot import Autopilot
    from llm_oncall.signals.bundle import BundleError, ReplaySource
    from llm_oncall.signals.prometheus import PrometheusError, PrometheusSource

    if mode not in ("propose", "approve", "auto"):
        raise fail("--mode is propose, approve or auto")
    from llm_oncall.actions.model import UnsafeName, parse_selector

    try:
        fleet_labels = parse_selector(label_selector) if label_selector is not None else {}
    except UnsafeName as exc:
        raise fail(f"--label-selector: {exc}") from exc
    live = bool(target or targets_file)
    if sum(x for x in (live, prometheus is not None, replay is not None)) != 1:
        raise fail("give exactly one of --target/--targets-file, --prometheus or --replay")
    registry = common.registry(runbooks)
    try:
        if replay is not None:
            rs = ReplaySource(replay)
            pilot = Autopilot(rs.interval_s, registry, scrapes_kept=REPLAY_SCRAPES_KEPT)
            diagnosis = _replay(pilot, rs.collect())
        elif prometheus is not None:
            ps = PrometheusSource(prometheus, selector, window_s=40 * interval, step_s=interval)
            pilot = Autopilot(interval, registry, scrapes_kept=REPLAY_SCRAPES_KEPT)
            diagnosis = _replay(pilot, ps.collect())
        else:
            pilot = Autopilot(interval, registry)
            diagnosis = _live(pilot, _targets(target, dcgm, targets_file), interval, samples, None)
    except (BundleError, PrometheusError, ValueError) as exc:
        raise fail(str(exc)) from exc
    if diagnosis is None:
        raise fail("no diagnosis: not enough telemetry", code=3)
    kube = _kube(kubeconfig, namespace)
    ledger = Ledger(db)
    actuator = Actuator(kube, ledger, _policy(policy), mode=mode, actor="cli",  # type: ignore[arg-type]
                        selector=fleet_labels)
    try:
        ns = namespace or kube.namespace
        actuator.observe_config(ns, time.time())
        plan = actuator.plan(diagnosis, list(pilot.snapshots), namespace)
    except KubeError as exc:
        raise fail(f"the cluster's API: {exc}", code=3) from exc
    if simulate:
        from llm_oncall.respond.twin import predict

        with err_console.status("trying the plan on a twin of the fleet"):
            predict(plan, diagnosis, list(pilot.features), list(pilot.snapshots), pilot.interval_s, horizon,
                    executes=lambda a: a.would_execute,
                    model_load_s=model_load)
        ledger.save_plan(plan.id, plan.incident, plan.to_json())
    body = plan.to_json()
    if out is not None:
        out.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    if as_json:
        print_json(body)
        return
    console.print(plan_table(body))


def _predicted(p: dict[str, Any] | None) -> str:
    """A twin's prediction in a cell: `#rank recovers in N s · M SLO min`."""
    if not p:
        return "-"
    if p.get("error"):
        return f"#{p['rank']} not modelled: {p['error']}"
    s = p.get("predicted_seconds_to_recovery")
    when = f"recovers in {s:.0f} s" if s is not None else f"no recovery in {p['horizon_s']:.0f} s"
    return f"#{p['rank']} {when} · {p['predicted_slo_minutes']:g} SLO min"


def plan_table(body: dict[str, Any]) -> FitTable:
    """`act plan`: each action with its dry-run result and the guard's verdict (and, with --simulate, the twin's
    prediction: rank, seconds to recovery, SLO minutes); manual steps last."""
    twin = body.get("twin")
    cols = [Column("action", no_wrap=True), Column("kind", no_wrap=True),
            Column("target", min_width=20, priority=1), Column("dry-run", no_wrap=True),
            Column("guard", min_width=24, priority=2)]
    if twin is not None:
        cols.append(Column("predicted (twin)", min_width=24))
    cols.append(Column("why", min_width=30, priority=3))
    title = f"{body['incident']} plan {body['id']} ({len(body['actions'])} action(s))"
    if twin is not None:
        whole = twin.get("plan")
        title += (f"; twin, {twin['horizon_s']:.0f} s ahead: doing nothing {_predicted(twin.get('nothing'))}"
                  + (f"; the plan {_predicted(whole)}" if whole else ""))
    t = FitTable(*cols, title=title)
    for a in body["actions"]:
        ref = target_ref(a["target"])
        dry = a.get("dry_run") or {}
        guard = a.get("guard") or {}
        verdict = ("allowed" if guard.get("allowed") else "blocked") if guard else "-"
        cells: list[Any] = [a["id"], a["kind"], ref, Text("ok", style="green") if dry.get("ok") else
                            Text("FAILED" if dry else "-", style="bold red"),
                            f"{verdict}: {guard['why']}" if guard.get("why") else verdict]
        if twin is not None:
            cells.append(_predicted(a.get("prediction")))
        t.add_row(*cells, a.get("why") or "")
    for m in body.get("manual") or []:
        t.add_row("manual", str(m.get("action", "")), "", "", "", *([""] if twin is not None else []),
                  str(m.get("text", "")))
    return t


def _join_served_incident(db: Path, p: Any, only: set[str] | None, actions: list[Any]) -> str | None:
    """A plan `serve` made (its store is --db): the approvals and outcomes go on that incident's timeline too, and
    the loop takes the executed actions from the ledger on its next round."""
    from llm_oncall.incidents import IncidentStore, StoreError

    try:
        store = IncidentStore(db)
    except (StoreError, RuntimeError, OSError):
        return None
    try:
        iid = store.incident_of_plan(p.id)
        if iid is None:
            return None
        for a in actions:
            if only is not None and a.id not in only:
                continue
            if only is not None:
                store.event(iid, "approval", "cli", {"action_id": a.id, "decision": "approved", "plan_id": p.id,
                                                     "via": "act apply"})
            store.event(iid, "action", "cli", {"action_id": a.id, "kind": a.kind, "target": a.target.ref(),
                                               "status": a.status, "result": a.result,
                                               "guard": a.guard.model_dump() if a.guard else None})
        if any(a.status == "executed" for a in actions):
            store.set_status(iid, "mitigating", "cli", "emergency action executed (act apply)")
        return iid
    finally:
        store.close()


@app.command("apply")
def apply_cmd(
    plan: Annotated[str, typer.Option("--plan", help="A plan JSON file (act plan --out) or a plan id in --db.")],
    approve: Annotated[list[str], typer.Option("--approve", help="Action ids to execute (approve mode).")] = [],  # noqa: B006
    kubeconfig: KubeconfigOpt = None,
    db: DbOpt = Path("llm-oncall.db"),
    policy: PolicyOpt = None,
    mode: Annotated[str, typer.Option(help="approve (default: only --approve ids) | auto (what the policy "
                                           "allows).")] = "approve",
    max_age: Annotated[float | None, typer.Option(help="Refuse plans older than this many seconds (default: the "
                                                       "policy's max_diagnosis_age_s).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Execute the approved actions of a plan (each guarded, idempotent, audited)."""
    from llm_oncall.actions.ledger import Ledger
    from llm_oncall.actions.model import Plan
    from llm_oncall.actions.run import Actuator

    if mode not in ("approve", "auto"):
        raise fail("--mode is approve or auto")
    ledger = Ledger(db)
    path = Path(plan)
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else ledger.plan(plan)
    except (OSError, ValueError) as exc:
        raise fail(f"--plan {plan}: {exc}") from exc
    if data is None:
        raise fail(f"--plan {plan}: no such file or plan id in {db}")
    p = Plan.from_json(data)
    unknown = sorted(set(approve) - {a.id for a in p.actions})
    if unknown:
        raise fail(f"--approve: no such action in plan {p.id}: {', '.join(unknown)}")
    pol = _policy(policy)
    if max_age is not None:
        pol.max_diagnosis_age_s = max_age
    kube = _kube(kubeconfig, p.namespace)
    actuator = Actuator(kube, ledger, pol, mode=mode, actor="cli")  # type: ignore[arg-type]
    age = time.time() - p.created_at
    only = set(approve) if mode == "approve" else None
    actions = actuator.execute(p, approved=set(approve), diagnosis_age_s=age, only=only)
    served = _join_served_incident(db, p, only, actions)
    body = {"plan": p.id, "incident": p.incident, "age_s": round(age, 1), "incident_id": served,
            "actions": [a.to_json() for a in actions if only is None or a.id in only or a.status == "blocked"]}
    if as_json:
        print_json(body)
    else:
        t = FitTable(Column("action", no_wrap=True), Column("kind", no_wrap=True),
                     Column("target", min_width=20, priority=1), Column("status", no_wrap=True),
                     Column("result", min_width=30, priority=2), title=f"{p.incident} plan {p.id}: applied")
        for a in actions:
            if only is None or a.id in only:
                t.add_row(a.id, a.kind, a.target.ref(), a.status, str(a.result or ""))
        console.print(t)
    if any(a.status == "failed" for a in actions):
        raise typer.Exit(1)
