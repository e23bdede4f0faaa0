"""Which hot node goes first, and which of its pods (``sortNodesByUsage`` and
``sortPodsOnOneOverloadedNode``, ``utils/sorter``). Every order ends on the name, so equal keys
(frequent with per-mille scores) never leave the order to chance as Go's unstable sorts do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from apis.core import Pod
from apis.errors import InvalidValue
from apis.extension.preemption import get_eviction_cost
from apis.extension.priority import (
    LABEL_POD_PRIORITY_CLASS,
    PRIORITY_BATCH,
    PRIORITY_FREE,
    PRIORITY_MID,
    PRIORITY_PROD,
    priority_class_of,
)
from apis.extension.qos import QOS_BE, QOS_LS, QOS_LSE, QOS_LSR, QOS_SYSTEM, qos_class_of
from apis.podkey import PodRef, pod_ref
from apis.podqos import kubernetes_qos
from operators.descheduler.lownodeload.usage import Amounts

__all__ = [
    "ANNOTATION_POD_DELETION_COST",
    "node_score",
    "pod_sort_key",
    "segmented_score",
    "sort_pods",
    "sort_sources",
]

ANNOTATION_POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

_PRIORITY_RANK = {PRIORITY_FREE: 0, PRIORITY_BATCH: 1, PRIORITY_MID: 2, PRIORITY_PROD: 3}
_NO_RANK = 4
_K8S_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}
_KOORD_QOS_RANK = {QOS_BE: 0, QOS_LS: 1, QOS_LSR: 2, QOS_LSE: 3, QOS_SYSTEM: 3}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def node_score(usage: Amounts, allocatable: Amounts, weights: Mapping[str, int]) -> int:
    """Σ w·⌊1000·min(used, alloc)/alloc⌋ / Σ w in integers (``utils/sorter/scorer.go``); resources
    the node does not have score 0."""
    total = weight_sum = 0
    for name, weight in weights.items():
        alloc = allocatable.get(name, 0)
        weight_sum += weight
        if alloc > 0:
            total += weight * (1000 * min(usage.get(name, 0), alloc) // alloc)
    return total // weight_sum if weight_sum else 0


def sort_sources(names_and_scores: Sequence[tuple[str, int]]) -> list[str]:
    """Highest score first, then by name."""
    return [name for name, _ in sorted(names_and_scores, key=lambda pair: (-pair[1], pair[0]))]


def _int_annotation(pod: Pod, key: str) -> int:
    raw = (pod.metadata.annotations or {}).get(key)
    if raw is None:
        return 0
    try:
        return int(raw)
    except ValueError:
        return 0


def _eviction_cost(pod: Pod) -> int:
    try:
        return get_eviction_cost(pod.metadata.annotations)
    except InvalidValue:
        return 0


def segmented_score(
    pod_usage: Amounts, node_usage: Amounts, high: Amounts, weights: Mapping[str, int]
) -> float:
    """v1.6's segmented usage score of a pod on a hot node: for each over resource,
    x = pod usage / excess, f(x) = x below 1 and 1 + 1/x from 1 on; the weighted mean over the
    over resources. The pod that just covers the excess scores highest (2), any pod covering it
    beats any that does not."""
    total = 0.0
    weight_sum = 0
    for name, limit in high.items():
        excess = node_usage.get(name, 0) - limit
        if excess <= 0:
            continue
        weight = weights.get(name, 1)
        x = pod_usage.get(name, 0) / excess
        total += weight * (x if x < 1 else 1 + 1 / x)
        weight_sum += weight
    return total / weight_sum if weight_sum else 0.0


def pod_sort_key(pod: Pod, score: float | None) -> tuple[object, ...]:
    """Ascending: the first pod is moved first. ``score`` is the segmented score, None without a
    metric (such pods go after every measured one at the same earlier keys)."""
    labels = pod.metadata.labels or {}
    k8s_qos = kubernetes_qos(pod)
    qos = qos_class_of(labels, k8s_qos)
    klass = priority_class_of(pod.spec.priority, labels.get(LABEL_POD_PRIORITY_CLASS), qos)
    created = pod.metadata.creation_timestamp or _EPOCH
    return (
        _PRIORITY_RANK.get(klass, _NO_RANK),
        pod.spec.priority or 0,
        _K8S_QOS_RANK.get(k8s_qos, 3),
        _KOORD_QOS_RANK.get(qos, 4),
        _int_annotation(pod, ANNOTATION_POD_DELETION_COST),
        _eviction_cost(pod),
        (1, 0.0) if score is None else (0, -score),
        -created.timestamp(),
        pod_ref(pod),
    )


def sort_pods(
    pods: Sequence[Pod],
    pod_usage: Mapping[PodRef, Amounts],
    node_usage: Amounts,
    high: Amounts,
    weights: Mapping[str, int],
) -> list[Pod]:
    def key(pod: Pod) -> tuple[object, ...]:
        usage = pod_usage.get(pod_ref(pod))
        score = None if usage is None else segmented_score(usage, node_usage, high, weights)
        return pod_sort_key(pod, score)

    return sorted(pods, key=key)
