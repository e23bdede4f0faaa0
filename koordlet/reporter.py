"""NodeMetric status from the metric cache, filled as Koordinator's koordlet fills it.

- ``nodeMetric.nodeUsage`` and ``systemUsage``: the average over the last
  ``aggregateDurationSeconds``; memory as ``nodeMemoryCollectPolicy`` says.
- ``aggregatedNodeUsages`` and ``aggregatedSystemUsages``: one entry per window of
  ``nodeAggregatePolicy.durations`` with p50, p90, p95 and p99; a window whose samples span less
  than half of it (koordlet just started) has each of them empty.
- ``podsMetric``: each pod of the node with samples in the aggregation period, its average usage,
  priority class and QoS class.
- ``updateTime``: when the status was computed.

CPU is written in millicores (DecimalSI), memory in bytes (BinarySI), as koordlet writes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from apis.core import Pod
from apis.extension.priority import LABEL_POD_PRIORITY_CLASS, priority_class_of
from apis.extension.qos import qos_class_of
from apis.podrequests import pod_requests
from apis.quantity import Format, Quantity
from apis.slo.nodemetric import AggregatedUsage, NodeMetricInfo, NodeMetricStatus, PodMetricInfo, ResourceMap
from koordlet.collectors import series
from koordlet.metric_cache import AggregationType, MetricSource
from koordlet.policy import EffectivePolicy

__all__ = ["PodMeta", "build_status", "memory_series", "pod_meta"]

_WINDOW_TYPES: tuple[AggregationType, ...] = ("p50", "p90", "p95", "p99")
COLD_START_RATIO = 0.5


@dataclass(frozen=True)
class PodMeta:
    uid: str
    name: str
    namespace: str
    priority: str
    qos: str
    requests: Mapping[str, Quantity] = field(default_factory=dict)
    """The pod's requests as Kubernetes sums them (the Prod prediction adds them up)."""
    terminating: bool = False
    """Being deleted or finished: left out of the Prod prediction."""
    node_name: str = ""


def pod_meta(pod: Pod) -> PodMeta:
    """A pod's identity with Koordinator's priority and QoS class (defaults derived as koordlet does)."""
    labels = pod.metadata.labels or {}
    qos = qos_class_of(labels, pod.status.qos_class)
    return PodMeta(
        uid=pod.metadata.uid or "",
        name=pod.metadata.name or "",
        namespace=pod.metadata.namespace or "",
        priority=priority_class_of(pod.spec.priority, labels.get(LABEL_POD_PRIORITY_CLASS), qos),
        qos=qos,
        requests=pod_requests(pod.spec),
        terminating=pod.metadata.deletion_timestamp is not None
        or pod.status.phase in ("Succeeded", "Failed"),
        node_name=pod.spec.node_name or "",
    )


def memory_series(policy: str, cold_supported: bool, scope: str) -> str:
    """The memory series of ``scope`` ("node" or "pod") for a ``nodeMemoryCollectPolicy``; the hot
    page policy falls back to usage without page cache where the kernel reports no cold pages."""
    if policy == "usageWithPageCache":
        return series.NODE_MEMORY_WITH_PAGE_CACHE if scope == "node" else series.POD_MEMORY_WITH_PAGE_CACHE
    if policy == "usageWithHotPageCache" and cold_supported:
        return series.NODE_MEMORY_WITH_HOT_PAGE if scope == "node" else series.POD_MEMORY_WITH_HOT_PAGE
    return series.NODE_MEMORY if scope == "node" else series.POD_MEMORY


def _resources(cpu_cores: float, memory_bytes: float) -> ResourceMap:
    return ResourceMap(
        resources={
            "cpu": Quantity.from_milli(int(cpu_cores * 1000)),
            "memory": Quantity.from_int(int(memory_bytes), Format.BINARY_SI),
        }
    )


def _usage(
    cache: MetricSource,
    cpu: tuple[str, ...],
    memory: tuple[str, ...],
    start: float,
    end: float,
    kind: AggregationType,
    cold_start_filter: bool,
) -> ResourceMap | None:
    cpu_window = cache.query(cpu, start, end)
    memory_window = cache.query(memory, start, end)
    if cpu_window is None or memory_window is None:
        return None
    if cold_start_filter and cpu_window.duration_seconds < (end - start) * COLD_START_RATIO:
        return ResourceMap()
    return _resources(cpu_window.value(kind), memory_window.value(kind))


def _windows(
    cache: MetricSource, cpu: tuple[str, ...], memory: tuple[str, ...], policy: EffectivePolicy, now: float
) -> list[AggregatedUsage]:
    return [
        AggregatedUsage(
            duration=text,
            usage={
                kind: _usage(cache, cpu, memory, now - seconds, now, kind, cold_start_filter=True)
                or ResourceMap()
                for kind in _WINDOW_TYPES
            },
        )
        for text, seconds in policy.windows
    ]


def build_status(
    cache: MetricSource,
    policy: EffectivePolicy,
    pods: Sequence[PodMeta],
    now: float,
    cold_supported: bool = False,
) -> NodeMetricStatus | None:
    """The status to write, or None while the node has no samples in the aggregation period."""
    start = now - policy.aggregate_duration_seconds
    node_cpu = (series.NODE_CPU,)
    node_memory = (memory_series(policy.memory_policy, cold_supported, "node"),)
    node_usage = _usage(cache, node_cpu, node_memory, start, now, "avg", cold_start_filter=False)
    if node_usage is None:
        return None
    system = ((series.SYSTEM_CPU,), (series.SYSTEM_MEMORY,))
    pod_memory = memory_series(policy.memory_policy, cold_supported, "pod")
    pods_metric = []
    for pod in pods:
        usage = _usage(
            cache,
            (series.POD_CPU, pod.uid),
            (pod_memory, pod.uid),
            start,
            now,
            "avg",
            cold_start_filter=False,
        )
        if usage is None:
            continue
        pods_metric.append(
            PodMetricInfo(
                name=pod.name, namespace=pod.namespace, pod_usage=usage, priority=pod.priority, qos=pod.qos
            )
        )
    return NodeMetricStatus(
        update_time=datetime.fromtimestamp(int(now), UTC),  # whole seconds, as metav1.Time is written
        node_metric=NodeMetricInfo(
            node_usage=node_usage,
            aggregated_node_usages=_windows(cache, node_cpu, node_memory, policy, now),
            system_usage=_usage(cache, *system, start, now, "avg", cold_start_filter=False) or ResourceMap(),
            aggregated_system_usages=_windows(cache, *system, policy, now),
        ),
        pods_metric=pods_metric,
    )
