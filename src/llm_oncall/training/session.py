"""One on-call training run: a seeded simulated fleet pages the trainee with the symptom only; the trainee triages
(PromQL over the fleet's series, node and pod commands in their real output formats), names a diagnosis and takes
emergency actions — through the same responder, planner, guard and Kubernetes API as the autopilot
(respond/responder.py in approve mode: the trainee plans and approves, the loop executes, verifies and resolves).

Every command costs simulated time (COSTS; docs/training.md): the fleet runs on while the trainee works. The scorer
(not the loop) reads the injected fault: time to diagnosis and to mitigation from onset, whether the diagnosis is
right, the actions that hurt, the hints taken — beside the autopilot's figures on the same seed (drills/act.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_oncall.actions import verify
from llm_oncall.actions.guard import DRILL_POLICY
from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, UnsafeName
from llm_oncall.actions.run import Actuator
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.drills.runner import INTERVAL_S, DrillLoop
from llm_oncall.evidence.classify import classify_text
from llm_oncall.incidents import IncidentStore
from llm_oncall.postmortem.telemetry import TelemetryLog
from llm_oncall.respond import Case, Responder
from llm_oncall.respond.responder import plan_event
from llm_oncall.runbooks.loader import load_registry
from llm_oncall.signals.exposition import parse
from llm_oncall.signals.source import Batch, Source
from llm_oncall.sim import FAULTS, Fleet, nodecmd, scenario
from llm_oncall.sim.kubeapi import KubeApiServer, KubeCluster
from llm_oncall.training import promql

TRAINEE = "trainee"
COSTS: dict[str, float] = {"query": 60.0, "run": 120.0, "hint": 30.0, "diagnose": 30.0, "act": 60.0}
"""Simulated seconds each command takes (the same order as drills/manual.py's human: a PromQL query in Grafana about
a minute, a command on a node or in a pod two, a hint half a minute to read, naming the diagnosis half a minute,
typing and approving a change a minute)."""
HINT_POINTS = 10
WRONG_POINTS = 40
HARMFUL_POINTS = 25
UNMITIGATED_POINTS = 20
PAGE_WAIT_S = 600.0
"""How long after the planned onset the fleet may take to page before the run ends without one."""
WATCH_AFTER_S = 900.0
"""After the last command, how long the fleet runs on for the fix to show (mitigation is judged then)."""
RECOVERED_ROUNDS = 2


class CommandError(ValueError):
    pass


@dataclass
class Step:
    t: float
    """Seconds since onset when the command was given."""
    command: str
    output: str
    cost_s: float
    kind: str
    status: str = "ok"
    """ok | error | executed | blocked | failed | harmful (actions)."""


class _Tap:
    """The loop's source, with every page and log line kept for the trainee's queries and commands."""

    def __init__(self, inner: Source, store: promql.SeriesStore) -> None:
        self.inner = inner
        self.store = store
        self.logs: dict[str, list[str]] = {}

    def collect(self) -> Batch:
        batch = self.inner.collect()
        for o in batch.observations:
            if o.page is None:
                continue
            labels = {"job": o.target.kind, "instance": o.target.name, **o.target.labels}
            self.store.add(o.t, labels, parse(o.text, None) if o.text is not None else o.page)
        for key, lines in batch.logs.items():
            self.logs.setdefault(key, []).extend(lines)
        return batch


class _HumanPlans(Responder):
    """The on-call loop with a human as the planner: it diagnoses, opens the incident, executes what the human
    approved, verifies and resolves, but plans nothing itself."""

    def _plan(self, c: Case, d: Diagnosis) -> None:
        return


@dataclass
class Result:
    incident: str
    seed: int
    paged: bool
    page: str
    onset: float | None
    diagnosed: str | None = None
    scope: list[str] = field(default_factory=list)
    seconds_to_diagnosis: float | None = None
    seconds_to_first_action: float | None = None
    seconds_to_mitigation: float | None = None
    harmful: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    hints: int = 0
    steps: list[Step] = field(default_factory=list)
    autopilot: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.diagnosed == self.incident

    @property
    def score(self) -> int:
        s = 100 - HINT_POINTS * self.hints - HARMFUL_POINTS * len(self.harmful)
        s -= 0 if self.correct else WRONG_POINTS
        s -= 0 if self.seconds_to_mitigation is not None else UNMITIGATED_POINTS
        return max(0, s)

    def to_json(self) -> dict[str, Any]:
        ap = self.autopilot
        return {"incident": self.incident, "diagnosed": self.diagnosed, "correct": self.correct,
                "seconds_to_diagnosis": self.seconds_to_diagnosis,
                "seconds_to_mitigation": self.seconds_to_mitigation, "harmful_actions": len(self.harmful),
                "hints": self.hints,
                "autopilot": {"seconds_to_diagnosis": ap.get("seconds_to_diagnosis"),
                              "seconds_to_mitigation": ap.get("seconds_to_mitigation"),
                              "diagnosed": ap.get("diagnosed"),
                              "seconds_to_first_action": ap.get("seconds_to_first_action"),
                              "actions": ap.get("actions", [])},
                "seed": self.seed, "score": self.score, "paged": self.paged, "page": self.page,
                "scope": self.scope, "seconds_to_first_action": self.seconds_to_first_action,
                "actions": self.actions, "harmful": self.harmful,
                "timeline": [dataclasses.asdict(s) for s in self.steps]}


def _r(x: float | None) -> float | None:
    return round(x, 1) if x is not None else None


class Session:
    def __init__(self, incident: str, seed: int = 7, interval_s: float = INTERVAL_S) -> None:
        if incident not in FAULTS:
            raise CommandError(f"unknown incident {incident!r}; choose from {', '.join(FAULTS)}")
        self.incident = incident
        self.seed = seed
        self.registry = load_registry()
        cfg, fault = scenario(incident, seed)
        self.cfg = cfg
        self.fleet = Fleet(cfg, seed=seed, fault=fault)
        self.cluster = KubeCluster(self.fleet)
        self.server = KubeApiServer(self.cluster).start()
        self.tmp = tempfile.TemporaryDirectory(prefix="llm-oncall-train-")
        db = Path(self.tmp.name) / "record.db"

        def clock() -> float:
            return cfg.epoch + self.fleet.now

        self.clock = clock
        self.store, self.ledger, self.telemetry = IncidentStore(db, clock=clock), Ledger(db, clock=clock), \
            TelemetryLog(db)
        kc = self.server.write_kubeconfig(Path(self.tmp.name) / "kubeconfig")
        self.actuator = Actuator(Kube(kc), self.ledger, DRILL_POLICY, mode="approve", actor=TRAINEE, clock=clock,
                                 sleep=lambda s: None)
        self.drill = DrillLoop(self.fleet, incident, interval_s, lock=self.cluster.lock)
        self.drill.source.keep_text = True
        self.series = promql.SeriesStore()
        self.tap = _Tap(self.drill.source, self.series)
        self.responder = _HumanPlans(self.tap, interval_s, self.store, self.ledger, self.actuator, "approve",
                                     clock=clock, telemetry=self.telemetry, namespace=cfg.namespace, actor=TRAINEE,
                                     pilot=self.drill.pilot)
        self.interval_s = interval_s
        self.steps: list[Step] = []
        self.hints = 0
        self.diagnosed: str | None = None
        self.diagnosed_at: float | None = None
        self.scope: list[str] = []
        self.flagged: list[str] = []
        self.first_action_at: float | None = None
        self.mitigated_at: float | None = None
        self._streak = 0
        self._baselines: dict[str, float | None] = {}
        self.case: Case | None = None
        self.page = ""
        self.page_t: float | None = None
        self.closed = False
        self._wait_page()

    # ---- the clock ------------------------------------------------------------------------------------------
    @property
    def onset(self) -> float | None:
        return self.fleet.ground_truth.onset

    def since_onset(self, t: float | None = None) -> float:
        return (self.fleet.now if t is None else t) - (self.onset if self.onset is not None else 0.0)

    def _round(self) -> None:
        d = self.responder.round()
        if d is not None:
            self.drill.note(d)
        if self.first_action_at is not None and self.mitigated_at is None and self.responder.observed:
            ok = verify.recovered(self.incident, self.responder.observed[-1], self._baselines)
            self._streak = self._streak + 1 if ok else 0
            if self._streak >= RECOVERED_ROUNDS:
                self.mitigated_at = self.fleet.now - (RECOVERED_ROUNDS - 1) * self.interval_s

    def spend(self, seconds: float) -> None:
        end = self.fleet.now + seconds
        while self.fleet.now < end - 1e-9:
            self._round()

    def _wait_page(self) -> None:
        planned = self.fleet.fault.at if self.fleet.fault is not None else 300.0
        while self.fleet.now < planned + PAGE_WAIT_S:
            self._round()
            cases = self.responder.open_cases()
            if cases:
                self.case = min(cases.values(), key=lambda c: c.opened_at)
                break
        d = self.responder.last
        if self.case is None or d is None:
            self.page = "(no page: the fleet stayed quiet)"
            return
        self.page_t = self.fleet.now
        self._baselines = {s.name: verify.baseline(list(self.responder.observed), s, d.t - 120.0)
                           for s in verify.signals(self.incident)}
        rb = self.registry.get(self.incident)
        report = rb.symptom.get("en").split(":")[0].strip() if rb is not None else "something is wrong"
        values = dict(self.responder.pilot.features[-1].values) if self.responder.pilot.features else {}
        self.page = alert_text(d, values, report, self.cfg.namespace, self.cfg.deployment, self.clock())

    # ---- commands ---------------------------------------------------------------------------------------------
    def do(self, line: str) -> Step:
        """One trainee command; its output, after the time it costs has passed."""
        line = line.strip()
        verb, _, rest = line.partition(" ")
        verb = verb.lower()
        t = self.since_onset()
        cost = COSTS.get(verb, 0.0)
        status = "ok"
        try:
            if self.case is None:
                raise CommandError("nothing paged: there is no incident to work")
            if verb == "query":
                out = self._query(rest.strip())
            elif verb == "run":
                out = self._run(rest.strip())
            elif verb == "hint":
                out = self._hint()
            elif verb == "diagnose":
                out = self._diagnose(rest.split())
            elif verb == "act":
                step = self._act(rest.split(), t, line)
                self.steps.append(step)
                return step
            elif verb == "wait":
                cost = float(rest or 60)
                out = f"waited {cost:.0f} s"
            else:
                raise CommandError(f"unknown command {verb!r}: query PROMQL | run COMMAND | hint | "
                                   "diagnose INCIDENT [TARGET...] | act ACTION [TARGET] | wait SECONDS")
        except (CommandError, promql.PromQLError, ValueError) as exc:
            out, status, cost = f"error: {exc}", "error", min(cost, 10.0)
        self.spend(cost)
        step = Step(_r(t) or 0.0, line, out, cost, verb, status)
        self.steps.append(step)
        return step

    def _query(self, expr: str) -> str:
        if not expr:
            raise CommandError("query what? e.g. query sum(vllm:num_requests_waiting)")
        parts = promql.split(expr)
        out = []
        for q in parts:
            v = promql.query(q, self.series, self.fleet.now)
            out.append((f"# {q}\n" if len(parts) > 1 else "") + promql.render(v))
        return "\n".join(out)

    def _run(self, command: str) -> str:
        argv = shlex.split(command)
        if not argv:
            raise CommandError("run what? e.g. run nvidia-smi -q --node gpu-node-00")
        opts, args = _options(argv[1:])
        tool = argv[0]
        subject = ""
        with self.cluster.lock:
            if tool == "nvidia-smi":
                node = subject = self._node(opts)
                if args[:1] == ["nvlink"]:
                    out = nodecmd.nvidia_smi_nvlink_errors(self.fleet, node)
                else:
                    out = nodecmd.nvidia_smi_q(self.fleet, node, opts.get("-d") or opts.get("--display"))
            elif tool == "dmesg":
                node = subject = self._node(opts)
                lines = self.tap.logs.get(f"{node}/kern.log", [])
                out = nodecmd.dmesg(self.fleet, node, lines)
            elif tool == "dcgmi":
                node = subject = self._node(opts)
                if args[:1] != ["health"]:
                    raise CommandError("dcgmi health -c --node NODE")
                out = nodecmd.dcgmi_health(self.fleet, node)
            elif tool == "py-spy":
                pod = subject = opts.get("--pod") or next((a for a in args if a != "dump"), "")
                if not pod:
                    raise CommandError("py-spy dump --pod POD (the worker inside that pod)")
                out = nodecmd.py_spy_dump(self.fleet, pod)
            elif tool == "kubectl":
                out, subject = self._kubectl(args, opts)
            else:
                raise CommandError(f"{tool}: command not found (nvidia-smi, dcgmi, dmesg, py-spy, kubectl)")
        if subject:
            f = classify_text(out, f"{tool}-{subject}", word_prior=False)  # a tool's output, not a paste
            if not f.benign and f.incident_hint and subject not in self.flagged:
                self.flagged.append(subject)
        return out

    def _node(self, opts: dict[str, str]) -> str:
        node = opts.get("--node", "")
        if node not in self.fleet.gpus:
            raise CommandError(f"on which node? --node NODE (nodes: {', '.join(self.fleet.nodes())})")
        return node

    def _kubectl(self, args: list[str], opts: dict[str, str]) -> tuple[str, str]:
        verb = args[0] if args else ""
        what = args[1] if len(args) > 1 else ""
        if verb == "get" and what in ("pods", "pod", "po"):
            return nodecmd.kubectl_get_pods(self.fleet, wide=opts.get("-o") == "wide"), ""
        if verb == "get" and what in ("events", "ev"):
            return nodecmd.kubectl_get_events(self.fleet), ""
        if verb == "get" and what in ("hpa", "horizontalpodautoscalers"):
            return nodecmd.kubectl_get_hpa(self.fleet), ""
        if verb == "rollout" and what == "history":
            return nodecmd.kubectl_rollout_history(self.fleet), ""
        if verb == "describe" and what in ("pod", "pods", "po") and len(args) > 2:
            return nodecmd.kubectl_describe_pod(self.fleet, args[2]), args[2]
        if verb == "logs" and what:
            return nodecmd.kubectl_logs(self.fleet, what, self.tap.logs.get(f"{what}/logs.txt", [])), what
        raise CommandError("kubectl: get pods [-o wide] | get events | get hpa | describe pod POD | logs POD | "
                           "rollout history")

    def _hint(self) -> str:
        self.hints += 1
        rb = self.registry.get(self.incident)
        steps = list(rb.triage) if rb is not None else []
        if self.hints <= len(steps):
            s = steps[self.hints - 1]
            how = f"query {s.signal}" if s.signal else "run " + " ".join(s.command or [])
            return f"hint {self.hints} (−{HINT_POINTS} points): {s.name}: `{how}` — {s.meaning.get('en')}"
        return f"hint {self.hints} (−{HINT_POINTS} points): this is the {self.incident} runbook's incident"

    def _diagnose(self, words: list[str]) -> str:
        if not words:
            raise CommandError(f"diagnose INCIDENT [TARGET...]; incidents: {', '.join(self.registry.ids())}")
        incident, targets = words[0], words[1:]
        if incident not in self.registry.ids() and incident != "unknown":
            raise CommandError(f"no runbook {incident!r}; incidents: {', '.join(self.registry.ids())}")
        for x in targets:
            if x not in self.fleet.gpus and x not in self.fleet.by_name and x not in self._revisions():
                raise CommandError(f"{x}: not a node, pod or revision of the fleet")
        self.diagnosed, self.diagnosed_at = incident, self.fleet.now
        self.scope = targets or list(self.flagged)
        rb = self.registry.get(incident)
        fixes = ", ".join(s.action for s in rb.emergency) if rb is not None else "—"
        where = f" on {', '.join(self.scope)}" if self.scope else " (fleet-wide)"
        return f"diagnosis recorded: {incident}{where}; its runbook's emergency actions: {fixes}"

    def _act(self, words: list[str], t: float, line: str) -> Step:
        cost = COSTS["act"]
        try:
            if not words:
                raise CommandError("act ACTION [TARGET]")
            self._step_for(words[0])
        except CommandError as exc:  # a usage error costs little
            self.spend(10.0)
            return Step(_r(t) or 0.0, line, f"error: {exc}", 10.0, "act", "error")
        self.spend(cost)
        kind, target = words[0], (words[1] if len(words) > 1 else None)
        try:
            a = self._approve(kind, target)
        except (CommandError, KubeError, UnsafeName) as exc:
            return Step(_r(t) or 0.0, line, f"error: {exc}", cost, "act", "error")
        self._round()  # the loop executes what was approved
        if a.status == "executed" and self.first_action_at is None:
            self.first_action_at = self.fleet.now
        why = a.result if a.status != "executed" else (a.guard.why if a.guard else "")
        out = f"{a.kind} {a.target.ref()}: {a.status}" + (f" — {why}" if why else "")
        return Step(_r(t) or 0.0, line, out, cost, "act", a.status)

    def _step_for(self, kind: str) -> dict[str, Any]:
        order = [self.diagnosed or ""] + [i for i in self.registry.ids() if i != self.diagnosed]
        for inc in order:
            rb = self.registry.get(inc)
            for s in (rb.emergency if rb is not None else ()):
                if s.action == kind:
                    return {"action": s.action, "params": dict(s.params or {}), "text": s.text.get("en")}
        kinds = sorted({s.action for i in self.registry.ids() for s in (self.registry.get(i).emergency  # type: ignore[union-attr]
                                                                         if self.registry.get(i) else ())})
        raise CommandError(f"no runbook has an action {kind!r}; actions: {', '.join(kinds)}")

    def _approve(self, kind: str, target: str | None) -> Action:
        case = self._case()
        step = self._step_for(kind)
        if kind == "scale_out" and target is not None and re.fullmatch(r"[+-]?\d+", target):
            step["params"]["replicas"] = target  # the trainee sizes it: +N more, or N in all
            target = None
        if kind == "rollback" and target in ("router-config", "deployment"):
            step["params"]["object"] = target
            target = None
        pods, nodes, revision = self._scope_of(target)
        if kind == "rollback" and revision is None and step["params"].get("object") != "router-config":
            revision = self._revisions()[-1] if len(self._revisions()) > 1 else None  # undo the latest rollout
        base = self.responder.last
        assert base is not None
        # The trainee's diagnosis, not the autopilot's: only the time of the telemetry comes from the loop.
        d = Diagnosis(incident=self.diagnosed or "unknown", confidence=1.0, t=base.t,
                      summary=f"{self.diagnosed or 'unknown'} (named by the trainee)", scope_pods=tuple(pods),
                      scope_nodes=tuple(nodes), scope_revision=revision, emergency_actions=(step,),
                      runbook=self.diagnosed, title=f"{self.diagnosed or 'unknown'} (trainee)")
        plan = self.actuator.plan(d, list(self.responder.pilot.snapshots), self.cfg.namespace,
                                  first_page_t=case.opened_at)
        if not plan.actions:
            why = "; ".join(m["text"] for m in plan.manual) or "nothing to act on in that scope"
            raise CommandError(f"{kind}: no action planned — {why}")
        if case.plan is None:
            case.plan = plan
            case.baselines = {s.name: verify.baseline(list(self.responder.observed), s, d.t - 120.0)
                              for s in verify.signals(plan.incident)}
            self.store.set_plan(case.id, plan.id, plan_event(plan), actor=TRAINEE)
        else:
            case.plan.actions.extend(plan.actions)
        self.ledger.save_plan(case.plan.id, case.plan.incident, case.plan.to_json())
        for a in plan.actions:
            self.store.decide(case.id, case.plan.id, a.id, "approved", TRAINEE)
        return plan.actions[0]

    def _case(self) -> Case:
        cases = self.responder.open_cases()
        if self.case is not None and self.case.id in cases:
            return self.case
        if cases:
            self.case = min(cases.values(), key=lambda c: c.opened_at)
            return self.case
        raise CommandError("the incident is resolved: nothing to act on")

    def _revisions(self) -> list[str]:
        return [r.name for r in self.fleet.revisions]

    def _scope_of(self, target: str | None) -> tuple[list[str], list[str], str | None]:
        """A node names the node; a pod names the pod and its node; a revision (pod-template hash) the revision."""
        names = [target] if target else self.scope
        pods: list[str] = []
        nodes: list[str] = []
        revision: str | None = None
        for n in names:
            if n in self.fleet.gpus:
                nodes.append(n)
            elif n in self.fleet.by_name:
                pods.append(n)
                node = self.fleet.by_name[n].node
                if node not in nodes:
                    nodes.append(node)
            elif n in self._revisions():
                revision = n
            else:
                raise CommandError(f"{n}: not a node, pod or revision of the fleet")
        return pods, nodes, revision

    # ---- the end ---------------------------------------------------------------------------------------------
    def finish(self, autopilot: bool = True) -> Result:
        if self.first_action_at is not None:
            end = self.fleet.now + WATCH_AFTER_S
            while self.fleet.now < end and self.mitigated_at is None:
                self._round()
        r = Result(self.incident, self.seed, self.case is not None, self.page, self.onset, self.diagnosed,
                   self.scope, hints=self.hints, steps=self.steps)
        r.seconds_to_diagnosis = _r(self.since_onset(self.diagnosed_at)) if self.diagnosed_at is not None else None
        r.seconds_to_first_action = (_r(self.since_onset(self.first_action_at)) if self.first_action_at is not None
                                     else None)
        r.seconds_to_mitigation = _r(self.since_onset(self.mitigated_at)) if self.mitigated_at is not None else None
        r.actions, r.harmful = self._judge()
        if autopilot:
            r.autopilot = autopilot_figures(self.incident, self.seed)
        self.close()
        return r

    def _judge(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        plan = self.case.plan if self.case is not None else None
        rb = self.registry.get(self.incident)
        fixes = {s.action for s in rb.emergency} if rb is not None else set()
        gt = self.fleet.ground_truth
        bad_pods = set(gt.pods)
        bad_nodes = set(gt.nodes) | {p.node for p in self.fleet.pods if p.name in bad_pods}
        actions, harmful = [], []
        for a in plan.actions if plan is not None else []:
            row = {"id": a.id, "kind": a.kind, "runbook_action": a.runbook_action, "target": a.target.ref(),
                   "status": a.status, "verdict": a.verification.verdict if a.verification else None}
            actions.append(row)
            if a.status != "executed":
                continue
            why = None
            if a.runbook_action not in fixes:
                why = f"{a.runbook_action} is not an emergency fix of {self.incident}"
            elif a.target.kind == "Node" and a.target.name not in bad_nodes:
                why = f"{a.target.name} is a healthy node"
            elif a.kind == "evict_pods" and not set(a.params.get("pods", [])) & bad_pods:
                why = "the evicted pods were healthy"
            elif a.verification is not None and a.verification.verdict == "harmful":
                why = "the verification judged it harmful"
            if why is not None:
                harmful.append({**row, "why": why})
        return actions, harmful

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for c in (self.store, self.ledger, self.telemetry):
            with contextlib.suppress(Exception):
                c.close()
        self.server.stop()
        self.tmp.cleanup()


def _options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """`--node N`, `--node=N`, `-d ECC`, `-o wide`; bare flags (`-q`, `-e`) map to ''; the rest are arguments."""
    opts: dict[str, str] = {}
    args: list[str] = []
    takes = {"--node", "-d", "--display", "--pod", "--pid", "-o", "-n", "--namespace", "-l", "--since",
             "--sort-by", "--tail", "--level"}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and "=" in a:
            k, _, v = a.partition("=")
            opts[k] = v
        elif a in takes and i + 1 < len(argv):
            opts[a] = argv[i + 1]
            i += 1
        elif a.startswith("-"):
            opts[a] = ""
        else:
            args.append(a)
        i += 1
    return opts, args


_ALERTS = {"ttft_p99": ("VLLMTimeToFirstTokenHigh", "TTFT p99", "s"), "itl_p99": ("VLLMInterTokenLatencyHigh",
           "inter-token latency p99", "s"), "error_share": ("VLLMErrorRateHigh", "share of requests failing", ""),
           "success_rate": ("VLLMSuccessRateChanged", "successful requests per second", "/s"),
           "pods_up": ("VLLMTargetsDown", "vLLM pods answering /metrics", "")}


def alert_text(d: Diagnosis, values: dict[str, Any], report: str, namespace: str, deployment: str,
               now: float) -> str:
    """The page as Alertmanager would send it: the user-facing symptoms (red, or off their baseline by 30 %), the
    golden prober's mismatches, and what users report — never the diagnosis."""
    shown = []
    for s in d.extra.get("symptoms", []):
        v, b = s.get("value"), s.get("baseline")
        ratio = v / b if isinstance(v, float | int) and isinstance(b, float | int) and b else None
        if s.get("red") or (ratio is not None and not 0.77 <= ratio <= 1.3):
            shown.append((s, ratio))
    starts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    firing = sum(1 for s, _ in shown if s.get("red"))
    lines = [f"[FIRING:{max(1, firing)}] LLMServingSymptoms (namespace={namespace}, deployment={deployment}, "
             "severity=page)"]
    for s, ratio in shown:
        name, what, unit = _ALERTS.get(s["signal"], (s["signal"], s["signal"], ""))
        base = f", baseline {_fmt(s.get('baseline'))}{unit}" if s.get("baseline") is not None else ""
        rel = f" (×{ratio:.2f})" if ratio is not None else ""
        slo = f", SLO {_fmt(s.get('slo'))}{unit}" if s.get("slo") is not None else ""
        state = "" if s.get("red") else " [warning]"
        lines.append(f"  - alertname={name}{state}: {what} {_fmt(s.get('value'))}{unit}{rel}{base}{slo}")
    probe = values.get("probe_mismatch_rate")
    if isinstance(probe, float | int) and probe > 0:
        lines.append(f"  - alertname=GoldenPromptMismatch: {probe:.2f}/s golden-prompt answers differ from their "
                     "references")
    lines.append(f"  users report: {report}")
    lines.append(f"  startsAt: {starts}")
    return "\n".join(lines)


def _fmt(x: Any) -> str:
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def autopilot_figures(incident: str, seed: int) -> dict[str, Any]:
    """The autopilot on the same seeded incident (`drill --act`): what it diagnosed, when, what it did."""
    from llm_oncall.drills.act import run_act

    r = run_act(incident, seed)
    j = r.to_json()
    return {"diagnosed": r.drill.diagnosed, "seconds_to_diagnosis": _r(r.drill.seconds_to_diagnosis),
            "seconds_to_mitigation": _r(r.seconds_to_recovery),
            "seconds_to_first_action": j.get("seconds_to_first_action"),
            "actions": [{"kind": a["kind"], "runbook_action": a["runbook_action"], "target": a["target"],
                         "status": a["status"]} for a in r.actions]}


def run_script(incident: str, seed: int, lines: list[str], autopilot: bool = True) -> Result:
    s = Session(incident, seed)
    try:
        for line in lines:
            if line.strip() and not line.strip().startswith("#"):
                s.do(line)
        return s.finish(autopilot=autopilot)
    finally:
        s.close()


__all__ = ["COSTS", "CommandError", "Result", "Session", "Step", "run_script"]
