"""The node status webhook's arithmetic: cpu/memory allocatable = raw x ratio, the raw values kept in
``raw-allocatable`` and taken anew only when the incoming allocatable changes."""

from __future__ import annotations

import pytest

from apis.extension.qosannotations import (
    ANNOTATION_NODE_RAW_ALLOCATABLE as RAW,
)
from apis.extension.qosannotations import (
    ANNOTATION_NODE_RESOURCE_AMPLIFICATION_RATIO as RATIO,
)
from operators.logic.node_amplification import StatusMutation, amplify_status

KUBELET = {"cpu": "4", "memory": "8Gi", "pods": "110"}
RATIOS = {RATIO: '{"cpu":1.29,"memory":1.50}'}


def test_without_a_ratio_the_raw_allocatable_is_dropped_and_nothing_amplified() -> None:
    assert amplify_status({RAW: '{"cpu":"4"}'}, KUBELET, KUBELET) == StatusMutation(annotations={RAW: None})
    assert amplify_status({RATIO: ""}, KUBELET, KUBELET) == StatusMutation()
    assert amplify_status(None, KUBELET, None) == StatusMutation()


def test_the_first_update_saves_the_raw_values_and_amplifies_them() -> None:
    mutation = amplify_status(RATIOS, KUBELET, KUBELET)
    assert mutation.annotations == {RAW: '{"cpu":"4","memory":"8Gi"}'}
    assert mutation.allocatable == {"cpu": "5160m", "memory": "12Gi"}  # pods untouched
    assert not mutation.warnings


def test_an_update_carrying_the_amplified_values_along_amplifies_the_saved_raw_values() -> None:
    """v1.6: Koordinator lost the saved raw values here and amplified nothing."""
    stored = {"cpu": "5160m", "memory": "12Gi", "pods": "110"}
    mutation = amplify_status({**RATIOS, RAW: '{"cpu":"4","memory":"8Gi"}'}, stored, stored)
    assert mutation.annotations == {}
    assert mutation.allocatable == {"cpu": "5160m", "memory": "12Gi"}


def test_kubelet_reporting_new_allocatable_replaces_the_raw_values() -> None:
    stored = {"cpu": "5160m", "memory": "12Gi", "pods": "110"}
    reported = {"cpu": "3", "memory": "8Gi", "pods": "110"}
    mutation = amplify_status({**RATIOS, RAW: '{"cpu":"4","memory":"8Gi"}'}, reported, stored)
    assert mutation.annotations == {RAW: '{"cpu":"3","memory":"8Gi"}'}
    assert mutation.allocatable == {"cpu": "3870m", "memory": "12Gi"}


def test_a_ratio_changed_by_the_controller_applies_to_the_saved_raw_values() -> None:
    stored = {"cpu": "5160m", "memory": "12Gi"}
    mutation = amplify_status({RATIO: '{"cpu":2.00}', RAW: '{"cpu":"4","memory":"8Gi"}'}, stored, stored)
    assert mutation.allocatable == {"cpu": "8"}  # memory has no ratio any more: left as it comes


def test_ratios_of_1_or_less_and_other_resources_are_not_amplified() -> None:
    mutation = amplify_status({RATIO: '{"cpu":1.00,"memory":0.5,"pods":2}'}, KUBELET, None)
    assert mutation.allocatable == {}
    assert mutation.annotations == {RAW: '{"cpu":"4","memory":"8Gi"}'}


def test_the_product_is_truncated_in_milli_units_and_keeps_the_format() -> None:
    mutation = amplify_status({RATIO: '{"cpu":1.33,"memory":1.33}'}, {"cpu": "7", "memory": "1Gi"}, None)
    assert mutation.allocatable == {"cpu": "9310m", "memory": "1428076625920m"}


def test_malformed_values_leave_the_allocatable_unamplified_with_a_warning() -> None:
    stored = {"cpu": "5160m", "memory": "12Gi"}
    bad_raw = amplify_status({**RATIOS, RAW: "{not json"}, stored, stored)
    assert bad_raw.allocatable == {}
    assert any(RAW in w for w in bad_raw.warnings)
    bad_ratio = amplify_status({RATIO: "1.5"}, KUBELET, None)
    assert bad_ratio.allocatable == {}
    assert any(RATIO in w for w in bad_ratio.warnings)
    bad_quantity = amplify_status(RATIOS, {"cpu": "four", "memory": "8Gi"}, None)
    assert bad_quantity.allocatable == {"memory": "12Gi"}
    assert any("status.allocatable.cpu" in w for w in bad_quantity.warnings)


@pytest.mark.parametrize(
    "ratio",
    ['{"cpu": 1e308}', '{"cpu": Infinity}', '{"cpu": 1e309}', '{"cpu": NaN}', '{"cpu": -2}', '{"cpu": 0}'],
)
def test_a_ratio_out_of_range_warns_and_leaves_the_allocatable_unamplified(ratio: str) -> None:
    mutation = amplify_status({RATIO: ratio}, KUBELET, None)
    assert mutation.allocatable == {}
    assert any(RATIO in w and "cpu" in w for w in mutation.warnings)


def test_a_product_beyond_int64_warns_for_that_resource_only() -> None:
    # 9E of memory x 1000 does not fit int64 milli-units: Go would wrap it.
    mutation = amplify_status({RATIO: '{"cpu":2,"memory":1000}'}, {"cpu": "4", "memory": "9E"}, None)
    assert mutation.allocatable == {"cpu": "8"}
    assert any("allocatable memory not amplified" in w for w in mutation.warnings)
