"""Koordinator priority classes (api-reference 2.8).

A pod's class comes from the label ``koordinator.sh/priority-class`` when present (an unknown value
means none), else from the range that ``spec.priority`` falls in, else from its QoS class
(SYSTEM/LSE/LSR/LS -> koord-prod, BE -> koord-batch). ``koordinator.sh/priority`` is an int32
sub-priority within the class, parsed with base auto-detection (``"0x10"`` is 16).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from apis.extension._annotation import lookup, parse_go_int
from apis.extension.qos import QOS_BE, QOS_LS, QOS_LSE, QOS_LSR, QOS_SYSTEM

__all__ = [
    "LABEL_POD_PRIORITY",
    "LABEL_POD_PRIORITY_CLASS",
    "PRIORITY_BATCH",
    "PRIORITY_CLASSES",
    "PRIORITY_DEFAULT_VALUES",
    "PRIORITY_FREE",
    "PRIORITY_MID",
    "PRIORITY_NONE",
    "PRIORITY_PROD",
    "PRIORITY_RANGES",
    "PriorityClass",
    "default_priority_of",
    "get_pod_sub_priority",
    "parse_pod_sub_priority",
    "priority_class_by_name",
    "priority_class_by_value",
    "priority_class_of",
    "priority_class_of_qos",
]

LABEL_POD_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_POD_PRIORITY = "koordinator.sh/priority"

PriorityClass = Literal["koord-prod", "koord-mid", "koord-batch", "koord-free", ""]
PRIORITY_PROD: PriorityClass = "koord-prod"
PRIORITY_MID: PriorityClass = "koord-mid"
PRIORITY_BATCH: PriorityClass = "koord-batch"
PRIORITY_FREE: PriorityClass = "koord-free"
PRIORITY_NONE: PriorityClass = ""
PRIORITY_CLASSES: tuple[PriorityClass, ...] = tuple(p for p in get_args(PriorityClass) if p)

PRIORITY_RANGES: Mapping[PriorityClass, tuple[int, int]] = {
    PRIORITY_PROD: (9000, 9999),
    PRIORITY_MID: (7000, 7999),
    PRIORITY_BATCH: (5000, 5999),
    PRIORITY_FREE: (3000, 3999),
}
"""Inclusive ``spec.priority`` range of each class."""

PRIORITY_DEFAULT_VALUES: Mapping[PriorityClass, int] = {
    PRIORITY_PROD: 9500,
    PRIORITY_MID: 7500,
    PRIORITY_BATCH: 5500,
    PRIORITY_FREE: 3500,
    PRIORITY_NONE: 0,
}
"""The priority value Koordinator assumes for a class when the pod sets none."""


def priority_class_by_name(name: str | None) -> PriorityClass:
    """A known class name, or ``""`` for anything else."""
    if name in PRIORITY_CLASSES:
        return name
    return PRIORITY_NONE


def priority_class_by_value(priority: int | None) -> PriorityClass:
    """The class whose range contains ``priority``; ``""`` outside every range or when None."""
    if priority is None:
        return PRIORITY_NONE
    for klass, (low, high) in PRIORITY_RANGES.items():
        if low <= priority <= high:
            return klass
    return PRIORITY_NONE


def priority_class_of_qos(qos: str | None) -> PriorityClass:
    """The default class for a QoS class: SYSTEM/LSE/LSR/LS -> koord-prod, BE -> koord-batch."""
    if qos in (QOS_SYSTEM, QOS_LSE, QOS_LSR, QOS_LS):
        return PRIORITY_PROD
    if qos == QOS_BE:
        return PRIORITY_BATCH
    return PRIORITY_NONE


def priority_class_of(priority: int | None, label: str | None, qos: str | None = None) -> PriorityClass:
    """The effective class of a pod.

    ``priority`` is ``spec.priority``, ``label`` the value of ``koordinator.sh/priority-class`` (None
    when the label is absent) and ``qos`` the pod's effective Koordinator QoS class. A present label
    wins over the range lookup even when its value is unknown; if that still gives none, the class is
    derived from ``qos``.
    """
    klass = priority_class_by_name(label) if label is not None else priority_class_by_value(priority)
    if klass != PRIORITY_NONE:
        return klass
    return priority_class_of_qos(qos)


def default_priority_of(priority: int | None, klass: PriorityClass) -> int:
    """``priority`` when non-zero, else the default value of ``klass`` (9500, 7500, 5500, 3500 or 0)."""
    if priority:
        return priority
    return PRIORITY_DEFAULT_VALUES[klass]


def parse_pod_sub_priority(raw: str) -> int:
    """``koordinator.sh/priority``: Go ``strconv.ParseInt(s, 0, 32)``, so ``"0x10"`` is 16, ``"010"`` 8."""
    return parse_go_int(LABEL_POD_PRIORITY, raw, base=0, bits=32)


def get_pod_sub_priority(labels: Mapping[str, str] | None) -> int:
    """The sub-priority, 0 when the label is absent or empty."""
    raw = lookup(labels, LABEL_POD_PRIORITY)
    return parse_pod_sub_priority(raw) if raw else 0
