"""The runbook alert condition, stated once over features, translated to PromQL (runbooks/alertql.py)."""

from __future__ import annotations

import pytest

from llm_oncall.diagnosis.features import known_feature_names
from llm_oncall.runbooks import alertql, promrules
from llm_oncall.runbooks.expr import compile_expr
from llm_oncall.runbooks.loader import load_registry


def tr(text: str) -> alertql.Translated:
    return alertql.translate(compile_expr(text))


def test_every_feature_with_a_promql_form_is_a_diagnosis_feature() -> None:
    assert set(alertql.table().features) <= known_feature_names()


def test_every_placeholder_in_the_table_is_filled_by_the_export() -> None:
    filled = {**promrules.params(), **promrules.knowledge()}
    for f in alertql.table().features.values():
        promrules.render(f.expr, filled)  # raises on an unknown placeholder


def test_comparison_of_a_ratio_is_a_filter() -> None:
    t = tr("kv_max >= 0.95")
    assert t.expr == "namespace:vllm_kv_cache_usage:max >= 0.95" and t.scope == ("namespace",)


def test_a_number_on_the_left_is_mirrored_so_the_series_keep_their_value() -> None:
    assert tr("0.95 <= kv_max").expr == "namespace:vllm_kv_cache_usage:max >= 0.95"


def test_not_is_pushed_down_to_the_comparisons() -> None:
    # Three-valued: not (x >= 3) is x < 3 for a known x and unknown (no series) for an unknown one.
    assert tr("not (kv_max >= 0.9 or waiting_per_pod >= 2)").expr == \
        "(namespace:vllm_kv_cache_usage:max < 0.9) and on (namespace) (namespace:vllm_requests_waiting:avg < 2)"
    assert tr("not not kv_max > 0.5").expr == "namespace:vllm_kv_cache_usage:max > 0.5"


def test_null_is_the_objects_that_exist_unless_the_known_value() -> None:
    t = tr("prompt_shift == null")
    assert t.expr.startswith("namespace:vllm_pods:count unless on (namespace) ((")
    assert "==" in t.expr  # a NaN (no requests in the window) is unknown too
    assert tr("not (prompt_shift == null)").expr == tr("prompt_shift != null").expr


def test_a_count_at_least_one_is_the_per_object_condition_and_keeps_its_labels() -> None:
    one = tr("n_stalled >= 1")
    assert one.scope == ("namespace", "pod") and not one.expr.startswith("count")
    assert tr("n_stalled > 0") == one
    two = tr("n_stalled >= 2")
    assert two.scope == ("namespace",) and two.expr.startswith("count by (namespace)") and two.expr.endswith(">= 2")


@pytest.mark.parametrize("text, why", [
    ("n_stalled == 0", "counts objects"),
    ("n_stalled < 1", "counts objects"),
    ("not n_stalled >= 1", "counts objects"),
    ("kv_max", "is not a condition"),
    ("max(kv_max, kv_median) > 0.9", "max()"),
    ("ttft_slo > 1", "two numbers"),
    ("kv_median > 0.9", "no PromQL form"),
    ("symptom_ttft == true", "boolean"),
])
def test_what_has_no_faithful_promql_form_is_refused(text: str, why: str) -> None:
    with pytest.raises(alertql.TranslateError, match=why):
        tr(text)


def test_a_finer_scope_is_matched_with_group_left_and_keeps_the_object() -> None:
    t = tr("bad_rev_thumbs_down >= 1.5 * other_rev_thumbs_down")
    assert t.scope == ("namespace", "revision") and "on (namespace) group_left ()" in t.expr
    # Written the other way round, the filter still keeps the revision (the comparison mirrored).
    u = tr("1.5 * other_rev_thumbs_down <= bad_rev_thumbs_down")
    assert u.scope == ("namespace", "revision")


def test_and_keeps_the_first_operands_labels() -> None:
    t = tr("arrival_rate_ratio >= 3 and restarts_since_change >= 1")
    assert t.scope == ("namespace",) and " and on (namespace) " in t.expr


def test_every_builtin_runbook_alert_translates_with_its_scope() -> None:
    scopes = {rb.id: promrules.alert_rule(rb).scope for rb in load_registry().in_triage_order()
              if rb.prometheus is not None}
    assert scopes == {
        "bad-model-rollout": ("namespace", "revision"), "cuda-graph-crash": ("namespace", "pod"),
        "engine-hang": ("namespace", "pod"), "gpu-ecc": ("namespace", "node", "gpu"),
        "kv-capacity": ("namespace",), "long-context-starvation": ("namespace",),
        "pod-outlier": ("namespace", "pod"), "prefix-cache-drop": ("namespace",), "retry-storm": ("namespace",),
    }


def test_the_gpu_memory_xids_come_from_the_catalogue() -> None:
    from llm_oncall.diagnosis.features import ECC_XIDS
    expr = promrules.alert_rule(load_registry().get("gpu-ecc")).canonical  # type: ignore[arg-type]
    assert all(f"DCGM_FI_DEV_XID_ERRORS == {c}" in expr for c in ECC_XIDS)
