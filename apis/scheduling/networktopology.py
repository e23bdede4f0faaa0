"""ClusterNetworkTopology (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped).

Describes the layers of the data-centre network (for example spine, block, accelerator) by the
node labels that name each layer instance. The scheduler reads only the object named ``default``
and rewrites its status from the node labels every 10 seconds.
"""

from __future__ import annotations

from typing import ClassVar

from apis.base import CRDInfo, KoordModel
from apis.meta import KoordResource
from apis.types import Int32

__all__ = [
    "ClusterNetworkTopology",
    "ClusterNetworkTopologySpec",
    "ClusterNetworkTopologyStatus",
    "NetworkTopologySpec",
    "TopologyInfo",
    "TopologyStatus",
]


class NetworkTopologySpec(KoordModel):
    """One layer of the topology chain."""

    topology_layer: str
    """Layer name, chosen freely; ClusterTopologyLayer (the implicit root) and NodeTopologyLayer
    (the leaf, which must appear) are built in."""
    parent_topology_layer: str | None = None
    """Name of the parent layer; the chain from NodeTopologyLayer upward must be linear."""
    label_key: list[str] | None = None
    """Node label keys naming this layer's instance; the first key present on a node wins."""


class ClusterNetworkTopologySpec(KoordModel):
    """The layer chain."""

    network_topology_spec: list[NetworkTopologySpec]
    """The layers; every item must lie on the chain from NodeTopologyLayer upward."""


class TopologyInfo(KoordModel):
    """Identifies one instance of a layer."""

    topology_layer: str
    """Layer name."""
    topology_name: str
    """Instance name (the label value); empty for the cluster root."""


class TopologyStatus(KoordModel):
    """One node of the built topology tree."""

    topology_info: TopologyInfo
    """This instance."""
    parent_topology_info: TopologyInfo | None = None
    """The parent instance; unset for the cluster root."""
    child_topology_layer: str | None = None
    """Layer of the children."""
    child_topology_names: list[str] | None = None
    """Names of the child instances."""
    node_num: Int32
    """Number of nodes below this instance."""


class ClusterNetworkTopologyStatus(KoordModel):
    """The topology tree the scheduler built from node labels."""

    detail_status: list[TopologyStatus] | None = None
    """Every instance of every layer; the root has layer ClusterTopologyLayer and an empty
    name."""


class ClusterNetworkTopology(KoordResource):
    """ClusterNetworkTopology declares the network layers used by topology-aware gangs."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="scheduling.koordinator.sh",
        version="v1alpha1",
        kind="ClusterNetworkTopology",
        plural="clusternetworktopologies",
        singular="clusternetworktopology",
        scope="Cluster",
        status_subresource=True,
    )

    spec: ClusterNetworkTopologySpec | None = None
    """The layer chain."""
    status: ClusterNetworkTopologyStatus | None = None
    """The topology tree built by the scheduler."""
