from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import loadaware as la


def test_keys() -> None:
    assert la.ANNOTATION_CUSTOM_USAGE_THRESHOLDS == "scheduling.koordinator.sh/usage-thresholds"
    assert (
        la.ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS
        == "scheduling.koordinator.sh/load-estimated-scaling-factors"
    )
    assert la.ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED == (
        "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
    )
    assert la.ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED == (
        "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"
    )


def test_usage_thresholds() -> None:
    parsed = la.parse_custom_usage_thresholds(
        '{"usageThresholds": {"cpu": 65, "memory": 80}, "prodUsageThresholds": {"cpu": 55},'
        ' "aggregatedUsage": {"usageThresholds": {"cpu": 70}, "usageAggregationType": "p95",'
        ' "usageAggregatedDuration": "5m"}}'
    )
    assert parsed.usage_thresholds == {"cpu": 65, "memory": 80}
    assert parsed.prod_usage_thresholds == {"cpu": 55}
    assert parsed.aggregated_usage is not None
    assert parsed.aggregated_usage.usage_aggregation_type == "p95"
    assert parsed.aggregated_usage.usage_aggregated_duration == "5m"
    assert la.get_custom_usage_thresholds({}) == la.CustomUsageThresholds()


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param('{"usageThresholds": {"cpu": "65"}}', "usageThresholds.cpu", id="string-percent"),
        pytest.param('{"usageThresholds": {"cpu": 65.5}}', "usageThresholds.cpu", id="float-percent"),
        pytest.param(
            '{"aggregatedUsage": {"usageAggregationType": "max"}}',
            "aggregatedUsage.usageAggregationType: Input should be 'avg', 'p50', 'p90', 'p95' or 'p99'",
            id="aggregation-max",
        ),
        pytest.param(
            '{"aggregatedUsage": {"usageAggregatedDuration": "1d"}}',
            "aggregatedUsage.usageAggregatedDuration",
            id="duration-days",
        ),
        pytest.param('{"usageThresholds": [65]}', "usageThresholds", id="list"),
    ],
)
def test_usage_thresholds_reject(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        la.parse_custom_usage_thresholds(raw)
    assert caught.value.key == la.ANNOTATION_CUSTOM_USAGE_THRESHOLDS
    assert fragment in caught.value.problem


def test_scaling_factors() -> None:
    assert la.parse_custom_estimated_scaling_factors('{"cpu": 80, "memory": 70}') == {"cpu": 80, "memory": 70}
    assert la.get_custom_estimated_scaling_factors({}) is None
    with pytest.raises(InvalidAnnotation) as caught:
        la.parse_custom_estimated_scaling_factors('{"cpu": "80%"}')
    assert caught.value.key == la.ANNOTATION_CUSTOM_ESTIMATED_SCALING_FACTORS


@pytest.mark.parametrize(("raw", "expected"), [("300", 300), ("0", 0), ("-1", -1)])
def test_estimated_seconds(raw: str, expected: int) -> None:
    annotations = {
        la.ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED: raw,
        la.ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_INITIALIZED: raw,
    }
    assert la.get_custom_estimated_seconds_after_pod_scheduled(annotations) == expected
    assert la.get_custom_estimated_seconds_after_initialized(annotations) == expected


@pytest.mark.parametrize("raw", ["300s", "5m", "1e3"])
def test_estimated_seconds_reject(raw: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        la.parse_custom_estimated_seconds_after_pod_scheduled(raw)
    assert caught.value.key == la.ANNOTATION_CUSTOM_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED
    with pytest.raises(InvalidAnnotation):
        la.parse_custom_estimated_seconds_after_initialized(raw)


def test_estimated_seconds_absent() -> None:
    assert la.get_custom_estimated_seconds_after_pod_scheduled(None) is None
    assert la.get_custom_estimated_seconds_after_initialized({}) is None


@pytest.mark.parametrize(
    "raw",
    [
        '{"usageThresholds": {"cpu": -50}}',
        '{"usageThresholds": {"cpu": 1000}}',
        '{"prodUsageThresholds": {"memory": 101}}',
        '{"aggregatedUsage": {"usageThresholds": {"cpu": -1}}}',
    ],
)
def test_a_threshold_is_a_percentage_from_0_to_100(raw: str) -> None:
    with pytest.raises(InvalidAnnotation, match="usage-thresholds"):
        la.parse_custom_usage_thresholds(raw)
    assert la.parse_custom_usage_thresholds('{"usageThresholds": {"cpu": 0, "memory": 100}}')


def test_a_scaling_factor_is_not_negative() -> None:
    with pytest.raises(InvalidAnnotation, match="load-estimated-scaling-factors"):
        la.parse_custom_estimated_scaling_factors('{"cpu": -85}')
