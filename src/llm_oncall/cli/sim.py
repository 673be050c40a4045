"""`llm-oncall sim ...`: the simulated fleet served in real time on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from llm_oncall.signals.duration import parse_duration
from llm_oncall.sim import FAULTS, Fleet, FleetConfig, scenario
from llm_oncall.sim.serve import SimServer

app = typer.Typer(
    help="Run the fleet simulator as live HTTP endpoints.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    """Run the fleet simulator as live HTTP endpoints."""


def _err(msg: str) -> None:
    typer.echo(msg, err=True)


def _write_atomic(path: Path, text: str) -> None:
    """Prometheus re-reads file_sd files on change: never let it see a half-written one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".file-sd-", suffix=".json", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def build_fleet(pods: int, fault: str | None, at: float | None, seed: int, rate_per_pod: float | None) -> Fleet:
    if fault is None:
        cfg = FleetConfig(pods=pods, rate_per_pod=8.0, dcgm_custom_csv=True)
        if rate_per_pod is not None:
            cfg = FleetConfig(pods=pods, rate_per_pod=rate_per_pod, dcgm_custom_csv=True)
        return Fleet(cfg, seed=seed)
    overrides: dict[str, Any] = {"pods": pods}
    if at is not None:
        overrides["at"] = at
    if rate_per_pod is not None:
        overrides["rate_per_pod"] = rate_per_pod
    cfg, spec = scenario(fault, seed, **overrides)
    return Fleet(cfg, seed=seed, fault=spec)


def _kube_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if host not in ("127.0.0.1", "localhost") or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise typer.BadParameter("expected 127.0.0.1:PORT (the simulator listens on the loopback only)",
                                 param_hint="--kube-api")
    return "127.0.0.1", int(port)


@app.command("serve")
def serve(
    pods: Annotated[int, typer.Option(help="Initial replicas.", min=1, max=256)] = 4,
    fault: Annotated[str | None, typer.Option(help=f"Incident to inject: {', '.join(FAULTS)}.")] = None,
    at: Annotated[str | None, typer.Option(help="Fault onset in simulated seconds (e.g. 120, 2m); "
                                                "default ≈300 s.")] = None,
    seed: Annotated[int, typer.Option(help="Same seed → same telemetry.")] = 0,
    base_port: Annotated[int, typer.Option(help="First port; pods, then DCGM per node, gateway, kube "
                                                "(0: any free ports).", min=0, max=65535)] = 9000,
    speed: Annotated[float, typer.Option(help="Simulated seconds per wall second.", min=0.01, max=1000.0)] = 1.0,
    rate_per_pod: Annotated[float | None, typer.Option(help="Requests/s per replica (default 8).")] = None,
    file_sd: Annotated[Path | None, typer.Option(help="Also write the file_sd target list here (kept current).")
                       ] = None,
    duration: Annotated[str | None, typer.Option(help="Stop after this much wall time (default: until Ctrl-C).")
                        ] = None,
    kube_api: Annotated[str | None, typer.Option("--kube-api", help="Also serve the fleet's Kubernetes API on "
                                                 "HOST:PORT (127.0.0.1 only; port 0 = any free port).")] = None,
    kubeconfig_out: Annotated[Path | None, typer.Option("--kubeconfig-out", help="Write a kubeconfig for the "
                                                        "Kubernetes API here (kubectl and llm-oncall act use it).")
                              ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The target list is always JSON; accepted for "
                                                         "symmetry with other commands.")] = False,
) -> None:
    """Serve every pod (/metrics, /health, /v1/models, /v1/completions), DCGM, gateway and kube-state-metrics."""
    if fault is not None and fault not in FAULTS:
        raise typer.BadParameter(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}", param_hint="--fault")
    if at is not None and fault is None:
        raise typer.BadParameter("--at needs --fault", param_hint="--at")
    try:
        onset = parse_duration(at) if at is not None else None
        run_for = parse_duration(duration) if duration is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    kube_addr = _kube_address(kube_api) if kube_api is not None else None
    if kubeconfig_out is not None and kube_addr is None:
        raise typer.BadParameter("--kubeconfig-out needs --kube-api", param_hint="--kubeconfig-out")
    fleet = build_fleet(pods, fault, onset, seed, rate_per_pod)
    first = threading.Event()

    def publish(groups: list[dict[str, Any]]) -> None:
        text = json.dumps(groups, indent=2) + "\n"
        if file_sd is not None:
            _write_atomic(file_sd, text)
        if not first.is_set():
            first.set()
            typer.echo(text, nl=False)
        else:
            _err(f"sim: targets changed ({len(groups)} targets)" + (f"; {file_sd} updated" if file_sd else ""))

    server = SimServer(fleet, speed=speed, base_port=base_port, on_targets=publish, kube_api=kube_addr)
    try:
        server.start()
    except OSError as exc:
        _err(f"cannot listen from port {base_port}: {exc}")
        raise typer.Exit(2) from None
    if server.kube is not None:
        _err(f"sim: Kubernetes API on {server.kube.url}"
             + (f"; kubeconfig {server.kube.write_kubeconfig(kubeconfig_out)}" if kubeconfig_out else ""))
    onset_text = f"{fleet.fault.kind} at t={fleet.fault.at:.0f}s" if fleet.fault else "no fault"
    _err(f"sim: {pods} pods on 127.0.0.1, {speed:g}× real time, {onset_text}; Ctrl-C to stop")
    stop = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        def on_term(signum: int, frame: FrameType | None) -> None:
            stop.set()
        previous = signal.signal(signal.SIGTERM, on_term)
    deadline = None if run_for is None else time.monotonic() + run_for
    try:
        while not stop.is_set():
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if left <= 0:
                break
            stop.wait(left)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    _err(f"sim: stopped at simulated t={fleet.now:.1f}s")
