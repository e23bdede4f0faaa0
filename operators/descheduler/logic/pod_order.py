"""Which pod to move first (Koordinator's ``sorter.PodSorter`` without the usage key): ascending,
the first differing key decides, ties broken by namespace/name (Koordinator's sort is unstable)."""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.preemption import get_eviction_cost
from apis.extension.priority import LABEL_POD_PRIORITY_CLASS, priority_class_of
from apis.extension.qos import qos_class_of
from apis.podkey import pod_key

__all__ = ["pod_order_key"]

_PRIORITY_CLASS_RANK = {"koord-free": 0, "koord-batch": 1, "koord-mid": 2, "koord-prod": 3, "": 4}
_KUBE_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}
_KOORD_QOS_RANK = {"BE": 0, "LS": 1, "LSR": 2, "LSE": 3, "SYSTEM": 3, "": 4}
_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _int_annotation(pod: Pod, key: str) -> int:
    raw = (pod.metadata.annotations or {}).get(key)
    with suppress(TypeError, ValueError):
        return int(raw or 0)
    return 0


def _eviction_cost(pod: Pod) -> int:
    with suppress(InvalidAnnotation):
        return get_eviction_cost(pod.metadata.annotations)
    return 0


def pod_order_key(pod: Pod) -> tuple[int, int, int, int, int, int, float, str]:
    labels = pod.metadata.labels or {}
    qos = qos_class_of(labels, pod.status.qos_class)
    klass = priority_class_of(pod.spec.priority, labels.get(LABEL_POD_PRIORITY_CLASS), qos)
    created = pod.metadata.creation_timestamp or _EPOCH
    return (
        _PRIORITY_CLASS_RANK[klass],
        pod.spec.priority or 0,
        _KUBE_QOS_RANK.get(pod.status.qos_class or "", 0),
        _KOORD_QOS_RANK[qos],
        _int_annotation(pod, _DELETION_COST),
        _eviction_cost(pod),
        -created.timestamp(),  # newest first
        pod_key(pod),
    )
