"""Event-storm suppression: deduplicated per node+GPU, one incident per node per cooldown, the counts on the
incident's timeline; `bench events` runs the service's alert path both ways (its figures are printed, not timed
here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from llm_oncall.cli import app
from llm_oncall.incidents import IncidentStore
from llm_oncall.incidents.storm import StormGate, ingest


def _alert(node: str | None, gpu: str, i: int, status: str = "firing", name: str = "GpuXidError") -> dict[str, Any]:
    labels = {"alertname": name, "incident": "gpu-ecc", "gpu": gpu}
    if node is not None:
        labels["node"] = node
    return {"fingerprint": f"f{node}{gpu}{i}", "startsAt": f"2026-01-01T00:00:{i % 60:02d}Z", "status": status,
            "labels": labels, "annotations": {}, "endsAt": None}


def test_dedup_per_node_and_gpu_and_one_incident_per_node(tmp_path: Path) -> None:
    now = [0.0]
    store = IncidentStore(tmp_path / "s.db", clock=lambda: now[0])
    gate = StormGate(dedup_s=60, node_cooldown_s=600, flush_s=10)
    iid, new, sup = ingest(store, gate, "g", [_alert("n1", "0", 0)], now[0])
    assert iid is not None and (new, sup) == (1, 0)
    for i in range(1, 50):  # the same GPU storms: counted, not written
        now[0] = i * 0.01
        assert ingest(store, gate, "g", [_alert("n1", "0", i)], now[0]) == (iid, 0, 1)
    now[0] = 1.0
    assert ingest(store, gate, "g", [_alert("n1", "3", 99)], now[0])[1:] == (0, 1)  # another GPU, same node: joined
    now[0] = 5.0
    _, new, sup = ingest(store, gate, "g", [_alert("n2", "0", 100)], now[0])  # another node: written
    assert (new, sup) == (1, 0)
    assert ingest(store, gate, "g", [_alert(None, "", 101)], now[0])[1] == 1  # no node label: untouched
    assert ingest(store, gate, "g", [_alert("n1", "0", 0, "resolved")], now[0])[2] == 0  # resolved always passes
    now[0] = 20.0
    ingest(store, gate, "g", [_alert("n1", "0", 102)], now[0])  # past flush_s: the counts reach the timeline
    sup_events = [e for e in store.timeline(iid) if e["kind"] == "suppressed"]
    assert sup_events and sum(e["detail"]["events"] for e in sup_events) == 50 + 1
    assert gate.counts == {"admitted": 2, "deduplicated": 50, "joined": 1}  # admitted: node-labelled only
    # the node's incident resolves; within the cooldown the node's storm does not open another
    store.set_status(iid, "resolved", "test", "done")
    now[0] = 300.0
    out = ingest(store, gate, "g", [_alert("n1", "0", 200)], now[0])
    assert out == (iid, 0, 1) and len(store.incidents()) == 1
    other = _alert("n1", "0", 300, name="NcclHang")
    other["labels"]["incident"] = "engine-hang"
    assert ingest(store, gate, "g", [other], now[0])[1] == 1  # another runbook on the node: not this storm
    now[0] = 1000.0  # after it: a new incident
    iid2, new, _ = ingest(store, gate, "g", [_alert("n1", "0", 201)], now[0])
    assert new == 1 and iid2 != iid


def test_bench_events_compares_both_paths_on_the_same_storm() -> None:
    r = CliRunner().invoke(app, ["bench", "events", "--seconds", "3", "--json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.output)
    assert body["events"] == 300
    u, g = body["ungated"], body["gated"]
    assert u["alert_rows"] == 300 and g["alert_rows"] < 30  # the storm is deduplicated
    assert u["incidents"] == g["incidents"] == 1
    assert {"events_per_s", "events_per_cpu_s", "core_share_at_target", "keeps_up"} <= set(g)
