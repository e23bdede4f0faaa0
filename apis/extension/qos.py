"""Koordinator QoS classes (api-reference 2.9).

Only the pod label ``koordinator.sh/qosClass`` is read; an annotation with the same key is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from apis.extension._annotation import lookup

__all__ = [
    "KUBERNETES_QOS_BEST_EFFORT",
    "KUBERNETES_QOS_BURSTABLE",
    "KUBERNETES_QOS_GUARANTEED",
    "LABEL_POD_QOS",
    "QOS_BE",
    "QOS_CLASSES",
    "QOS_LS",
    "QOS_LSE",
    "QOS_LSR",
    "QOS_NONE",
    "QOS_SYSTEM",
    "KubernetesQoSClass",
    "QoSClass",
    "qos_class_by_name",
    "qos_class_from_labels",
    "qos_class_of",
]

LABEL_POD_QOS = "koordinator.sh/qosClass"

QoSClass = Literal["LSE", "LSR", "LS", "BE", "SYSTEM", ""]
QOS_LSE: QoSClass = "LSE"
QOS_LSR: QoSClass = "LSR"
QOS_LS: QoSClass = "LS"
QOS_BE: QoSClass = "BE"
QOS_SYSTEM: QoSClass = "SYSTEM"
QOS_NONE: QoSClass = ""
QOS_CLASSES: tuple[QoSClass, ...] = tuple(q for q in get_args(QoSClass) if q)

KubernetesQoSClass = Literal["Guaranteed", "Burstable", "BestEffort"]
KUBERNETES_QOS_GUARANTEED: KubernetesQoSClass = "Guaranteed"
KUBERNETES_QOS_BURSTABLE: KubernetesQoSClass = "Burstable"
KUBERNETES_QOS_BEST_EFFORT: KubernetesQoSClass = "BestEffort"


def qos_class_by_name(name: str | None) -> QoSClass:
    """A known QoS class name, or ``""`` (none) for anything else."""
    if name in QOS_CLASSES:
        return name
    return QOS_NONE


def qos_class_from_labels(labels: Mapping[str, str] | None) -> QoSClass:
    """The class written in the pod label, ``""`` when absent or unknown."""
    return qos_class_by_name(lookup(labels, LABEL_POD_QOS))


def qos_class_of(labels: Mapping[str, str] | None, kubernetes_qos: str | None) -> QoSClass:
    """The effective QoS class: the label when it names a known class, else derived from the
    Kubernetes QoS class (Guaranteed -> LSR, Burstable -> LS, BestEffort -> BE)."""
    explicit = qos_class_from_labels(labels)
    if explicit != QOS_NONE:
        return explicit
    if kubernetes_qos == KUBERNETES_QOS_GUARANTEED:
        return QOS_LSR
    if kubernetes_qos == KUBERNETES_QOS_BURSTABLE:
        return QOS_LS
    if kubernetes_qos == KUBERNETES_QOS_BEST_EFFORT:
        return QOS_BE
    return QOS_NONE
