"""A pod that crash-loops at start-up for a reason no runbook covers (a configuration vLLM rejects) is not
called one of the runbooks' incidents, and not called healthy with confidence either: with the only pod down the
fleet is unavailable, so it pages as `unknown`, and the summary names the crash loop and the error from its log."""

from __future__ import annotations

from pathlib import Path

from llm_oncall.diagnosis.autopilot import Autopilot
from llm_oncall.signals.events import Event
from llm_oncall.signals.source import Batch, Observation, Target

MAX_MODEL_LEN = (Path(__file__).parents[1] / "evidence" / "samples" / "vllm_startup_max_model_len.log").read_text()

POD = Target("vllm-7f9c-abcde", "http://10.0.0.7:8000/metrics")


def _run(logs: str | None, restarts: bool) -> Autopilot:
    pilot = Autopilot(2.0)
    for i in range(8):
        t = 1000.0 + 2.0 * i
        events = [Event(t, "restart", f"pod {POD.name} restarted", {"pod": POD.name, "reason": "Error"})] \
            if restarts and i in (3, 6) else []
        batch = Batch([Observation(POD, t, None, error="connection refused")], events,
                      {POD.name: logs.splitlines()} if logs and i == 4 else {})
        pilot.observe(batch)
        pilot.step()
    return pilot


def test_crash_loop_with_a_config_error_names_both() -> None:
    d = _run(MAX_MODEL_LEN, restarts=True).step()
    assert d.incident == "unknown" and d.confidence <= 0.5 and d.pages
    assert "0 pod(s) serving" in d.summary, d.summary
    assert f"1 pod(s) crash-looping ({POD.name})" in d.summary, d.summary
    assert "the log says: User-specified max_model_len (100000)" in d.summary, d.summary
    assert d.scope_pods == (POD.name,)
    assert any(e.signal == "evidence:vllm_startup_error" for e in d.evidence)
    why = next(r.why for r in d.ruled_out if r.incident == "cuda-graph-crash")
    assert "log_cuda_graph_crash" in why, why


def test_a_pod_down_without_restarts_is_only_not_answering() -> None:
    d = _run(None, restarts=False).step()
    assert d.incident == "unknown" and d.confidence <= 0.5
    assert "1 pod(s) not answering /metrics" in d.summary and "crash-looping" not in d.summary, d.summary
