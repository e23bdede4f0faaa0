"""What the batch and mid formulas read, in integer units: milli-cores and bytes.

Only the native ``cpu`` and ``memory`` of pods count (Koordinator masks pod requests to them), so a
pod already converted to batch or mid resources requests 0 here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from apis.core import Node, Pod
from apis.cpulist import parse_cpus
from apis.errors import InvalidAnnotation
from apis.extension.numa import ANNOTATION_NODE_RESERVATION, get_resource_status, parse_node_reservation
from apis.extension.priority import (
    LABEL_POD_PRIORITY_CLASS,
    PRIORITY_BATCH,
    PRIORITY_DEFAULT_VALUES,
    PRIORITY_FREE,
    PriorityClass,
    priority_class_by_name,
    priority_class_of,
)
from apis.extension.qos import QoSClass, qos_class_of
from apis.podkey import pod_key
from apis.podqos import kubernetes_qos
from apis.podrequests import pod_requests
from apis.quantity import Quantity
from apis.slo.nodemetric import NodeMetric, ResourceMap
from apis.slo.nodemetric_reading import pods_metric_by_key

__all__ = [
    "CpuMem",
    "NodeInputs",
    "PodEntry",
    "PodUsage",
    "inputs_from_entries",
    "node_inputs",
    "pod_entry",
]


@dataclass(frozen=True)
class CpuMem:
    """A cpu (milli-cores) and memory (bytes) pair."""

    cpu: int = 0
    memory: int = 0

    def __add__(self, other: CpuMem) -> CpuMem:
        return CpuMem(self.cpu + other.cpu, self.memory + other.memory)

    def __sub__(self, other: CpuMem) -> CpuMem:
        return CpuMem(self.cpu - other.cpu, self.memory - other.memory)

    def max(self, other: CpuMem) -> CpuMem:
        return CpuMem(max(self.cpu, other.cpu), max(self.memory, other.memory))

    def min(self, other: CpuMem) -> CpuMem:
        return CpuMem(min(self.cpu, other.cpu), min(self.memory, other.memory))

    def floor0(self) -> CpuMem:
        return self.max(CpuMem())

    @classmethod
    def of(cls, resources: Mapping[str, Quantity] | None) -> CpuMem:
        resources = resources or {}
        cpu = resources.get("cpu")
        memory = resources.get("memory")
        return cls(cpu.milli_value() if cpu is not None else 0, memory.value() if memory is not None else 0)

    @classmethod
    def total(cls, items: Iterable[CpuMem]) -> CpuMem:
        result = cls()
        for item in items:
            result = result + item
        return result


def _of_map(resource_map: ResourceMap | None) -> CpuMem:
    return CpuMem.of(resource_map.resources if resource_map is not None else None)


@dataclass(frozen=True)
class PodEntry:
    """A Running or Pending pod of the node."""

    key: str
    """namespace/name, the key pod metrics are matched by."""
    priority: PriorityClass
    qos: QoSClass
    request: CpuMem
    numa_nodes: tuple[int, ...] = ()
    """The NUMA nodes of its ``scheduling.koordinator.sh/resource-status`` (none: not bound to any)."""
    numa_problem: str | None = None
    """Why its resource-status did not parse (it then counts as bound to no NUMA node)."""
    uid: str = ""
    """The pod's uid, for an event on it."""


@dataclass(frozen=True)
class PodUsage:
    """A pod metric of the NodeMetric."""

    usage: CpuMem
    priority: PriorityClass


@dataclass(frozen=True)
class NodeInputs:
    capacity: CpuMem
    allocatable: CpuMem
    anno_reserved: CpuMem
    """From ``node.koordinator.sh/reservation`` (``reservedCPUs`` counted as whole CPUs)."""
    pods: tuple[PodEntry, ...]
    metric_update_time: datetime | None
    """None when there is no NodeMetric or it was never reported."""
    node_usage: CpuMem | None
    """None when the NodeMetric has no node usage (cpu or memory missing)."""
    system_usage: CpuMem
    host_app_usage: Mapping[PriorityClass, CpuMem]
    """Usage of host applications by priority class."""
    pod_usages: Mapping[str, PodUsage]
    prod_reclaimable: CpuMem
    """``prodReclaimableMetric``; zero when koordlet reported none."""
    problems: tuple[str, ...] = ()
    """Node annotations that did not parse and were skipped."""

    @property
    def kubelet_reserved(self) -> CpuMem:
        return (self.capacity - self.allocatable).floor0()

    @property
    def reserved(self) -> CpuMem:
        return self.kubelet_reserved.max(self.anno_reserved)

    def host_apps_above(self, priority_value: int) -> CpuMem:
        """Host applications whose class's default priority is strictly above ``priority_value``."""
        return CpuMem.total(
            usage
            for klass, usage in self.host_app_usage.items()
            if PRIORITY_DEFAULT_VALUES[klass] > priority_value
        )


