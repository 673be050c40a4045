"""The interactive trainee terminal: a prompt_toolkit prompt (history, completion of commands, incidents and
actions) with Rich output. `--speed X`: the wall-clock time the trainee spends thinking runs the fleet X times as
fast on top of each command's cost (0: only the commands' costs count)."""

from __future__ import annotations

import time
from collections.abc import Callable

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import WordCompleter
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from rich.console import Console
from rich.panel import Panel

from llm_oncall.training.session import Session

HELP = """commands (each costs simulated time; see docs/training.md):
  query PROMQL                      e.g. query sum by (pod) (vllm:num_requests_waiting)
  run COMMAND                       nvidia-smi -q [-d ECC] --node N | nvidia-smi nvlink -e --node N | dmesg --node N
                                    py-spy dump --pod P | kubectl get pods [-o wide] | kubectl get events
                                    kubectl get hpa | kubectl logs P | kubectl rollout history
  hint                              the next runbook step (costs points)
  diagnose INCIDENT [TARGET...]     name the incident (and the nodes/pods it is on)
  act ACTION [TARGET]               e.g. act cordon_node gpu-node-00 (no TARGET: the diagnosed scope)
  wait SECONDS | status | help | done"""


def run_interactive(session: Session, console: Console, speed: float = 0.0, inp: Input | None = None,
                    out: Output | None = None, clock: Callable[[], float] = time.monotonic) -> None:
    words = ["query", "run", "hint", "diagnose", "act", "wait", "status", "help", "done", "nvidia-smi", "dmesg",
             "py-spy", "kubectl", "--node", *session.registry.ids(), *session.fleet.nodes(),
             "scale_out", "restart_group", "cordon_node", "drain_pod", "rollback", "set_flag", "route_by_length",
             "rate_limit", "gateway_cap", "taint_node"]
    prompt: PromptSession[str] = PromptSession(completer=WordCompleter(words, sentence=True), input=inp, output=out)
    console.print(Panel(session.page, title="PAGE", style="bold red"))
    console.print(HELP)
    last = clock()
    while True:
        try:
            line = prompt.prompt(f"[t+{session.since_onset():.0f}s] on-call> ").strip()
        except (EOFError, KeyboardInterrupt):
            break
        if speed > 0:
            session.spend(max(0.0, clock() - last) * speed)
        if not line:
            continue
        if line in ("done", "quit", "exit"):
            break
        if line == "help":
            console.print(HELP)
        elif line == "status":
            console.print(f"t+{session.since_onset():.0f}s · diagnosis {session.diagnosed or 'none'} · "
                          f"hints {session.hints}")
        else:
            step = session.do(line)
            style = "red" if step.status in ("error", "blocked", "failed") else None
            console.print(step.output, style=style, markup=False, highlight=False)
            console.print(f"[dim]({step.cost_s:.0f} s of simulated time)[/dim]")
        last = clock()
