"""The interactive terminal, driven through prompt_toolkit's test harness (a pipe input, a dummy output)."""

from __future__ import annotations

import io

from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from llm_oncall.training.session import Session
from llm_oncall.training.tui import run_interactive


def test_interactive_session() -> None:
    s = Session("gpu-ecc", 7)
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None)
    try:
        with create_pipe_input() as inp, create_app_session(input=inp, output=DummyOutput()):
            inp.send_text("help\nrun dmesg --node gpu-node-00\ndiagnose gpu-ecc\nact gpu_repair\nstatus\ndone\n")
            run_interactive(s, console, inp=inp, out=DummyOutput())
        out = buf.getvalue()
        assert "PAGE" in out and "LLMServingSymptoms" in out and "users report" in out
        assert "NVRM: Xid" in out and "(120 s of simulated time)" in out
        assert "cordon_node Node/gpu-node-00: executed" in out
        assert "diagnosis gpu-ecc" in out
        r = s.finish(autopilot=False)
        assert r.correct and [x.command for x in r.steps] == [
            "run dmesg --node gpu-node-00", "diagnose gpu-ecc", "act gpu_repair"]
    finally:
        s.close()


def test_thinking_time_runs_the_fleet() -> None:
    s = Session("gpu-ecc", 7)
    ticks = iter([0.0, 10.0, 10.0, 20.0])
    try:
        with create_pipe_input() as inp:
            inp.send_text("wait 15\ndone\n")
            t0 = s.fleet.now
            run_interactive(s, Console(file=io.StringIO()), speed=3.0, inp=inp, out=DummyOutput(),
                            clock=lambda: next(ticks))
        # 10 s of thinking at ×3 (30 s), the wait (15 s), 10 s more of thinking before `done`: the fleet moved on
        assert s.fleet.now - t0 >= 30.0 + 15.0
    finally:
        s.close()
