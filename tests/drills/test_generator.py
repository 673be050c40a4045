from __future__ import annotations

import dataclasses
from collections import Counter

from llm_oncall.drills.generator import (
    BLOCK,
    CLASSES,
    CONFOUNDERS,
    HEALTHY,
    SHAPES,
    class_of,
    generate,
    generate_one,
)
from llm_oncall.sim import FAULTS, Fleet, FleetConfig


def test_same_seed_same_scenarios() -> None:
    a = generate(48, 5)
    b = generate(48, 5)
    assert [s.to_json() for s in a] == [s.to_json() for s in b]
    assert [s.cfg for s in a] == [s.cfg for s in b]
    assert [s.fault for s in a] == [s.fault for s in b]


def test_other_seed_other_scenarios() -> None:
    a = [s.to_json() for s in generate(24, 5)]
    b = [s.to_json() for s in generate(24, 6)]
    assert a != b
    assert sum(x == y for x, y in zip(a, b, strict=True)) < 3


def test_small_suite_is_prefix_of_large() -> None:
    small = generate(20, 9)
    large = generate(100, 9)
    assert [s.to_json() for s in small] == [s.to_json() for s in large[:20]]
    assert generate_one(9, 57).to_json() == large[57].to_json()


def test_every_block_covers_every_class() -> None:
    for seed in (0, 1, 11):
        for block in range(5):
            got = Counter(class_of(seed, block * BLOCK + i) for i in range(BLOCK))
            assert set(got) == set(CLASSES)
            assert got[HEALTHY] == 3
            assert all(got[i] == 1 for i in FAULTS)


def test_twenty_scenarios_cover_all_classes_with_healthy_share() -> None:
    got = Counter(s.incident for s in generate(20, 3))
    assert set(got) == set(CLASSES)
    big = Counter(s.incident for s in generate(400, 11))
    assert 0.20 <= big[HEALTHY] / 400 <= 0.25
    assert min(big[i] for i in FAULTS) >= 30


def test_parameter_ranges_and_variety() -> None:
    scenarios = generate(400, 11, shapes=False)
    pods = [s.cfg.pods for s in scenarios]
    assert min(pods) >= 4 and max(pods) <= 64
    assert sum(p <= 6 for p in pods) / len(pods) >= 0.75  # mostly small fleets, for speed
    assert max(pods) >= 25
    assert {s.cfg.tp for s in scenarios} == {1, 2, 4, 8}
    assert any(s.cfg.group_size == 2 for s in scenarios if s.incident == "engine-hang")
    onsets = [s.fault.at for s in scenarios if s.fault is not None]
    assert min(onsets) >= 150 and max(onsets) <= 330 and max(onsets) - min(onsets) > 150
    kinds = Counter(c for s in scenarios for c in s.confounders)
    assert set(kinds) == set(CONFOUNDERS)
    healthy = [s for s in scenarios if s.incident == HEALTHY]
    assert all(s.fault is None for s in healthy)
    assert sum(bool(s.confounders) for s in healthy) / len(healthy) >= 0.8
    variants = {s.fault.params.get("variant") for s in scenarios if s.incident == "prefix-cache-drop" and s.fault}
    assert variants == {"router", "unique-prefix"}
    # rollout incidents never get a second, unrelated rollout on top
    assert not any("deploy" in s.confounders for s in scenarios if s.incident in ("bad-model-rollout",
                                                                                "cuda-graph-crash"))


def test_fault_params_are_ones_the_simulator_reads() -> None:
    # The simulator's handlers read these keys (src/llm_oncall/sim/faults.py); anything else would be ignored.
    known = {
        "kv-capacity": {"factor"}, "engine-hang": {"group", "crc_per_s", "idle_wait_s"},
        "prefix-cache-drop": {"variant", "lag_s", "policy", "share"}, "retry-storm": {"timeout_s", "pod_index"},
        "bad-model-rollout": {"weight", "model_revision"}, "gpu-ecc": {"wrong_rate", "sbe_per_s", "pod_index"},
        "cuda-graph-crash": {"vllm_version", "enforce_eager"}, "long-context-starvation": {"share", "prompt_tokens"},
        "pod-outlier": {"factor", "pod_index"},
    }
    fields = {f.name for f in dataclasses.fields(FleetConfig)}
    for s in generate(120, 2):
        if s.fault is not None:
            assert set(s.fault.params) <= known[s.fault.kind], s.fault
            assert s.fault.kind == s.incident
        assert set(dataclasses.asdict(s.cfg)) == fields


def test_scenarios_build_fleets() -> None:
    for s in generate(24, 4):
        fleet = Fleet(s.cfg, seed=s.seed, fault=s.fault)
        assert len(fleet.targets()) == s.cfg.pods
        assert fleet.ground_truth.onset is None  # nothing happened yet at t=0


def test_new_shapes_are_in_the_suite_and_leave_the_first_suite_alone() -> None:
    shaped = generate(400, 11)
    first = generate(400, 11, shapes=False)
    assert {s.shape for s in shaped} - {None} == set(SHAPES)
    for a, b in zip(shaped, first, strict=True):
        assert a.incident == b.incident
        if a.shape is None:
            assert a.to_json() == b.to_json() and a.cfg == b.cfg and a.fault == b.fault
    small = [s for s in shaped if s.shape == "small-fleet"]
    assert all(1 <= s.cfg.pods <= 3 and 0.5 <= s.cfg.rate_per_pod <= 5.0 for s in small)
    assert any(s.cfg.pods == 1 for s in small) and any(s.incident == HEALTHY for s in small)
    # a small server is slower per step (a bigger model), so its load sits as close to capacity as before
    assert all(s.cfg.step.base_s > first[s.index].cfg.step.base_s for s in small)
    tight = [s for s in shaped if s.shape == "preempt-first"]
    assert tight and all(s.incident == "kv-capacity" and s.cfg.engine.num_gpu_blocks < 27_000 * 0.5 for s in tight)
    partial = [s for s in shaped if s.shape == "partial-hit-drop"]
    assert {s.fault.params["variant"] for s in partial if s.fault} == {"router", "unique-prefix"}
    assert all(s.incident == HEALTHY for s in shaped if s.shape in ("ramp", "cold-start"))
    assert any(s.flap > 0 for s in shaped if s.shape == "flapping-target")
