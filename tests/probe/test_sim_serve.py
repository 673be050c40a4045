"""`sim serve`: every surface answers over HTTP like the real thing; the target list is valid file_sd."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.testkit import http_ok, wait_for
from typer.testing import CliRunner

from llm_oncall.cli import sim as cli_sim
from llm_oncall.sim.serve import SimServer

from .conftest import fault_fleet, small_fleet

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def check_file_sd(groups: object) -> None:
    assert isinstance(groups, list) and groups
    for g in groups:
        assert isinstance(g, dict) and set(g) == {"targets", "labels"}
        assert isinstance(g["targets"], list) and g["targets"]
        for addr in g["targets"]:
            host, port = addr.rsplit(":", 1)
            assert host == "127.0.0.1" and 0 < int(port) < 65536
        assert all(LABEL_NAME.match(k) and not k.startswith("__") and isinstance(v, str)
                   for k, v in g["labels"].items())
        kind = g["labels"]["kind"]
        assert kind in ("vllm", "dcgm", "gateway", "kube")
        if kind == "vllm":
            assert {"pod", "node", "revision", "group", "namespace"} <= set(g["labels"])
        if kind == "dcgm":
            assert "node" in g["labels"]


def test_every_target_answers_metrics_and_file_sd_is_valid(serve: Callable[..., SimServer]) -> None:
    fleet = small_fleet(pods=3)
    server = serve(fleet, speed=5.0)
    groups = server.file_sd()
    check_file_sd(groups)
    json.loads(json.dumps(groups))
    kinds = sorted(g["labels"]["kind"] for g in groups)
    assert kinds.count("vllm") == 3 and {"dcgm", "gateway", "kube"} <= set(kinds)
    with httpx.Client(timeout=10.0) as client:
        for g in groups:
            resp = client.get(f"http://{g['targets'][0]}/metrics")
            assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
            list(text_string_to_metric_families(resp.text))  # a valid exposition page
            if g["labels"]["kind"] == "vllm":
                assert "vllm:num_requests_waiting{" in resp.text
                assert "vllm:iteration_tokens_total_count{" in resp.text
            if g["labels"]["kind"] == "dcgm":
                assert "DCGM_FI_DEV_GPU_UTIL" in resp.text
        # the clock runs: counters advance between scrapes
        url = server.pod_urls()[groups[0]["labels"]["pod"]] if groups[0]["labels"]["kind"] == "vllm" else None
        url = url or next(iter(server.pod_urls().values()))

        def steps() -> float:
            page = client.get(url + "/metrics").text
            return sum(float(line.rsplit(" ", 1)[1]) for line in page.splitlines()
                       if line.startswith("vllm:iteration_tokens_total_count"))
        first = steps()
        wait_for(lambda: steps() > first, 30, "the pod's engine-step counter to advance")
        assert client.get(server.url("kube") + "/events").json() == []


def test_openai_endpoints(serve: Callable[..., SimServer]) -> None:
    fleet = small_fleet(pods=2)
    server = serve(fleet, speed=1.0)
    urls = list(server.pod_urls().values())
    with httpx.Client(timeout=10.0) as client:
        assert client.get(urls[0] + "/health").status_code == 200
        models = client.get(urls[0] + "/v1/models").json()
        assert models["data"][0]["id"] == fleet.cfg.model_name
        body = {"model": fleet.cfg.model_name, "prompt": "Name the chemical symbol of gold.", "max_tokens": 16,
                "temperature": 0}
        answers = [client.post(u + "/v1/completions", json=body).json() for u in urls]
        assert answers[0]["object"] == "text_completion"
        assert answers[0]["choices"][0]["text"] == answers[1]["choices"][0]["text"] != ""
        assert answers[0]["usage"]["completion_tokens"] > 0
        assert client.post(urls[0] + "/v1/completions", content=b"{nope").status_code == 400
        assert client.post(urls[0] + "/v1/completions", json={"prompt": 3}).status_code == 400
        assert client.post(urls[0] + "/v1/completions", json={**body, "model": "other"}).status_code == 404
        assert client.get(urls[0] + "/nope").status_code == 404


def test_down_pod_answers_503_and_hung_pod_never_answers(serve: Callable[..., SimServer]) -> None:
    fleet = fault_fleet("engine-hang", seed=2, at=0.5, pods=4, params={"group": "vllm-llama-8b-g0"})
    server = serve(fleet, speed=2.0, hang_s=30.0)
    pods = {g["labels"]["pod"]: g["labels"] for g in server.file_sd() if g["labels"]["kind"] == "vllm"}
    hung = next(p for p, lab in pods.items() if lab["group"] == "vllm-llama-8b-g0")
    fine = next(p for p, lab in pods.items() if lab["group"] == "vllm-llama-8b-g1")
    urls = server.pod_urls()
    wait_for(lambda: server.virtual_now() > 1.0, 30, "the hang at t=0.5s (simulated) to have happened")
    # Answers that must come get a generous timeout; only the request that must never be answered a short one
    # (the hung pod holds it for hang_s, far longer).
    with httpx.Client(timeout=10.0) as client, httpx.Client(timeout=2.0) as impatient:
        assert client.get(urls[hung] + "/health").status_code == 200  # /health cannot see the hang
        assert client.get(urls[hung] + "/metrics").status_code == 200
        with pytest.raises(httpx.TimeoutException):
            impatient.post(urls[hung] + "/v1/completions", json={"prompt": "x", "max_tokens": 4})
        with server.lock:
            fleet.restart_pods([fine])
        assert client.get(urls[fine] + "/metrics").status_code == 503
        assert client.get(urls[fine] + "/health").status_code == 503
        assert client.post(urls[fine] + "/v1/completions", json={"prompt": "x"}).status_code == 503


def test_new_pods_get_ports_and_the_target_list_is_republished(serve: Callable[..., SimServer]) -> None:
    published: list[list[dict[str, Any]]] = []
    fleet = fault_fleet("bad-model-rollout", seed=1, at=1.0, pods=2, model_load_s=2.0)
    serve(fleet, speed=10.0, on_targets=published.append)

    def revisions(groups: list[dict[str, Any]]) -> set[str]:
        return {g["labels"]["revision"] for g in groups if g["labels"]["kind"] == "vllm"}

    # Every publication is recorded by the callback, which runs after the endpoints changed: wait on it, not on
    # server.file_sd(), which can show the new pod a moment before the list is published.
    wait_for(lambda: any(len(revisions(p)) == 2 for p in list(published)), 60,
             "a published target list with the old and the new revision")
    both = next(p for p in published if len(revisions(p)) == 2)
    check_file_sd(both)
    assert len(revisions(published[0])) == 1  # the list published at start, before the clock ran
    new_rev = fleet.ground_truth.revision
    new_pods = [g for g in both if g["labels"].get("revision") == new_rev]
    assert new_pods
    addr = new_pods[0]["targets"][0]
    wait_for(lambda: http_ok(f"http://{addr}/metrics", timeout_s=10.0), 60, f"the new pod at {addr} to serve /metrics")


def test_cli_prints_file_sd_and_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "sd" / "targets.json"
    result = CliRunner().invoke(cli_sim.app, ["serve", "--pods", "2", "--base-port", "0", "--speed", "5",
                                              "--duration", "1s", "--file-sd", str(out), "--seed", "4"])
    assert result.exit_code == 0, result.output
    start = result.stdout.index("[")
    printed = json.loads(result.stdout[start:result.stdout.rindex("]") + 1])
    check_file_sd(printed)
    check_file_sd(json.loads(out.read_text()))
    assert sum(g["labels"]["kind"] == "vllm" for g in printed) == 2


def test_cli_rejects_bad_options() -> None:
    runner = CliRunner()
    assert runner.invoke(cli_sim.app, ["serve", "--fault", "nope", "--duration", "0"]).exit_code != 0
    assert runner.invoke(cli_sim.app, ["serve", "--at", "10", "--duration", "0"]).exit_code != 0
