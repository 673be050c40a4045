"""`diagnose --replay` on capture bundles, bad inputs, and `capture` against a local exporter."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.testkit import PageServer, free_port
from typer.testing import CliRunner

from llm_oncall.cli import app

from .pages import Engine, store_of

runner = CliRunner()


@pytest.fixture(autouse=True)
def wide_consoles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich wraps at the terminal width; keep tables and messages on one line."""
    from llm_oncall.cli import common as cli

    monkeypatch.setattr(cli.console, "width", 400)
    monkeypatch.setattr(cli.err_console, "width", 400)


def squash(text: str) -> str:
    return "".join(text.split())


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_bundle(root: Path) -> Path:
    """pod-a restarts at t=30; pod-b misses the t=30 scrape; pod-c is down at the end."""
    old = Engine("vllm-0.32", start_time=1.7e9).set(running=3, waiting=1, kv=0.5)
    old.preempt(1000).finish("stop", 9000)  # lifetime totals, long before the window
    _write(root / "pod-a/0.prom", old.render())
    old.preempt(3).finish("stop", 6)
    _write(root / "pod-a/15.prom", old.render())
    new = Engine("vllm-0.32", start_time=1.7e9 + 25).set(running=2, waiting=0, kv=0.1)
    new.preempt(2).finish("stop", 3)
    _write(root / "pod-a/30.prom", new.render())
    new.preempt(2).finish("stop", 3)
    _write(root / "pod-a/45.prom", new.render())
    _write(root / "pod-a/logs.txt", "INFO engine started\n")

    b = Engine("vllm-0.32").set(running=5, waiting=7, kv=0.8)
    _write(root / "pod-b/0.prom", b.render())
    _write(root / "pod-b/15.prom", b.preempt(9).render())
    _write(root / "pod-b/30.err", "ReadTimeout: timed out after 5s")
    _write(root / "pod-b/45.prom", b.preempt(9).render())

    c = Engine("vllm-0.32").set(running=9, waiting=9, kv=0.9)
    for t in (0, 15, 30):
        _write(root / f"pod-c/{t}.prom", c.render())
    _write(root / "pod-c/45.err", "ConnectError: connection refused")

    _write(root / "bundle.json", json.dumps({
        "interval": 15, "targets": {n: f"http://{n}:8000/metrics" for n in ("pod-a", "pod-b", "pod-c")}}))
    _write(root / "events.jsonl", json.dumps({"t": 20, "kind": "deploy", "detail": "vllm 0.32.0 rollout"}) + "\n")
    return root