def _anno_reserved(node: Node) -> tuple[CpuMem, str | None]:
    raw = (node.metadata.annotations or {}).get(ANNOTATION_NODE_RESERVATION)
    if raw is None:
        return CpuMem(), None
    try:
        reservation = parse_node_reservation(raw)
        reserved = CpuMem.of(reservation.resources)
        if reservation.reserved_cpus:
            try:
                reserved = CpuMem(len(parse_cpus(reservation.reserved_cpus)) * 1000, reserved.memory)
            except ValueError as exc:
                raise InvalidAnnotation(ANNOTATION_NODE_RESERVATION, f"reservedCPUs: {exc}") from exc
    except InvalidAnnotation as exc:
        return CpuMem(), str(exc)
    return reserved, None


def _pod_numa_nodes(pod: Pod) -> tuple[tuple[int, ...], str | None]:
    try:
        status = get_resource_status(pod.metadata.annotations)
    except InvalidAnnotation as exc:
        return (), str(exc)
    return tuple(sorted({r.node for r in status.numa_node_resources or ()})), None


def pod_entry(pod: Pod) -> PodEntry | None:
    """What the formulas read of a pod; None unless it is bound to a node and Running or Pending."""
    if not pod.spec.node_name or pod.status.phase not in ("Running", "Pending"):
        return None
    labels = pod.metadata.labels or {}
    qos = qos_class_of(labels, kubernetes_qos(pod))
    numa_nodes, numa_problem = _pod_numa_nodes(pod)
    return PodEntry(
        key=pod_key(pod),
        priority=priority_class_of(pod.spec.priority, labels.get(LABEL_POD_PRIORITY_CLASS), qos),
        qos=qos,
        request=CpuMem.of(pod_requests(pod.spec)),
        numa_nodes=numa_nodes,
        numa_problem=numa_problem,
        uid=pod.metadata.uid or "",
    )


def node_inputs(node: Node, pods: Iterable[Pod], metric: NodeMetric | None) -> NodeInputs:
    """The node's figures; only Running and Pending pods of the node count."""
    entries = (pod_entry(pod) for pod in pods if pod.spec.node_name == node.metadata.name)
    return inputs_from_entries(node, (e for e in entries if e is not None), metric)


def inputs_from_entries(node: Node, pods: Iterable[PodEntry], metric: NodeMetric | None) -> NodeInputs:
    """The node's figures from the entries (``pod_entry``) of its counted pods."""
    reserved, problem = _anno_reserved(node)
    status = metric.status if metric is not None else None
    info = status.node_metric if status is not None else None
    node_usage = None
    if info is not None and info.node_usage is not None:
        resources = info.node_usage.resources or {}
        if "cpu" in resources and "memory" in resources:
            node_usage = CpuMem.of(resources)
    host_apps: dict[PriorityClass, CpuMem] = {}
    for app in (status.host_application_metric if status else None) or ():
        klass = priority_class_by_name(app.priority)
        host_apps[klass] = host_apps.get(klass, CpuMem()) + _of_map(app.usage)
    pod_usages = {
        key: PodUsage(_of_map(m.pod_usage), priority_class_by_name(m.priority))
        for key, m in pods_metric_by_key(status).items()
    }
    reclaimable = status.prod_reclaimable_metric if status is not None else None
    return NodeInputs(
        capacity=CpuMem.of(node.status.capacity),
        allocatable=CpuMem.of(node.status.allocatable),
        anno_reserved=reserved,
        pods=tuple(pods),
        metric_update_time=status.update_time if status is not None else None,
        node_usage=node_usage,
        system_usage=_of_map(info.system_usage if info is not None else None),
        host_app_usage=host_apps,
        pod_usages=pod_usages,
        prod_reclaimable=_of_map(reclaimable.resource if reclaimable is not None else None),
        problems=(problem,) if problem else (),
    )


BATCH_OR_FREE: frozenset[PriorityClass] = frozenset({PRIORITY_BATCH, PRIORITY_FREE})
