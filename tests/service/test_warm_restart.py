"""kill -9 of `serve` in the middle of an engine hang, then a restart: the recent rounds are replayed from the store,
so the first round after the restart is still engine-hang (not `healthy` on two fresh scrapes), and the incident is
re-joined, not opened again. The fleet runs in this process in real time (sim serve); the service scrapes its
file_sd list over HTTP, like a real deployment."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from tests.service.conftest import API, WEBHOOK, auth
from tests.testkit import db_rows, free_port, http_ok, spawn_serve, start_sim, wait_for

from llm_oncall.sim import Fleet, scenario


def test_kill_9_mid_hang_the_restart_still_sees_the_hang(tmp_path: Path) -> None:
    cfg_, fault = scenario("engine-hang", 3, at=90.0)
    fleet = Fleet(cfg_, seed=3, fault=fault)
    sim, sd, _ = start_sim(fleet, 30.0, tmp_path)
    db = tmp_path / "incidents.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(yaml.safe_dump({
        "listen": f"127.0.0.1:{port}", "db": str(db), "source": {"file_sd": str(sd)}, "interval": "0.5s",
        "mode": "propose", "auth": {"webhook": [WEBHOOK], "api": [API]}}))
    log = tmp_path / "serve.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        wait_for(sd.is_file, 10, "the file_sd list")
        procs.append(spawn_serve(cfg, log))
        wait_for(lambda: http_ok(f"{url}/healthz"), 30, "serve to answer /healthz")

        def incidents() -> list[dict[str, Any]]:
            return list(httpx.get(f"{url}/api/v1/incidents", headers=auth(API)).json())

        try:
            wait_for(lambda: any(i["incident"] == "engine-hang" for i in incidents()), 120, "an engine-hang incident")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; sim lag {sim.lag_s:.1f}s; serve log tail:\n{log.read_text()[-3000:]}") \
                from None
        first = incidents()
        rounds = httpx.get(f"{url}/healthz").json()["rounds"]
        wait_for(lambda: httpx.get(f"{url}/healthz").json()["rounds"] >= rounds + 6, 30, "6 rounds into the hang")
        procs[0].kill()  # kill -9
        procs[0].wait(10)
        assert procs[0].returncode == -signal.SIGKILL
        killed_at = time.time()

        procs.append(spawn_serve(cfg, log))
        wait_for(lambda: http_ok(f"{url}/healthz"), 30, "serve to answer /healthz again")
        wait_for(lambda: bool(db_rows(db, "SELECT 1 FROM telemetry WHERE scope = 'diagnosis' AND t > ?",
                                      (killed_at,))), 30, "a round after the restart")
        after = db_rows(db, "SELECT signal, value FROM telemetry WHERE scope = 'diagnosis' AND t > ? "
                        "ORDER BY t LIMIT 1", (killed_at,))
        assert after == [("engine-hang", 2.0)], after  # the first round after the restart pages the hang
        lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
        warm = [x for x in lines if x["msg"].startswith("warm restart")]
        assert warm and warm[-1]["rounds"] >= 5, warm
        rounds = httpx.get(f"{url}/healthz").json()["rounds"]
        wait_for(lambda: httpx.get(f"{url}/healthz").json()["rounds"] >= rounds + 4, 30, "4 more rounds")
        now = incidents()
        assert [i["id"] for i in now] == [i["id"] for i in first], (first, now)  # re-joined, not reopened
        tl = httpx.get(f"{url}/api/v1/incidents/{first[0]['id']}", headers=auth(API)).json()["timeline"]
        assert sum(1 for e in tl if e["kind"] == "status" and e["detail"]["status"] == "open") == 1
        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(30) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        sim.stop()
