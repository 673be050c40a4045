"""kill -9 of a `serve` process in the middle of an action, then a restart: the intent the ledger recorded before
the call is reconciled against the cluster (the write had landed → recorded as executed) and the action is not
sent again.  The fleet and its Kubernetes API run in this process (sim serve in real time), the service scrapes
its file_sd list over HTTP and acts through lightkube; SIGTERM then stops it cleanly."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import yaml
from tests.service.conftest import API, APPROVE, WEBHOOK, auth
from tests.testkit import db_rows, free_port, http_ok, spawn_serve, start_sim, wait_for

from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.autoscaler import HpaConfig

NS, DEP = "llm", "vllm-llama-8b"
ONSET_S = 600.0


def test_kill_9_mid_action_then_restart_reconciles_without_duplicate(tmp_path: Path) -> None:
    # no HPA: the scale-out is the /scale write the fault below hits
    # The onset leaves serve time to start and learn the healthy baseline first: on a loaded machine starting the
    # process takes seconds, i.e. minutes of the fleet's time at 30×, and a serve that first sees the fleet in the
    # middle of the surge (no baseline) rightly answers `unknown`.
    cfg_, fault = scenario("kv-capacity", 3, pods=3, at=ONSET_S, hpa=HpaConfig())
    fleet = Fleet(cfg_, seed=3, fault=fault)
    sim, sd, kc = start_sim(fleet, 30.0, tmp_path)
    assert sim.kube is not None
    kube_url = sim.kube.url
    db = tmp_path / "incidents.db"
    (tmp_path / "policy.yaml").write_text("cooldown_s: {default: 600}\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(yaml.safe_dump({
        "listen": f"127.0.0.1:{port}", "db": str(db), "source": {"file_sd": str(sd)}, "interval": "0.5s",
        "mode": "approve", "policy": str(tmp_path / "policy.yaml"), "kubeconfig": str(kc), "kube_timeout": "20s",
        "auth": {"webhook": [WEBHOOK], "api": [API], "approve": [APPROVE]}}))
    log = tmp_path / "serve.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        wait_for(sd.is_file, 10, "the file_sd list")
        procs.append(spawn_serve(cfg, log))
        wait_for(lambda: http_ok(f"{url}/healthz"), 30, "serve to answer /healthz")
        assert fleet.now < ONSET_S - 120, f"serve started only {ONSET_S - fleet.now:.0f} s before the onset"

        def plan() -> dict[str, Any] | None:
            incs = httpx.get(f"{url}/api/v1/incidents", headers=auth(API)).json()
            if not incs or not incs[0]["plan_id"]:
                return None
            inc = httpx.get(f"{url}/api/v1/incidents/{incs[0]['id']}", headers=auth(API)).json()
            return inc if inc["plan"] else None

        try:
            wait_for(lambda: plan() is not None, 180, "a kv-capacity incident with a plan")
        except AssertionError as exc:  # say what the service saw (a loaded machine slows the real-time fleet)
            raise AssertionError(f"{exc}; sim lag {sim.lag_s:.1f}s; serve log tail:\n"
                                 f"{log.read_text()[-3000:]}") from None
        inc = plan()
        assert inc is not None and inc["incident"] == "kv-capacity"
        scale = next(a for a in inc["plan"]["actions"] if a["kind"] == "scale_out")
        want = int(scale["params"]["replicas"])
        # the scale write lands, then the API never answers: the process is inside the call when it dies
        r = httpx.post(f"{kube_url}/_sim/faults", json={"method": "PATCH", "path": "/scale$", "code": 0,
                                                         "delay_s": 30, "when": "after", "count": 1})
        assert r.status_code == 200
        r = httpx.post(f"{url}/api/v1/actions/{scale['id']}/approve", headers=auth(APPROVE), json={"by": "alice"})
        assert r.status_code == 202, r.text

        def replicas() -> int:
            d = httpx.get(f"{kube_url}/apis/apps/v1/namespaces/{NS}/deployments/{DEP}").json()
            return int(d["spec"]["replicas"])

        wait_for(lambda: replicas() == want, 60, "the scale write to land")
        wait_for(lambda: db_rows(db, "SELECT status FROM executions") == [("started",)], 10,
                 "the intent (started, no result) in the ledger")
        procs[0].kill()  # kill -9, mid-call
        procs[0].wait(10)
        assert procs[0].returncode == -signal.SIGKILL
        seen = len(sim.kube.audit)
        httpx.delete(f"{kube_url}/_sim/faults")

        procs.append(spawn_serve(cfg, log))
        wait_for(lambda: http_ok(f"{url}/healthz"), 30, "serve to answer /healthz again")
        wait_for(lambda: db_rows(db, "SELECT status FROM executions") == [("executed",)], 30,
                 "the intent reconciled as executed")
        rounds = httpx.get(f"{url}/healthz").json()["rounds"]
        wait_for(lambda: httpx.get(f"{url}/healthz").json()["rounds"] >= rounds + 10, 60, "10 more rounds")
        steps = [s for (s,) in db_rows(db, "SELECT step FROM audit ORDER BY seq")]
        assert steps.count("execute") == 1 and "reconciled" in steps
        # never sent again (a dry-run of the scale-out's next step, offered for approval, is not a write)
        scale_writes = [e for e in list(sim.kube.audit)[seen:] if e["verb"] == "patch" and not e["dryRun"]
                        and (e.get("objectRef") or {}).get("subresource") == "scale"]
        assert scale_writes == []
        assert replicas() == want
        tl = httpx.get(f"{url}/api/v1/incidents/{inc['id']}", headers=auth(API)).json()["timeline"]
        rec = [e for e in tl if e["kind"] == "action" and e["actor"] == "reconcile"]
        assert rec and rec[0]["detail"]["status"] == "executed"
        assert any(e["kind"] == "approval" and e["actor"].startswith("alice") for e in tl)

        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(30) == 0
        lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
        assert lines[-1]["msg"] == "stopped"
        assert any(x["msg"] == "intent reconciled" and x["outcome"] == "executed" for x in lines)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        sim.stop()