def diagnose(path: Path, *extra: str) -> tuple[int, dict[str, Any] | None, str]:
    result = runner.invoke(app, ["diagnose", "--replay", str(path), "--json", *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    data = json.loads(result.stdout) if result.exit_code == 0 else None
    return result.exit_code, data, result.stderr


def _pods(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in data["snapshot"]["pods"]}


def test_replay_shows_windowed_rates_across_a_restart(tmp_path: Path) -> None:
    code, data, _ = diagnose(make_bundle(tmp_path / "bundle"), "--window", "45")
    assert code == 0 and data is not None
    pods = _pods(data)
    a, b, c = pods["pod-a"], pods["pod-b"], pods["pod-c"]
    # 3 before the restart + 2 counted from zero after it + 2: 7 in 45 s (lifetime total is 1000+)
    assert a["preemptions_per_s"] == pytest.approx(7 / 45)
    assert a["requests_per_s"] == pytest.approx(12 / 45)
    assert a["restarts"] == 1 and a["up"]
    for pod in (a, b):
        for key, value in pod.items():
            if key.endswith("_per_s") and value is not None:
                assert value >= 0, (pod["name"], key)
    # the failed scrape in the middle is bridged, not read as zero
    assert b["up"] and b["preemptions_per_s"] == pytest.approx(18 / 45) and b["running"] == 5
    # a target down at the end is unknown
    assert not c["up"] and "refused" in c["error"]
    assert c["running"] is None and c["kv_usage"] is None and c["preemptions_per_s"] is None
    fleet = data["snapshot"]["fleet"]
    assert (fleet["pods_total"], fleet["pods_up"]) == (3, 2)
    assert fleet["running"] == 7 and fleet["restarts"] == 1
    assert fleet["preemptions_per_s"] == pytest.approx(25 / 45)
    assert [e["kind"] for e in data["snapshot"]["events"]] == ["deploy"]


def test_replay_window_option(tmp_path: Path) -> None:
    code, data, _ = diagnose(make_bundle(tmp_path / "bundle"), "--window", "15")
    assert code == 0 and data is not None
    a = _pods(data)["pod-a"]
    assert a["preemptions_per_s"] == pytest.approx(2 / 15) and a["restarts"] == 0


def test_replay_table_output(tmp_path: Path) -> None:
    result = runner.invoke(app, ["diagnose", "--replay", str(make_bundle(tmp_path / "b")), "--window", "45"])
    assert result.exit_code == 0, result.output
    assert "pod-a" in result.stdout and "FLEET" in result.stdout and "2/3 up" in result.stdout


@pytest.mark.parametrize(("setup", "message"), [
    ("missing", "not a directory"),
    ("empty", "no <target>/<t>.prom files found"),
    ("bad-json", "bundle.json: not valid JSON"),
    ("json-list", "expected a JSON object"),
    ("bad-interval", "interval"),
    ("interval-list", "interval"),
    ("targets-list", "targets"),
    ("labels-string", "labels"),
    ("only-dcgm", "no vLLM telemetry"),
])
def test_bad_bundles_give_clear_errors(tmp_path: Path, setup: str, message: str) -> None:
    root = tmp_path / "bundle"
    if setup != "missing":
        root.mkdir()
    good_page = Engine("vllm-0.32").render()
    meta: str | None = {
        "bad-json": '{"interval": 15, "targets": ',
        "json-list": "[1, 2]",
        "bad-interval": '{"interval": "soon"}',
        "interval-list": '{"interval": [15]}',
        "targets-list": '{"interval": 15, "targets": ["http://a"]}',
        "labels-string": '{"interval": 15, "labels": "pod=a"}',
    }.get(setup)
    if meta is not None:
        _write(root / "bundle.json", meta)
        _write(root / "pod-a/0.prom", good_page)
    if setup == "only-dcgm":
        _write(root / "dcgm/node-1/0.prom", 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 5\n')
    code, data, stderr = diagnose(root)
    assert code == 2 and data is None
    assert "error" in stderr and squash(message) in squash(stderr)


def test_garbage_pages_and_names_are_warnings_not_failures(tmp_path: Path) -> None:
    root = make_bundle(tmp_path / "bundle")
    _write(root / "pod-c/45.err", "")  # still a failed scrape
    (root / "pod-b/45.prom").write_bytes(b'\xff\xfe{{{ garbage\nvllm:num_requests_running{model_name="m" 1\n')
    _write(root / "pod-a/notes.prom", "x 1\n")
    _write(root / "bad name!/0.prom", "x 1\n")
    _write(root / "events.jsonl", '{"t": 20, "kind": "deploy"}\nnot json\n{"kind": "no time"}\n')
    code, data, stderr = diagnose(root)
    assert code == 0 and data is not None
    stderr = squash(stderr)
    # the broken wanted line is counted; garbage that names no wanted family is skipped unread
    assert squash("45.prom: 1 unreadable line(s) ignored") in stderr
    assert "notes.prom:skipped" in stderr and "badname!" in stderr and "events.jsonl:2" in stderr
    b = _pods(data)["pod-b"]
    assert b["up"] and b["running"] is None  # the garbage page read nothing: unknown, not 0
    assert [e["kind"] for e in data["snapshot"]["events"]] == ["deploy"]


# -- capture against a local exporter ---------------------------------------------------------------

class _Exporter:
    """A vLLM-like /metrics endpoint whose counters move by a fixed amount per scrape."""

    def __init__(self) -> None:
        self.engine = Engine("vllm-0.32").set(running=4, waiting=6, kv=0.7)
        self.served: list[str] = []
        self.lock = threading.Lock()
        self.page = PageServer(self._render)
        self.url = self.page.url

    def _render(self) -> bytes:
        with self.lock:
            body = self.engine.render().encode()
            self.served.append(body.decode())
            self.engine.preempt(2).finish("stop", 5).tokens(100, 50).observe("ttft", 0.05, 9)
            self.engine.observe("ttft", 0.7, 1)
        return body

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def exporter() -> Iterator[_Exporter]:
    e = _Exporter()
    yield e
    e.close()


def test_capture_writes_a_bundle_that_replays_to_the_same_values(tmp_path: Path, exporter: _Exporter) -> None:
    out = tmp_path / "capture"
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    result = runner.invoke(app, ["capture", "--target", f"vllm-0={exporter.url}", "--target", f"dead={dead}",
                                 "--out", str(out), "--duration", "1", "--interval", "0.5", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scrapes"] == 6
    meta = json.loads((out / "bundle.json").read_text())
    assert meta["interval"] == 0.5 and meta["targets"] == {"vllm-0": exporter.url, "dead": dead}
    pages = sorted(out.glob("vllm-0/*.prom"), key=lambda p: float(p.stem))
    assert len(pages) == 3 and len(list(out.glob("dead/*.err"))) == 3
    assert [p.read_text() for p in pages] == exporter.served  # raw pages, byte for byte
    times = [float(p.stem) for p in pages]
    # offsets from the first scrape, one per round (how far apart depends on the machine: the rates below are
    # computed over the recorded span, so they need no bound on it)
    assert times[0] == 0.0 and times == sorted(set(times))

    code, data, _ = diagnose(out, "--window", "10")
    assert code == 0 and data is not None
    pods = _pods(data)
    live = pods["vllm-0"]
    span = times[-1] - times[0]
    assert live["preemptions_per_s"] == pytest.approx(2 * 2 / span, rel=1e-6)
    assert live["requests_per_s"] == pytest.approx(2 * 5 / span, rel=1e-6)
    assert (live["running"], live["waiting"], live["kv_usage"]) == (4, 6, 0.7)
    assert not pods["dead"]["up"] and pods["dead"]["running"] is None
    # the same pages fed straight into a Store give the same snapshot
    direct = store_of({"vllm-0": list(zip(times, exporter.served, strict=True))}, interval=0.5).snapshot(window_s=10)
    expected = direct.pods[0].to_json()
    for key in ("running", "waiting", "kv_usage", "preemptions_per_s", "requests_per_s", "ttft_p50", "ttft_p99",
                "generation_tokens_per_s", "restarts"):
        assert live[key] == pytest.approx(expected[key]), key


def test_capture_refuses_a_non_empty_directory(tmp_path: Path, exporter: _Exporter) -> None:
    out = tmp_path / "capture"
    _write(out / "keep.txt", "mine")
    result = runner.invoke(app, ["capture", "--target", exporter.url, "--out", str(out), "--duration", "1",
                                 "--interval", "0.5"])
    assert result.exit_code == 2 and "notempty" in squash(result.stderr)
    assert exporter.served == []
