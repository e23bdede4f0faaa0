"""NodeResourceTopology (``topology.node.k8s.io``, cluster-scoped): a node's NUMA zones.

The upstream topology-aware-scheduling CRD (k8stopologyawareschedwg/noderesourcetopology-api) that
Koordinator ships and koordlet writes: no spec or status, the fields sit at the top level.
``v1alpha1`` and ``v1alpha2`` are both served with one schema (v1alpha2 only adds the top-level
``attributes`` and no longer requires ``topologyPolicies``); etcd stores v1alpha2.

Koordinator's conventions: the object is named after its node, labelled
``app.kubernetes.io/managed-by=Koordinator``, owned by the Node, and has one zone per NUMA node
(``type: Node``, ``name: node-<id>``). koordlet's annotations on it (cpu topology, shared pools,
the kubelet CPU manager policy, ...) are parsed by ``apis.extension.numa``.
"""

from __future__ import annotations

import re
from typing import ClassVar

from apis.base import CRDInfo, KoordModel, PrinterColumn
from apis.meta import KoordResource
from apis.quantity import Quantity
from apis.types import Int64

__all__ = [
    "LABEL_MANAGED_BY",
    "MANAGED_BY_KOORDINATOR",
    "ZONE_TYPE_NODE",
    "AttributeInfo",
    "CostInfo",
    "NodeResourceTopology",
    "ResourceInfo",
    "Zone",
    "numa_zone_name",
    "parse_numa_zone_name",
]

ZONE_TYPE_NODE = "Node"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_KOORDINATOR = "Koordinator"

_NUMA_ZONE = re.compile(r"node-(0|[1-9][0-9]{0,5})")


def numa_zone_name(numa_id: int) -> str:
    return f"node-{numa_id}"


def parse_numa_zone_name(name: str) -> int | None:
    """The NUMA id of a ``node-<id>`` zone name; None for any other name."""
    match = _NUMA_ZONE.fullmatch(name)
    return int(match.group(1)) if match else None


class CostInfo(KoordModel):
    """The distance from this zone to another (Koordinator never fills it)."""

    name: str
    """The other zone's name."""
    value: Int64
    """The distance."""


class AttributeInfo(KoordModel):
    """A free-form name/value attribute."""

    name: str
    """The attribute's name."""
    value: str
    """The attribute's value."""


class ResourceInfo(KoordModel):
    """One resource of a zone."""

    name: str
    """Resource name, e.g. ``cpu``, ``memory``, ``kubernetes.io/batch-cpu``."""
    capacity: Quantity
    """Total amount in the zone."""
    allocatable: Quantity
    """Amount pods may be given (capacity less what is reserved)."""
    available: Quantity
    """Amount not yet given out (koordlet writes allocatable here)."""


class Zone(KoordModel):
    """A NUMA node (``type: Node``) or another topology zone."""

    name: str
    """``node-<numaId>`` for a NUMA node."""
    type: str
    """``Node`` for a NUMA node."""
    parent: str | None = None
    """The enclosing zone, if any."""
    costs: list[CostInfo] | None = None
    """Distances to other zones."""
    attributes: list[AttributeInfo] | None = None
    """Free-form attributes of the zone."""
    resources: list[ResourceInfo] | None = None
    """The zone's resources: ``cpu`` (logical CPUs), ``memory``, hugepages, batch resources."""

    @property
    def numa_id(self) -> int | None:
        """The NUMA id of a ``Node`` zone named ``node-<id>``; None for any other zone."""
        return parse_numa_zone_name(self.name) if self.type == ZONE_TYPE_NODE else None

    def resource(self, name: str) -> ResourceInfo | None:
        return next((r for r in self.resources or () if r.name == name), None)


class NodeResourceTopology(KoordResource):
    """The NUMA zones and resources of one node, and the kubelet's topology policy."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="topology.node.k8s.io",
        version="v1alpha1",
        kind="NodeResourceTopology",
        plural="noderesourcetopologies",
        singular="noderesourcetopology",
        scope="Cluster",
        short_names=("node-res-topo",),
        categories=(),
        extra_versions=("v1alpha2",),
        storage_version="v1alpha2",
        annotations=(("api-approved.kubernetes.io", "https://github.com/kubernetes/enhancements/pull/1870"),),
        printer_columns=(
            PrinterColumn(name="Policies", type="string", json_path=".topologyPolicies"),
            PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
        ),
    )

    topology_policies: list[str] | None = None
    """The kubelet topology manager policy and scope, e.g. ``SingleNUMANodePodLevel`` or ``None``
    (required in v1alpha1, deprecated in v1alpha2)."""
    zones: list[Zone]
    """One zone per NUMA node."""
    attributes: list[AttributeInfo] | None = None
    """Node-wide attributes (v1alpha2)."""

    def numa_zones(self) -> dict[int, Zone]:
        """NUMA id -> zone, for the ``Node`` zones named ``node-<id>``."""
        return {zone.numa_id: zone for zone in self.zones if zone.numa_id is not None}
