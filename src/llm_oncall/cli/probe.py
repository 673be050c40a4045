"""`llm-oncall probe ...`: the forward-progress liveness sidecar and the golden-prompt prober."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import httpx
import typer

from llm_oncall.evidence.outputs import is_garbage
from llm_oncall.probe.golden import (
    DEFAULT_MAX_TOKENS,
    GoldenProber,
    ProbeTarget,
    Refs,
    load_refs,
    majority_refs,
    probe_round,
    save_refs,
    summarize,
)
from llm_oncall.probe.liveness import LivenessConfig
from llm_oncall.probe.server import LivenessSidecar, http_fetch, parse_listen
from llm_oncall.signals.duration import parse_duration

app = typer.Typer(
    help="Liveness sidecar (engine forward progress) and golden-prompt prober.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _err(msg: str) -> None:
    typer.echo(msg, err=True)


def _duration(value: str, what: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=what) from None


@contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """Kubernetes stops containers with SIGTERM: treat it like Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _wait(stop: threading.Event, seconds: float | None) -> None:
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        while not stop.is_set():
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if left <= 0:
                break
            stop.wait(left)
    except KeyboardInterrupt:
        stop.set()


@app.command("serve")
def serve(
    target: Annotated[str, typer.Option(help="The vLLM /metrics URL to watch.")] = "http://127.0.0.1:8000/metrics",
    listen: Annotated[str, typer.Option(help="HOST:PORT for /livez and /metrics.")] = "127.0.0.1:8081",
    stall: Annotated[str, typer.Option(help="No engine step for this long, with requests present → 503.")] = "30s",
    interval: Annotated[str, typer.Option(help="Scrape interval.")] = "5s",
    unreachable_grace: Annotated[str, typer.Option(help="Failed scrapes for this long → 503.")] = "120s",
    timeout: Annotated[str | None, typer.Option(help="Scrape timeout (default: the interval, at most 10s).")
                       ] = None,
    duration: Annotated[str | None, typer.Option(help="Exit after this long (default: run until stopped).")
                        ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the last verdict as JSON on exit.")] = False,
) -> None:
    """Serve GET /livez (200 ok|idle, 503 stalled|unreachable) for a Kubernetes livenessProbe."""
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--listen") from None
    cfg = LivenessConfig(_duration(stall, "--stall"), _duration(unreachable_grace, "--unreachable-grace"))
    every = _duration(interval, "--interval")
    if every <= 0 or cfg.stall_s <= 0:
        raise typer.BadParameter("must be > 0", param_hint="--interval/--stall")
    scrape_timeout = _duration(timeout, "--timeout") if timeout else max(0.5, min(every, 10.0))
    run_for = _duration(duration, "--duration") if duration else None
    fetch, close = http_fetch(target, scrape_timeout)
    try:
        sidecar = LivenessSidecar(fetch, cfg, every, (host, port), target=target)
    except OSError as exc:
        close()
        _err(f"cannot listen on {host}:{port}: {exc}")
        raise typer.Exit(2) from None
    stop = threading.Event()
    _err(f"llm-oncall probe: watching {target} every {every:g}s; stall {cfg.stall_s:g}s, unreachable grace "
         f"{cfg.unreachable_grace_s:g}s; GET {sidecar.url}/livez")
    with _stop_on_sigterm(stop):
        sidecar.start()
        try:
            _wait(stop, run_for)
        finally:
            sidecar.stop()
            close()
    if as_json:
        typer.echo(json.dumps(sidecar.livez_body()[1]))


def _targets(target: list[str], revision_label: list[str], file_sd: Path | None) -> list[ProbeTarget]:
    revisions: dict[str, str] = {}
    for item in revision_label:
        name, sep, rev = item.partition("=")
        if not sep or not name or not rev:
            raise typer.BadParameter(f"{item!r}: expected NAME=REVISION", param_hint="--revision-label")
        revisions[name] = rev
    out: list[ProbeTarget] = []
    for item in target:
        name, sep, url = item.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise typer.BadParameter(f"{item!r}: expected NAME=http://HOST:PORT", param_hint="--target")
        out.append(ProbeTarget(name, url, revisions.get(name, "unknown")))
    if file_sd is not None:
        try:
            groups = json.loads(file_sd.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise typer.BadParameter(f"{file_sd}: {exc}", param_hint="--file-sd") from None
        for group in groups if isinstance(groups, list) else []:
            labels = group.get("labels", {}) if isinstance(group, dict) else {}
            if not isinstance(labels, dict) or labels.get("kind", "vllm") != "vllm":
                continue
            addrs = [str(a) for a in group.get("targets", [])]
            for addr in addrs:
                name = str(labels.get("pod")) if labels.get("pod") and len(addrs) == 1 else addr.replace(":", "-")
                out.append(ProbeTarget(name, f"http://{addr}", revisions.get(name, str(labels.get("revision",
                                                                                                  "unknown")))))
    if not out:
        raise typer.BadParameter("give at least one --target NAME=URL (or --file-sd)", param_hint="--target")
    return out


@app.command("golden")
def golden(
    refs: Annotated[Path, typer.Option(help="References file (written with --record, read otherwise).")],
    target: Annotated[list[str] | None, typer.Option(
        help="NAME=URL of an OpenAI-compatible server (repeatable), e.g. pod-a=http://10.0.0.7:8000.")] = None,
    revision_label: Annotated[list[str] | None, typer.Option(
        help="NAME=REVISION: the deployment revision of a target (repeatable; default 'unknown').")] = None,
    file_sd: Annotated[Path | None, typer.Option(help="Probe the kind=vllm targets of a file_sd JSON list "
                                                      "(pod and revision from its labels).")] = None,
    record: Annotated[bool, typer.Option("--record", help="Record references instead of checking.")] = False,
    rounds: Annotated[int, typer.Option(help="Passes over every prompt and target (0: until stopped).")] = 1,
    interval: Annotated[str, typer.Option(help="Pause between rounds.")] = "30s",
    max_tokens: Annotated[int, typer.Option(help="Tokens per answer when recording.")] = DEFAULT_MAX_TOKENS,
    timeout: Annotated[str, typer.Option(help="Per-request timeout.")] = "60s",
    listen: Annotated[str | None, typer.Option(help="HOST:PORT to serve the prober's /metrics while running.")
                      ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable summary.")] = False,
) -> None:
    """Send fixed prompts at temperature 0 to every target and count answers that differ from the references."""
    targets = _targets(target or [], revision_label or [], file_sd)
    pause = _duration(interval, "--interval")
    if rounds < 0 or (rounds == 0 and record):
        raise typer.BadParameter("rounds must be >= 1 when recording, >= 0 otherwise", param_hint="--rounds")
    if max_tokens < 1:
        raise typer.BadParameter("must be >= 1", param_hint="--max-tokens")
    references: Refs = {}
    if not record:
        try:
            references, max_tokens = load_refs(refs)
        except ValueError as exc:
            _err(str(exc))
            raise typer.Exit(2) from None
    prober = GoldenProber(references, max_tokens=max_tokens, garbage=is_garbage)
    answers: list[tuple[str, str, str]] = []
    stop = threading.Event()
    exporter = _serve_metrics(prober, listen) if listen else None
    done = 0
    try:
        with _stop_on_sigterm(stop), httpx.Client(timeout=_duration(timeout, "--timeout")) as client:
            while not stop.is_set() and (rounds == 0 or done < rounds):
                probe_round(prober, targets, client, lambda m, p, a: answers.append((m, p, a)))
                done += 1
                if rounds == 0 or done < rounds:
                    _wait(stop, pause)
    except KeyboardInterrupt:
        pass
    finally:
        if exporter is not None:
            exporter.shutdown()
            exporter.server_close()
    rows = summarize(prober.totals())
    out: dict[str, Any] = {"mode": "record" if record else "check", "rounds": done, "refs": str(refs),
                           "targets": rows,
                           "requests": sum(r["requests"] for r in rows),
                           "mismatches": sum(r["mismatches"] for r in rows),
                           "errors": sum(r["errors"] for r in rows)}
    if record:
        recorded = majority_refs(answers)
        if not recorded:
            _err("no target answered: nothing recorded")
            raise typer.Exit(1)
        save_refs(refs, recorded, max_tokens)
        out["models"] = {m: len(a) for m, a in recorded.items()}
    else:
        out["unanswered"] = sorted({t.pod for t in targets} - {r["pod"] for r in rows if r["requests"]})
        if out["unanswered"] and not as_json:
            _err("no compared answer from: " + ", ".join(out["unanswered"]) +
                 " (unreachable, or no references for the served model: record them with --record)")
    if as_json:
        typer.echo(json.dumps(out))
        return
    _print_summary(out)


def _print_summary(out: dict[str, Any]) -> None:
    typer.echo(f"golden-prompt {out['mode']}: {out['rounds']} round(s), {out['requests']} answers, "
               f"{out['mismatches']} mismatches, {out['errors']} errors")
    width = max([len(r["pod"]) for r in out["targets"]] + [3])
    for r in out["targets"]:
        ratio = "-" if r["mismatch_ratio"] is None else f"{r['mismatch_ratio']:.1%}"
        typer.echo(f"  {r['pod']:<{width}}  rev={r['revision']:<12} answers={r['requests']:<5} "
                   f"mismatches={r['mismatches']:<5} ({ratio}) errors={r['errors']}")
    if out["mode"] == "record":
        typer.echo(f"references written to {out['refs']}: " +
                   ", ".join(f"{m} ({n} prompts)" for m, n in out["models"].items()))


def _serve_metrics(prober: GoldenProber, listen: str) -> Any:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    try:
        addr = parse_listen(listen)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--listen") from None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_response(404)
                self.end_headers()
                return
            data = prober.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(addr, Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True, name="golden-metrics").start()
    print(f"prober metrics on http://{addr[0]}:{httpd.server_address[1]}/metrics", file=sys.stderr)
    return httpd
