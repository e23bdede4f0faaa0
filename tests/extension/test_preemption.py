from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import preemption as pe


def test_keys() -> None:
    assert pe.LABEL_DISABLE_PREEMPTIBLE == "scheduling.koordinator.sh/disable-preemptible"
    assert pe.LABEL_POD_PREEMPTION_POLICY == "scheduling.koordinator.sh/preemption-policy"
    assert pe.ANNOTATION_EVICTION_COST == "scheduling.koordinator.sh/eviction-cost"
    assert pe.ANNOTATION_SOFT_EVICTION == "scheduling.koordinator.sh/soft-eviction"
    assert pe.LABEL_PREEMPTIBLE == "quota.scheduling.koordinator.sh/preemptible"


@pytest.mark.parametrize(
    ("labels", "expected"),
    [({}, True), (None, True), ({pe.LABEL_DISABLE_PREEMPTIBLE: "true"}, False)]
    + [({pe.LABEL_DISABLE_PREEMPTIBLE: v}, True) for v in ("false", "True", "")],
)
def test_is_pod_preemptible(labels: dict[str, str] | None, expected: bool) -> None:
    assert pe.is_pod_preemptible(labels) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Never", "Never"),
        ("PreemptLowerPriority", "PreemptLowerPriority"),
        ("never", None),
        ("", None),
        (None, None),
    ],
)
def test_pod_preemption_policy(value: str | None, expected: str | None) -> None:
    labels = {} if value is None else {pe.LABEL_POD_PREEMPTION_POLICY: value}
    assert pe.pod_preemption_policy(labels) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("0", 0), ("10", 10), ("-10", -10), ("2147483647", pe.EVICTION_COST_NEVER), ("-2147483648", -(2**31))],
)
def test_eviction_cost(raw: str, expected: int) -> None:
    assert pe.parse_eviction_cost(raw) == expected
    assert pe.get_eviction_cost({pe.ANNOTATION_EVICTION_COST: raw}) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param("+10", "no '+' sign or leading zeros", id="plus"),
        pytest.param("008", "no '+' sign or leading zeros", id="leading-zero"),
        pytest.param("", "no '+' sign", id="empty"),
        pytest.param("2147483648", "out of range for int32", id="overflow"),
        pytest.param("1e3", "not a valid", id="exponent"),
        pytest.param("-", "not a valid", id="bare-minus"),
    ],
)
def test_eviction_cost_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        pe.parse_eviction_cost(raw)
    assert caught.value.key == pe.ANNOTATION_EVICTION_COST
    assert fragment in caught.value.problem


def test_eviction_cost_absent() -> None:
    assert pe.get_eviction_cost(None) == 0


def test_soft_eviction() -> None:
    spec = pe.parse_soft_eviction_spec(
        '{"timestamp": "2024-05-01T10:00:00Z", "deleteOptions": {"gracePeriodSeconds": 30},'
        ' "initiator": "descheduler", "reason": "rebalance"}'
    )
    assert spec.timestamp == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert spec.delete_options == {"gracePeriodSeconds": 30}
    assert (spec.initiator, spec.reason) == ("descheduler", "rebalance")
    assert pe.get_soft_eviction_spec({}) is None


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param('{"timestamp": "yesterday"}', "timestamp", id="timestamp"),
        pytest.param('{"deleteOptions": "now"}', "deleteOptions", id="delete-options"),
        pytest.param('{"reason": 5}', "reason", id="reason-int"),
        pytest.param("true", "object", id="bare-true"),
    ],
)
def test_soft_eviction_rejects(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        pe.parse_soft_eviction_spec(raw)
    assert caught.value.key == pe.ANNOTATION_SOFT_EVICTION
    assert fragment in caught.value.problem
