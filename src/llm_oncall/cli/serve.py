"""`llm-oncall serve --config FILE`: the on-call service (watch loop, Alertmanager receiver, HTTP API)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from llm_oncall.cli.common import fail


def serve(config: Annotated[Path, typer.Option("--config", "-c", help="Service config YAML (docs/service.md).")],
          check: Annotated[bool, typer.Option("--check", help="Validate the config and exit.")] = False) -> None:
    """The on-call service: watch loop over the source, Alertmanager receiver, incidents and approvals API."""
    from llm_oncall.service.config import ConfigError, load

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
    from llm_oncall.incidents import StoreError
    from llm_oncall.service.app import Service

    try:
        service = Service(cfg)
    except (StoreError, RuntimeError) as exc:
        raise fail(f"db {cfg.db}: {exc}", code=3) from exc
    except OSError as exc:
        raise fail(f"cannot start: {exc}", code=3) from exc
    except ValueError as exc:
        raise fail(f"{config}: {exc}") from exc
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    service.start()
    try:
        while not stop.wait(1.0):
            pass
    finally:
        service.stop()
