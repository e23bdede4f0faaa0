from __future__ import annotations

import pytest

from apis.errors import InvalidAnnotation
from apis.extension import priority as p


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (9000, "koord-prod"),
        (9500, "koord-prod"),
        (9999, "koord-prod"),
        (8999, ""),
        (7000, "koord-mid"),
        (7999, "koord-mid"),
        (5000, "koord-batch"),
        (5999, "koord-batch"),
        (6500, ""),
        (3000, "koord-free"),
        (3999, "koord-free"),
        (0, ""),
        (10000, ""),
        (None, ""),
    ],
)
def test_priority_class_by_value(value: int | None, expected: str) -> None:
    assert p.priority_class_by_value(value) == expected


@pytest.mark.parametrize(
    ("priority", "label", "qos", "expected"),
    [
        pytest.param(9100, None, None, "koord-prod", id="range"),
        pytest.param(9100, "koord-batch", None, "koord-batch", id="label-wins"),
        pytest.param(9100, "koord-gold", None, "", id="unknown-label-means-none"),
        pytest.param(9100, "koord-gold", "BE", "koord-batch", id="unknown-label-then-qos"),
        pytest.param(None, None, "LSR", "koord-prod", id="qos-lsr"),
        pytest.param(None, None, "SYSTEM", "koord-prod", id="qos-system"),
        pytest.param(None, None, "LS", "koord-prod", id="qos-ls"),
        pytest.param(None, None, "BE", "koord-batch", id="qos-be"),
        pytest.param(100, None, None, "", id="nothing"),
        pytest.param(5500, None, "LS", "koord-batch", id="range-beats-qos"),
        pytest.param(None, "koord-free", "LS", "koord-free", id="label-free"),
    ],
)
def test_priority_class_of(priority: int | None, label: str | None, qos: str | None, expected: str) -> None:
    assert p.priority_class_of(priority, label, qos) == expected


@pytest.mark.parametrize(
    ("klass", "expected"),
    [("koord-prod", 9500), ("koord-mid", 7500), ("koord-batch", 5500), ("koord-free", 3500), ("", 0)],
)
def test_default_values(klass: p.PriorityClass, expected: int) -> None:
    assert p.PRIORITY_DEFAULT_VALUES[klass] == expected
    assert p.default_priority_of(None, klass) == expected
    assert p.default_priority_of(0, klass) == expected
    assert p.default_priority_of(42, klass) == 42


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("0x10", 16), ("16", 16), ("-5", -5), ("010", 8), ("0b11", 3), ("2147483647", 2**31 - 1)],
)
def test_sub_priority(raw: str, expected: int) -> None:
    assert p.parse_pod_sub_priority(raw) == expected
    assert p.get_pod_sub_priority({p.LABEL_POD_PRIORITY: raw}) == expected


@pytest.mark.parametrize("raw", ["high", "1.0", "0x", "2147483648", "08"])
def test_sub_priority_rejects(raw: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        p.parse_pod_sub_priority(raw)
    assert caught.value.key == "koordinator.sh/priority"


def test_sub_priority_absent() -> None:
    assert p.get_pod_sub_priority(None) == 0
    assert p.get_pod_sub_priority({p.LABEL_POD_PRIORITY: ""}) == 0


def test_keys() -> None:
    assert p.LABEL_POD_PRIORITY_CLASS == "koordinator.sh/priority-class"
    assert p.PRIORITY_RANGES["koord-mid"] == (7000, 7999)
