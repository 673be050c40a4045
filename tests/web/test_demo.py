"""`llm-oncall serve --demo`: one command gives a running console on a simulated fleet with an incident to approve."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from tests.testkit import free_port, stop_process, wait_for

SRC = Path(__file__).resolve().parents[2] / "src"


def test_demo_prints_tokens_and_serves_an_incident_to_approve() -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, "-m", "llm_oncall.cli", "serve", "--demo", "--listen",
                             f"127.0.0.1:{port}", "--interval", "0.2", "--cycle", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(ln.startswith("cycle 1") for ln in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.strip())
        out = "\n".join(lines)
        tokens = dict(re.findall(r"^\s*(approve|override|api|webhook)\s+(\S+)$", out, re.M))
        assert set(tokens) == {"approve", "override", "api", "webhook"}, out
        assert f"http://127.0.0.1:{port}/" in out
        url = f"http://127.0.0.1:{port}"
        auth = {"Authorization": f"Bearer {tokens['approve']}"}

        def planned() -> bool:
            incs = httpx.get(f"{url}/api/v1/incidents", headers=auth, timeout=5).json()
            return bool(incs) and bool(httpx.get(f"{url}/api/v1/incidents/{incs[0]['id']}", headers=auth,
                                                 timeout=5).json().get("plan"))

        wait_for(planned, 60, "the demo's first incident with a plan")
        inc = httpx.get(f"{url}/api/v1/incidents", headers=auth).json()[0]
        assert inc["incident"] == "kv-capacity"
        plan = httpx.get(f"{url}/api/v1/incidents/{inc['id']}", headers=auth).json()["plan"]
        assert any(a["guard"]["approvable"] for a in plan["actions"])  # approve mode: waiting for a human
        c = httpx.Client(base_url=url)
        page = c.get("/login").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf is not None
        assert c.post("/login", data={"csrf": csrf.group(1), "token": tokens["approve"]}).status_code == 303
        assert inc["id"] in c.get("/incidents").text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert proc.stderr is not None
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            stop_process(proc)
