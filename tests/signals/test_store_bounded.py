"""The live store forgets what no diagnosis can look at: old events, logs of targets that left discovery."""

from __future__ import annotations

from llm_oncall.signals.events import Event
from llm_oncall.signals.exposition import parse
from llm_oncall.signals.source import Batch, Observation, Target
from llm_oncall.signals.store import Store

PAGE = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"


def _batch(t: float, pods: list[str], events: list[Event]) -> Batch:
    b = Batch()
    for name in pods:
        b.observations.append(Observation(Target(name, None, "vllm", {"pod": name}), t, parse(PAGE), None))
        b.logs[f"{name}/logs.txt"] = [f"{name} line at {t}"] * 3
    b.events.extend(events)
    return b


def test_events_and_logs_stay_bounded_over_a_long_live_run() -> None:
    interval, keep_s, hours = 15.0, 3600.0, 12
    store = Store(interval_s=interval, capacity=8, log_lines_kept=50)
    steps = int(hours * 3600 / interval)
    for i in range(1, steps + 1):
        t = i * interval
        # Pods are replaced every 20 minutes; "stable" stays and restarted once, early on.
        pods = ["stable", f"pod-{i // 80}"]
        events = [Event(t, "scale", f"scale at {t}")]
        if i == 10:
            events.append(Event(t, "restart", "stable restarted", {"pod": "stable"}))
        if i % 80 == 5:
            events.append(Event(t, "restart", f"pod-{i // 80} restarted", {"pod": f"pod-{i // 80}"}))
        store.add(_batch(t, pods, events))
        store.prune(t - 80 * interval, t - keep_s)
    retained = len(store.events)
    assert retained <= keep_s / interval + 10  # an hour of events, not twelve
    t_end = steps * interval
    assert min(e.t for e in store.events if e.kind == "scale") >= t_end - keep_s
    # Whether a known pod ever restarted is kept regardless of age; forgotten pods' restarts go.
    old = {str(e.attrs["pod"]) for e in store.events if e.kind == "restart" and e.t < t_end - keep_s}
    assert "stable" in old
    assert old <= set(store.series)
    assert len(store.series) <= 4
    assert set(store.logs) == {f"{n}/logs.txt" for n in store.series}
    assert all(len(lines) <= 50 for lines in store.logs.values())
    assert [e.t for e in store.events] == sorted(e.t for e in store.events)


def test_events_out_of_order_are_sorted_and_replay_keeps_everything() -> None:
    store = Store(interval_s=15.0)
    store.add(_batch(15.0, ["a"], [Event(10.0, "scale", "x"), Event(5.0, "deploy", "y")]))
    store.add(_batch(30.0, ["a"], [Event(7.0, "config_change", "z")]))
    assert [e.t for e in store.events] == [5.0, 7.0, 10.0]
    assert store.prune(0.0) == []  # without events_before nothing but targets is pruned
    assert len(store.events) == 3
    assert [e.t for e in store.snapshot(at=30.0).events] == [5.0, 7.0, 10.0]
