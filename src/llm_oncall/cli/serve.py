"""`llm-oncall serve --config FILE`: the on-call service (watch loop, Alertmanager receiver, HTTP API, console);
`serve --demo [--listen HOST:PORT]`: the same on a simulated fleet that injects an incident every few minutes."""

from __future__ import annotations

import secrets
import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from llm_oncall.cli.common import fail

if TYPE_CHECKING:
    from llm_oncall.service.config import ServiceConfig

DEMO_FAULTS = ("kv-capacity", "engine-hang", "retry-storm", "gpu-ecc", "prefix-cache-drop", "bad-model-rollout",
               "long-context-starvation", "cuda-graph-crash")


def _start(cfg: ServiceConfig) -> Any:
    from llm_oncall.incidents import StoreError
    from llm_oncall.service.app import Service
    from llm_oncall.web.console import routes

    try:
        return Service(cfg, extend=routes).start()
    except (StoreError, RuntimeError) as exc:
        raise fail(f"db {cfg.db}: {exc}", code=3) from exc
    except OSError as exc:
        raise fail(f"cannot start: {exc}", code=3) from exc


def _wait_for_signal(stop: threading.Event) -> None:
    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def demo_config(listen: str, db: Path, fault: str, seed: int, tokens: dict[str, str], secret: str,
                interval: float) -> ServiceConfig:
    from llm_oncall.service.config import ServiceConfig

    return ServiceConfig.model_validate({
        "listen": listen, "db": str(db), "mode": "approve", "interval": interval, "log_level": "warning",
        "source": {"sim": {"pods": 4, "fault": fault, "at": 180, "seed": seed, "step": 15}},
        "auth": {"webhook": [tokens["webhook"]], "api": [tokens["api"]], "approve": [tokens["approve"]],
                 "override": [tokens["override"]]},
        "console": {"session_secret": secret}})


def _demo(listen: str, cycle_s: float, interval: float) -> None:
    """One simulated fleet per cycle, each with a different fault; the same port, tokens and session secret
    throughout, a fresh store per cycle (in a temporary directory)."""
    tokens = {role: f"demo-{role}-{secrets.token_urlsafe(18)}" for role in ("webhook", "api", "approve", "override")}
    secret = secrets.token_urlsafe(48)
    stop = threading.Event()
    _wait_for_signal(stop)
    with tempfile.TemporaryDirectory(prefix="llm-oncall-demo-") as tmp:
        first = True
        n = 0
        while not stop.is_set():
            fault = DEMO_FAULTS[n % len(DEMO_FAULTS)]
            cfg = demo_config(listen, Path(tmp) / f"cycle-{n}.db", fault, n + 1, tokens, secret, interval)
            service = _start(cfg)
            if first:
                typer.echo(f"llm-oncall demo: console at {service.url}/ (a simulated fleet of 4 pods; approve mode; a "
                           f"new fleet and a different incident every {cycle_s:.0f} s)")
                typer.echo("Tokens (printed once; log in with one of them):")
                for role in ("approve", "override", "api", "webhook"):
                    typer.echo(f"  {role:9} {tokens[role]}")
                typer.echo("Ctrl-C stops.")
                first = False
            typer.echo(f"cycle {n + 1}: injecting {fault} (onset after about "
                       f"{180 / 15 * interval:.0f} s)")
            try:
                stop.wait(cycle_s)
            finally:
                service.stop()
            n += 1


def serve(config: Annotated[Path | None, typer.Option("--config", "-c", help="Service config YAML "
                                                      "(docs/service.md).")] = None,
          check: Annotated[bool, typer.Option("--check", help="Validate the config and exit.")] = False,
          demo: Annotated[bool, typer.Option("--demo", help="The service on a simulated fleet (with its Kubernetes "
                                             "API) in approve mode, a new incident every few minutes; prints "
                                             "tokens to log in to the console.")] = False,
          listen: Annotated[str, typer.Option("--listen", help="HOST:PORT for --demo.")] = "127.0.0.1:8080",
          cycle: Annotated[float, typer.Option("--cycle", min=20, help="--demo: seconds per simulated "
                                               "incident.")] = 240.0,
          interval: Annotated[float, typer.Option("--interval", min=0.1, max=60, help="--demo: wall seconds "
                                                  "per round (15 simulated seconds each).")] = 2.0) -> None:
    """The on-call service: watch loop over the source, Alertmanager receiver, incidents and approvals API,
    and the web console under /."""
    from llm_oncall.service.config import ConfigError, load

    if demo:
        if config is not None:
            raise fail("give --config or --demo, not both")
        host, sep, port = listen.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise fail("--listen: expected HOST:PORT, e.g. 127.0.0.1:8080")
        _demo(listen, cycle, interval)
        return
    if config is None:
        raise fail("give --config FILE (or --demo)")
    try:
        cfg = load(config)
    except ConfigError as exc:
        raise fail(str(exc)) from exc
    if check:
        from llm_oncall.actions.guard import Policy
        from llm_oncall.runbooks.loader import load_registry

        try:
            policy = Policy.load(cfg.policy) if cfg.policy is not None else Policy()
            registry = load_registry()
        except (OSError, ValueError) as exc:
            raise fail(str(exc)) from exc
        typer.echo(f"{config}: ok (source {cfg.source.kind}, mode {cfg.mode}, listen {cfg.listen}; policy "
                   f"{cfg.policy or 'default'}: auto for {len(policy.auto)} incident(s); {len(registry.ids())} "
                   "runbooks)")
        return
    stop = threading.Event()
    _wait_for_signal(stop)
    try:
        service = _start(cfg)
    except ValueError as exc:
        raise fail(f"{config}: {exc}") from exc
    try:
        while not stop.wait(1.0):
            pass
    finally:
        service.stop()
