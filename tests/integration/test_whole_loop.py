"""The whole loop with real parts (issue 15 item 7).

`sim serve` (in this process, with its Kubernetes API) → a real Prometheus (Debian) scraping its file_sd list with
the exported rules → a real Alertmanager (Debian `prometheus-alertmanager`) routing `source="llm-oncall"` to
`llm-oncall serve` (a subprocess, approve mode, the simulator's kubeconfig):

an engine hang injected in the simulator → Prometheus alert → Alertmanager webhook → incident with the right
diagnosis → approval through the API → the restart executed on the simulator's Kubernetes API → the engine steps
again → resolved alert → incident resolved. Each step's time (wall seconds from the fault's onset) is printed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from tests.rules.live import query
from tests.service.conftest import API, APPROVE, WEBHOOK, auth
from tests.testkit import free_port, http_ok, run_prometheus, spawn_serve, start_sim, stop_process, wait_for

from llm_oncall.runbooks import promrules
from llm_oncall.runbooks.loader import builtin
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.serve import SimServer

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("prometheus")]

ALERTMANAGER = shutil.which("alertmanager") or shutil.which("prometheus-alertmanager")
SPEED = 3.0       # simulated seconds per wall second
ONSET_S = 90.0    # simulated: 30 s of wall time before the fault, for the windows to fill
# The rule windows scaled to the test's minutes (the expressions are the user's; only the ranges shrink).
PARAMS = {"window": "20s", "short": "10s", "baseline": "60s", "offset": "20s"}


def _alertmanager(tmp: Path, receiver_url: str) -> Iterator[str]:
    if ALERTMANAGER is None:
        if os.environ.get("CI"):
            pytest.fail("alertmanager is missing (Debian package `prometheus-alertmanager`) and CI is set")
        pytest.skip("alertmanager is not installed (apt-get install prometheus-alertmanager)")
    port = free_port()
    cfg = tmp / "alertmanager.yml"
    cfg.write_text(yaml.safe_dump({
        "route": {"receiver": "null", "group_by": ["alertname", "namespace"], "group_wait": "1s",
                  "group_interval": "2s", "repeat_interval": "1h",
                  "routes": [{"receiver": "llm-oncall", "matchers": ['source="llm-oncall"']}]},
        "receivers": [{"name": "null"}, {"name": "llm-oncall", "webhook_configs": [{
            "url": receiver_url, "send_resolved": True, "max_alerts": 0,
            "http_config": {"authorization": {"type": "Bearer", "credentials": WEBHOOK}}}]}]}))
    log = (tmp / "alertmanager.log").open("w")
    proc = subprocess.Popen([ALERTMANAGER, f"--config.file={cfg}", f"--storage.path={tmp / 'am-data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
                             "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is None and http_ok(f"{url}/-/ready"), 30, "Alertmanager to be ready")
        yield url
    finally:
        stop_process(proc)
        log.close()


class Steps:
    """Each step's wall time from the fault's onset, printed as it happens."""

    def __init__(self) -> None:
        self.onset: float | None = None
        self.times: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.times[name] = now - (self.onset if self.onset is not None else now)
        print(f"  {self.times[name]:7.1f}s  {name}", flush=True)

    def wait(self, name: str, check: Callable[[], bool], timeout_s: float, why: Callable[[], str]) -> None:
        try:
            wait_for(check, timeout_s, name)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{why()}") from None
        self.mark(name)


def test_fault_to_alert_to_incident_to_fix_to_resolved(tmp_path: Path) -> None:
    print()
    rules_dir = tmp_path / "rules"
    promrules.export(rules_dir, builtin(), PARAMS)
    cfg_, fault = scenario("engine-hang", 3, pods=8, at=ONSET_S)  # a TP group of 2 = 25 % of the pods
    fleet = Fleet(cfg_, seed=3, fault=fault)
    sim, sd, kc = start_sim(fleet, SPEED, tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (tmp_path / "policy.yaml").write_text("cooldown_s: {default: 600}\n")
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(yaml.safe_dump({
        "listen": f"127.0.0.1:{port}", "db": str(tmp_path / "incidents.db"), "source": {"file_sd": str(sd)},
        "interval": "1s", "mode": "approve", "policy": str(tmp_path / "policy.yaml"), "kubeconfig": str(kc),
        "kube_timeout": "20s", "resolve_after": 3, "auth": {"webhook": [WEBHOOK], "api": [API], "approve": [APPROVE]}}))
    serve_log = tmp_path / "serve.log"
    serve: subprocess.Popen[bytes] | None = None
    steps = Steps()
    try:
        wait_for(sd.is_file, 10, "the file_sd list")
        serve = spawn_serve(cfg, serve_log)
        wait_for(lambda: http_ok(f"{url}/healthz"), 30, "serve to answer /healthz")
        for am in _alertmanager(tmp_path, f"{url}/api/v1/alerts"):
            prom_cfg = (f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{am[7:]}']\n"
                        f"rule_files: ['{rules_dir / promrules.RULES_FILE}']\n"
                        f"scrape_configs:\n  - job_name: sim\n    file_sd_configs:\n"
                        f"      - files: ['{sd}']\n        refresh_interval: 1s\n")
            for prom in run_prometheus(tmp_path, prom_cfg):
                _loop(steps, sim, fleet, url, am, prom, serve_log)
    finally:
        if serve is not None:
            stop_process(serve, grace_s=30)
        sim.stop()
    print("steps (s from onset): " + ", ".join(f"{k} {v:.1f}" for k, v in steps.times.items()))


def _loop(steps: Steps, sim: SimServer, fleet: Fleet, url: str, am: str, prom: str, serve_log: Path) -> None:
    alert = promrules.alert_name("engine-hang")

    def incidents() -> list[dict[str, Any]]:
        return list(httpx.get(f"{url}/api/v1/incidents", headers=auth(API), timeout=10).json())

    first: list[str] = []  # the incident of the fault (a later one, e.g. after the restart, is another)

    def incident() -> dict[str, Any] | None:
        if not first:
            incs = incidents()
            if not incs:
                return None
            first.append(incs[-1]["id"])
        body: dict[str, Any] = httpx.get(f"{url}/api/v1/incidents/{first[0]}", headers=auth(API), timeout=10).json()
        return body

    def firing() -> list[dict[str, Any]]:
        return query(prom, f'ALERTS{{alertname="{alert}", alertstate="firing"}}')

    def why() -> str:
        inc = incident()
        return (f"sim t={fleet.now:.0f}s lag {sim.lag_s:.1f}s; ALERTS: "
                f"{[(s['metric'].get('alertname'), s['metric'].get('alertstate')) for s in query(prom, 'ALERTS')]}; "
                f"incident: {json.dumps({k: inc.get(k) for k in ('incident', 'status', 'alerts')}) if inc else None}"
                f"\nserve log tail:\n{serve_log.read_text()[-2500:]}")

    def quiet() -> bool:
        # firing, not pending: a rule over the first minute's few requests may go pending for a scrape or two (one
        # pod's inter-token latency at 2× its peers' on a handful of samples), which is what its `for:` holds back
        return not query(prom, 'ALERTS{source="llm-oncall", alertstate="firing"}')

    # Before the fault: the fleet is healthy and no llm-oncall alert fires.
    wait_for(lambda: len(query(prom, "pod:vllm_requests_running:sum")) >= 8, 60, "eight pods in Prometheus")
    assert fleet.now < ONSET_S, "the fleet reached the fault before Prometheus saw it (machine too slow?)"
    assert quiet(), why()
    wait_for(lambda: fleet.now >= ONSET_S, ONSET_S / SPEED + 60, "the fault's onset")
    steps.onset, onset_epoch = time.monotonic(), time.time()
    steps.mark("fault injected (engine-hang)")
    steps.wait("Prometheus alert firing", lambda: bool(firing()), 120, why)
    hung = sorted(s["metric"]["pod"] for s in firing())

    def alert_in_store() -> bool:
        inc = incident()
        return bool(inc and any(a["alertname"] == alert and a["status"] == "firing" for a in inc["alert_list"]))

    steps.wait("Alertmanager webhook → incident", alert_in_store, 60, why)
    opened = (incident() or {}).get("opened_at_s")
    if opened is not None:  # serve's own watch loop (scraping every second) may have opened it already
        by_watch = float(opened) < onset_epoch + steps.times["Prometheus alert firing"]
        print(f"  ({float(opened) - onset_epoch:5.1f}s  the incident was opened, by "
              f"{'the watch loop' if by_watch else 'the alert'})")
    steps.wait("diagnosis engine-hang", lambda: (incident() or {}).get("incident") == "engine-hang", 120, why)
    steps.wait("plan proposed", lambda: bool((incident() or {}).get("plan")), 60, why)
    inc = incident()
    assert inc is not None
    actions = [a for a in inc["plan"]["actions"] if a["kind"] in ("restart_group", "taint_node")]
    assert any(a["kind"] == "restart_group" for a in actions), inc["plan"]
    for a in actions:
        r = httpx.post(f"{url}/api/v1/actions/{a['id']}/approve", headers=auth(APPROVE), json={"by": "alice"},
                       timeout=10)
        assert r.status_code == 202, r.text
    steps.mark("approved through the API (" + ", ".join(a["kind"] for a in actions) + ")")

    def executed() -> set[str]:
        tl = (incident() or {}).get("timeline", [])
        return {e["detail"]["kind"] for e in tl if e["kind"] == "action" and e["detail"].get("status") == "executed"}

    steps.wait("restart executed on the Kubernetes API", lambda: "restart_group" in executed(), 60, why)
    assert sim.kube is not None
    writes = [(m, p) for m, p, code in sim.kube.faults.log if m in ("DELETE", "PATCH", "POST") and code < 300]
    print(f"  writes on the simulator's Kubernetes API (server-side dry runs included): {writes}; hung {hung}")
    assert any(m == "DELETE" and "/pods" in p for m, p in writes) or any("leaderworkersets" in p for _, p in writes)

    def stepping_again() -> bool:
        return not firing() and all(query(prom, f'pod:vllm_engine_steps:increase{{pod="{p}"}} > 0') for p in hung)

    def resolved_in_store() -> bool:
        inc = incident()
        return bool(inc and inc["alert_list"] and all(a["status"] == "resolved" for a in inc["alert_list"]))

    def incident_resolved() -> bool:
        return (incident() or {}).get("status") == "resolved"

    # The last steps overlap (the alert may resolve before every restarted pod steps again): each is timed when
    # first seen.
    pending = {"symptoms recover (the hung pods step again, no hang alert)": stepping_again,
               "resolved alert delivered": resolved_in_store, "incident resolved": incident_resolved}
    deadline = time.monotonic() + 240
    while pending and time.monotonic() < deadline:
        for name, check in list(pending.items()):
            if check():
                steps.mark(name)
                del pending[name]
        time.sleep(0.5)
    assert not pending, f"never seen: {list(pending)}\n{why()}"
    inc = incident()
    assert inc is not None
    tl = inc["timeline"]
    assert any(e["kind"] == "approval" and e["actor"].startswith("alice") for e in tl)
    assert [e["detail"]["status"] for e in tl if e["kind"] == "status"][-1] == "resolved"
    # Resolved only once the fix took effect: the restarted pods answer and step again (the recovery signal), not
    # while they restart unscraped and nothing about them pages.
    statuses = [e for e in tl if e["kind"] in ("status", "verification")]
    helped = next(i for i, e in enumerate(statuses) if e["kind"] == "verification"
                  and e["detail"].get("verdict") == "helped")
    assert helped < next(i for i, e in enumerate(statuses) if e["kind"] == "status"
                         and e["detail"]["status"] == "resolved"), statuses
    done = [e["detail"]["kind"] for e in tl if e["kind"] == "action" and e["detail"].get("status") == "executed"]
    assert sorted(done) == sorted(a["kind"] for a in actions)  # each approved action executed once
    others = [(i["incident"], i["status"]) for i in incidents() if i["id"] != first[0]]
    print(f"  other incidents while the test ran: {others}")
    assert am and http_ok(f"{am}/-/ready")
