"""NodeMetric (``slo.koordinator.sh/v1alpha1``, cluster-scoped): resource usage of one node.

Named after its node; koord-manager creates it and fills ``spec``, koordlet reports ``status``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from apis.base import CRDInfo, KoordModel
from apis.meta import KoordResource
from apis.quantity import Quantity
from apis.scheduling.device import DeviceInfo
from apis.types import GoDuration, Int32, Int64, PreserveUnknownObject, Time

__all__ = [
    "AggregatePolicy",
    "AggregatedUsage",
    "HostApplicationMetricInfo",
    "NUMAMetricInfo",
    "NodeMetric",
    "NodeMetricCollectPolicy",
    "NodeMetricInfo",
    "NodeMetricSpec",
    "NodeMetricStatus",
    "PodMetricInfo",
    "ReclaimableMetric",
    "ResourceMap",
    "default_collect_policy",
]

MemoryCollectPolicy = Literal["usageWithHotPageCache", "usageWithoutPageCache", "usageWithPageCache"]


class AggregatePolicy(KoordModel):
    """Aggregation windows of node usage."""

    durations: list[GoDuration] | None = None
    """Windows to aggregate over; koord-manager defaults them to [5m, 10m, 30m]."""


class NodeMetricCollectPolicy(KoordModel):
    """How koordlet collects and reports metrics."""

    aggregate_duration_seconds: Int64 | None = None
    """Aggregation period in seconds; koord-manager defaults it to 300."""
    report_interval_seconds: Int64 | None = None
    """Report period in seconds; koord-manager defaults it to 60."""
    node_aggregate_policy: AggregatePolicy | None = None
    """Windows of aggregated node usage."""
    node_memory_collect_policy: MemoryCollectPolicy | None = None
    """How memory usage is measured; koord-manager and koordlet default to
    usageWithoutPageCache."""


def default_collect_policy() -> NodeMetricCollectPolicy:
    """The policy Koordinator's slo-controller writes into a new NodeMetric (its colocation defaults),
    and what koordlet assumes for a field the spec leaves out."""
    return NodeMetricCollectPolicy(
        aggregate_duration_seconds=300,
        report_interval_seconds=60,
        node_aggregate_policy=AggregatePolicy(durations=["5m0s", "10m0s", "30m0s"]),
        node_memory_collect_policy="usageWithoutPageCache",
    )


class NodeMetricSpec(KoordModel):
    """Collection policy for the node."""

    metric_collect_policy: NodeMetricCollectPolicy | None = None
    """Metric collection policy (the Go field is CollectPolicy)."""


class ResourceMap(KoordModel):
    """A resource list plus per-device usage."""

    resources: dict[str, Quantity] | None = None
    """Usage of each resource."""
    devices: list[DeviceInfo] | None = None
    """Per-device usage."""


class AggregatedUsage(KoordModel):
    """Usage aggregated over one window."""

    usage: dict[str, ResourceMap] | None = None
    """Usage per aggregation type: avg, p50, p90, p95 or p99."""
    duration: GoDuration | None = None
    """The aggregation window."""


class NUMAMetricInfo(KoordModel):
    """Usage of one NUMA node."""

    numa_node_id: Int32 = Field(alias="numaNodeID")
    """The NUMA node id."""
    node_usage: ResourceMap | None = None
    """Total usage on this NUMA node."""
    system_usage: ResourceMap | None = None
    """System usage on this NUMA node (host-application usage is not subtracted)."""


class NodeMetricInfo(KoordModel):
    """Node-level usage."""

    node_usage: ResourceMap | None = None
    """Total resource usage of the node."""
    aggregated_node_usages: list[AggregatedUsage] | None = None
    """Aggregated node usage; reported only once there are enough samples."""
    system_usage: ResourceMap | None = None
    """Usage of daemons and the kernel: node usage minus pod and host-application usage."""
    aggregated_system_usages: list[AggregatedUsage] | None = None
    """Aggregated system usage; deleted pods are excluded."""
    numa_usages: list[NUMAMetricInfo] | None = None
    """Usage per NUMA node."""


class PodMetricInfo(KoordModel):
    """Usage of one pod."""

    name: str | None = None
    """Pod name."""
    namespace: str | None = None
    """Pod namespace."""
    pod_usage: ResourceMap | None = None
    """Resource usage of the pod."""
    priority: str | None = None
    """Koordinator priority class of the pod (koord-prod, koord-mid, koord-batch, koord-free)."""
    qos: str | None = None
    """Koordinator QoS class of the pod (LSE, LSR, LS, BE, SYSTEM)."""
    extensions: PreserveUnknownObject | None = None
    """Third-party extensions, stored without validation."""


class HostApplicationMetricInfo(KoordModel):
    """Usage of one out-of-band (non-pod) application on the node."""

    name: str | None = None
    """Name of the host application."""
    usage: ResourceMap | None = None
    """Resource usage of the host application."""
    priority: str | None = None
    """Priority class of the application."""
    qos: str | None = None
    """QoS class of the application."""


class ReclaimableMetric(KoordModel):
    """A predicted resource figure."""

    resource: ResourceMap | None = None
    """The predicted resources."""


class NodeMetricStatus(KoordModel):
    """Usage reported by koordlet."""

    update_time: Time | None = None
    """Last time the NodeMetric was updated."""
    node_metric: NodeMetricInfo | None = None
    """Metrics of the node."""
    pods_metric: list[PodMetricInfo] | None = None
    """Metrics of the pods on the node."""
    host_application_metric: list[HostApplicationMetricInfo] | None = None
    """Metrics of out-of-band applications on the node."""
    prod_reclaimable_metric: ReclaimableMetric | None = None
    """Reclaimable resources of Prod pods."""
    prod_peak_metric: ReclaimableMetric | None = None
    """Predicted peak of Prod usage, safety margin included."""


class NodeMetric(KoordResource):
    """NodeMetric carries the collection policy and the reported usage of one node."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="slo.koordinator.sh",
        version="v1alpha1",
        kind="NodeMetric",
        plural="nodemetrics",
        singular="nodemetric",
        scope="Cluster",
        status_subresource=True,
    )

    spec: NodeMetricSpec | None = None
    """Collection policy."""
    status: NodeMetricStatus | None = None
    """Reported usage."""
