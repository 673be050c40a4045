"""Two `serve` replicas (real processes), one Lease: the leader is killed with SIGKILL in the middle of an action,
the other takes over, and the action is not sent twice.

As in a real Deployment each replica has a disk of its own (two SQLite files): what was done must come from the
cluster. The leader records each action in its Lease (a conditional write just before the API call) — the new
leader reads the record with the lease and its guard refuses the same action on the same target (cooldown).
The fleet and its Kubernetes API run in this process (the simulator in real time); the audit log of that API is
the witness: exactly one scale write, ever. Every wait is on a condition (bounded by a generous timeout).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from tests.service.conftest import API, APPROVE, WEBHOOK, auth
from tests.testkit import free_port, spawn_serve, start_sim, wait_for

from llm_oncall.service.leader import RECORD
from llm_oncall.sim import Fleet, scenario
from llm_oncall.sim.autoscaler import HpaConfig
from llm_oncall.sim.kubeapi.model import BY_KIND

NS, DEP, LEASE = "llm", "vllm-llama-8b", "llm-oncall"
ONSET_S, SPEED = 900.0, 30.0
DURATION_S, RENEW_S = 8, 2.0  # a renew deadline of 6 s: a loaded machine does not stall a process that long


def _t(micro: str) -> float:
    return datetime.fromisoformat(micro.replace("Z", "+00:00")).timestamp()


def test_leader_killed_mid_action_the_follower_takes_over_and_never_repeats_it(tmp_path: Path) -> None:
    # the onset comes after both replicas run (30 s of wall time at 30×): the follower has a baseline from before
    # the incident, as a replica of a long-running Deployment has
    # no HPA: the scale-out is the /scale write the fault below hits
    cfg_, fault = scenario("kv-capacity", 3, pods=3, at=ONSET_S, hpa=HpaConfig())
    fleet = Fleet(cfg_, seed=3, fault=fault)
    sim, sd, kc = start_sim(fleet, SPEED, tmp_path)
    assert sim.kube is not None
    kube = sim.kube
    # one replica more per action: the first scale-out is not enough, the page goes on after the hand-over and the
    # new leader plans the same action again (the duplicate a replica with its own disk would send)
    # (a step of 1 and no relative allowance: the default factor would let the first step double the 3 replicas and
    # end the surge before the hand-over, and the new leader would rightly see a healthy fleet)
    (tmp_path / "policy.yaml").write_text("cooldown_s: {default: 600}\n"
                                          "caps: {scale_out_max_step: 1, scale_out_max_factor: 1.0}\n")
    replicas: dict[str, dict[str, Any]] = {}
    for who in ("a", "b"):
        port = free_port()
        home = tmp_path / who  # each replica its own disk
        home.mkdir()
        cfg = home / "serve.yaml"
        cfg.write_text(yaml.safe_dump({
            "listen": f"127.0.0.1:{port}", "db": str(home / "incidents.db"), "source": {"file_sd": str(sd)},
            "interval": "0.5s", "mode": "approve", "policy": str(tmp_path / "policy.yaml"), "kubeconfig": str(kc),
            "kube_timeout": "20s", "auth": {"webhook": [WEBHOOK], "api": [API], "approve": [APPROVE]},
            "leader_election": {"enabled": True, "lease_name": LEASE, "duration_s": DURATION_S, "renew_s": RENEW_S,
                                "identity": f"replica-{who}"}}))
        replicas[who] = {"cfg": cfg, "url": f"http://127.0.0.1:{port}", "log": home / "serve.log"}
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def lease() -> dict[str, Any]:
        return dict(kube.cluster.store.get(("leases.coordination.k8s.io", NS, LEASE)) or {})

    def holder() -> str:
        return str((lease().get("spec") or {}).get("holderIdentity") or "")

    def health(who: str) -> dict[str, Any]:
        try:
            return dict(httpx.get(f"{replicas[who]['url']}/healthz", timeout=2).json())
        except httpx.HTTPError:
            return {}

    def plan(who: str) -> dict[str, Any] | None:
        url = replicas[who]["url"]
        incs = httpx.get(f"{url}/api/v1/incidents", headers=auth(API), timeout=5).json()
        if not incs or not incs[0]["plan_id"]:
            return None
        inc = httpx.get(f"{url}/api/v1/incidents/{incs[0]['id']}", headers=auth(API), timeout=5).json()
        return dict(inc) if inc["plan"] else None

    def scale_writes() -> list[dict[str, Any]]:
        return [e for e in list(kube.audit) if e["verb"] == "patch" and not e["dryRun"]
                and (e.get("objectRef") or {}).get("subresource") == "scale"]

    def tail(who: str) -> str:
        return replicas[who]["log"].read_text()[-3000:] if replicas[who]["log"].exists() else ""

    try:
        wait_for(sd.is_file, 10, "the file_sd list")
        procs["a"] = spawn_serve(replicas["a"]["cfg"], replicas["a"]["log"])
        wait_for(lambda: health("a").get("leader") is True, 30, "replica a to lead")
        procs["b"] = spawn_serve(replicas["b"]["cfg"], replicas["b"]["log"])
        wait_for(lambda: bool(health("b")), 30, "replica b to answer /healthz")
        assert health("b")["leader"] is False and health("b")["holder"] == "replica-a"
        assert fleet.now < ONSET_S - 120, f"replica b started only {ONSET_S - fleet.now:.0f} s before the onset"
        assert holder() == "replica-a"
        # the follower diagnoses but stands by: alerts and approvals belong to the leader
        assert httpx.get(f"{replicas['b']['url']}/readyz").status_code == 503
        assert httpx.get(f"{replicas['a']['url']}/readyz").status_code == 200
        r = httpx.post(f"{replicas['b']['url']}/api/v1/alerts", headers=auth(WEBHOOK), json={})
        assert r.status_code == 503 and r.headers.get("Retry-After")  # Alertmanager re-sends, to the leader

        try:
            wait_for(lambda: plan("a") is not None, 180, "a kv-capacity incident with a plan on the leader")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; sim lag {sim.lag_s:.1f}s; leader log tail:\n{tail('a')}") from None
        inc = plan("a")
        assert inc is not None and inc["incident"] == "kv-capacity"
        assert httpx.get(f"{replicas['b']['url']}/api/v1/incidents", headers=auth(API)).json() == []
        scale = next(a for a in inc["plan"]["actions"] if a["kind"] == "scale_out")
        want = int(scale["params"]["replicas"])
        assert want == 4, scale  # one replica more: not enough for the surge, which goes on after the hand-over
        # the scale write lands, then the API never answers: the leader is inside the call when it dies
        r = httpx.post(f"{kube.url}/_sim/faults", json={"method": "PATCH", "path": "/scale$", "code": 0,
                                                         "delay_s": 30, "when": "after", "count": 1})
        assert r.status_code == 200
        r = httpx.post(f"{replicas['a']['url']}/api/v1/actions/{scale['id']}/approve", headers=auth(APPROVE),
                       json={"by": "alice"})
        assert r.status_code == 202, r.text

        def current() -> int:
            return int(kube.cluster.get(BY_KIND["Deployment"], NS, DEP)["spec"]["replicas"])

        wait_for(lambda: current() == want, 60, "the scale write to land")
        record = json.loads(lease()["metadata"]["annotations"][RECORD])
        assert [(x["kind"], x["by"], x["status"]) for x in record] == [("scale_out", "replica-a", "started")]
        last_renew = _t(lease()["spec"]["renewTime"])
        procs["a"].kill()  # SIGKILL, mid-call
        killed = time.time()
        procs["a"].wait(10)
        assert procs["a"].returncode == -signal.SIGKILL
        httpx.delete(f"{kube.url}/_sim/faults")

        wait_for(lambda: holder() == "replica-b", 60, "replica b to take the lease")
        handover = time.time() - killed
        spec = lease()["spec"]
        assert spec["leaseTransitions"] == 1
        # safety: b took the lease only after a full lease duration without a renew (same machine, same clock)
        assert _t(spec["acquireTime"]) - last_renew >= DURATION_S
        print(f"\nhand-over: {handover:.2f} s from SIGKILL to the new holder (lease {DURATION_S} s, renew "
              f"{RENEW_S:g} s); {_t(spec['acquireTime']) - last_renew:.2f} s after the last renew")
        wait_for(lambda: health("b").get("leader") is True, 30, "replica b to say it leads")
        assert httpx.get(f"{replicas['b']['url']}/readyz").status_code == 200

        # b opens its own incident (its own disk) and plans; the cluster's record blocks the repeat
        try:
            wait_for(lambda: plan("b") is not None, 120, "an incident with a plan on the new leader")
        except AssertionError as exc:
            pods = [(p.name, p.state) for p in fleet.pods]
            raise AssertionError(f"{exc}; health {health('b')}; pods {pods}; sim lag {sim.lag_s:.1f}s; new "
                                 f"leader log tail:\n{tail('b')}") from None
        inc_b = plan("b")
        assert inc_b is not None
        again = [a for a in inc_b["plan"]["actions"] if a["kind"] == "scale_out"]
        assert again, "the new leader plans the scale-out again: the duplicate the lease's record must stop"
        for a in again:  # a human tries to approve the new plan too: refused with the guard's reason, not repeated
            assert not a["guard"]["allowed"] and "cooldown" in a["guard"]["why"], a["guard"]
            assert not a["guard"]["approvable"], a["guard"]
            r = httpx.post(f"{replicas['b']['url']}/api/v1/actions/{a['id']}/approve", headers=auth(APPROVE),
                           json={"by": "bob"})
            assert r.status_code == 409 and "cooldown" in r.text, r.text
        rounds = health("b")["rounds"]
        wait_for(lambda: health("b").get("rounds", 0) >= rounds + 10, 60, "10 more rounds on the new leader")
        assert len(scale_writes()) == 1, scale_writes()  # the audit: one scale write, ever
        assert current() == want
        if again:  # always (asserted above); keeps the block readable
            tl = httpx.get(f"{replicas['b']['url']}/api/v1/incidents/{inc_b['id']}", headers=auth(API)).json()
            acts = [e["detail"] for e in tl["timeline"] if e["kind"] == "action"]
            assert all(x["status"] != "executed" for x in acts), acts

        # a clean stop gives the lease up at once
        procs["b"].send_signal(signal.SIGTERM)
        assert procs["b"].wait(30) == 0
        assert holder() == ""
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)
        sim.stop()
