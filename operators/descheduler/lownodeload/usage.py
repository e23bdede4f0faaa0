"""What a node uses, read from its NodeMetric (Koordinator's ``getNodeUsage``).

Amounts are integers in the scheduler's units (``apis.resources.to_int_units``: millicores for
cpu, bytes or counts otherwise), so thresholds and budgets are exact integer arithmetic.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from apis.core import Node, Pod
from apis.errors import InvalidValue
from apis.extension.priority import LABEL_POD_PRIORITY_CLASS, PRIORITY_PROD, priority_class_of
from apis.extension.qos import qos_class_of
from apis.podkey import PodRef, namespaced_ref, pod_ref
from apis.quantity import Quantity
from apis.resources import parse_resource_list, to_int_units
from apis.slo.nodemetric import NodeMetric
from apis.slo.nodemetric_reading import is_expired

__all__ = [
    "ANNOTATION_RAW_ALLOCATABLE",
    "Amounts",
    "NodeUsage",
    "allocatable",
    "is_prod",
    "is_terminal",
    "node_usage",
]

ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
"""JSON resource list: the node's allocatable before koord-manager's amplification (v1.8)."""

Amounts = dict[str, int]


def is_terminal(pod: Pod) -> bool:
    return pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp is not None


def is_prod(pod: Pod) -> bool:
    """Koordinator's Prod class; unlabelled LS/LSR/LSE/SYSTEM pods (so every Burstable or
    Guaranteed pod) count as Prod too."""
    labels = pod.metadata.labels or {}
    qos = qos_class_of(labels, pod.status.qos_class)
    return priority_class_of(pod.spec.priority, labels.get(LABEL_POD_PRIORITY_CLASS), qos) == PRIORITY_PROD


def _amounts(resources: Mapping[str, Quantity] | None, names: Sequence[str]) -> Amounts:
    resources = resources or {}
    return {name: to_int_units(name, resources[name]) if name in resources else 0 for name in names}


def allocatable(node: Node, names: Sequence[str]) -> Amounts:
    """The raw allocatable annotation when it parses (v1.8), else ``status.allocatable``."""
    raw = (node.metadata.annotations or {}).get(ANNOTATION_RAW_ALLOCATABLE)
    if raw:
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, dict):
                return _amounts(parse_resource_list(parsed), names)
        except (ValueError, InvalidValue):
            pass
    return _amounts(node.status.allocatable, names)


@dataclass(slots=True)
class NodeUsage:
    """One node's allocatable and usage; ``usage`` and ``prod_usage`` change as pods are planned
    off it (a source) or onto it (a target)."""

    node: Node
    allocatable: Amounts
    usage: Amounts
    prod_usage: Amounts
    pods: list[Pod]
    """The node's non-terminal pods."""
    pod_usage: dict[PodRef, Amounts] = field(default_factory=dict)
    """Per-pod usage from ``podsMetric``; a pod missing here has no metric."""

    @property
    def name(self) -> str:
        return self.node.metadata.name or ""


def node_usage(
    node: Node,
    pods: Sequence[Pod],
    metric: NodeMetric | None,
    names: Sequence[str],
    now: datetime,
    expiration_seconds: int,
) -> NodeUsage | None:
    """None when the node has no usable metric: no NodeMetric, no ``status.nodeMetric``, no
    ``updateTime``, or one at least ``expiration_seconds`` old."""
    status = metric.status if metric is not None else None
    if (
        status is None
        or status.node_metric is None
        or is_expired(status.update_time, now, expiration_seconds)
    ):
        return None
    system = status.node_metric.system_usage
    usage = _amounts(system.resources if system else None, names)
    per_pod: dict[PodRef, Amounts] = {}
    for pod_metric in status.pods_metric or ():
        amounts = _amounts(pod_metric.pod_usage.resources if pod_metric.pod_usage else None, names)
        per_pod[namespaced_ref(pod_metric.namespace, pod_metric.name)] = amounts
        for name in names:
            usage[name] += amounts[name]
    live = [pod for pod in pods if not is_terminal(pod)]
    if "pods" in usage:
        usage["pods"] = len(live)
    prod = dict.fromkeys(names, 0)
    for pod in live:
        measured = per_pod.get(pod_ref(pod))
        if measured is not None and is_prod(pod):
            for name in names:
                prod[name] += measured[name]
    return NodeUsage(
        node=node,
        allocatable=allocatable(node, names),
        usage=usage,
        prod_usage=prod,
        pods=sorted(live, key=pod_ref),
        pod_usage=per_pod,
    )
