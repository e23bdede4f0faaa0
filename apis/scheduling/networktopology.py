"""ClusterNetworkTopology (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped).

Describes the layers of the data-centre network (for example spine, block, accelerator) by the
node labels that name each layer instance. The scheduler reads only the object named ``default``
and rewrites its status from the node labels every 10 seconds.

The layer chain is read here once for koord-scheduler (placement) and koord-manager (the status
tree): :meth:`ClusterNetworkTopologySpec.layer_chain` walks ``parentTopologyLayer`` links upward
from ``NodeTopologyLayer`` in a loop (480 layers are as cheap as 3), and
:func:`chain_problems` names every layer that keeps the items from forming one chain.
"""

from __future__ import annotations

from typing import ClassVar

from apis.base import CRDInfo, KoordModel
from apis.errors import InvalidSpec
from apis.meta import KoordResource
from apis.types import Int32

__all__ = [
    "CHAIN_FIELD",
    "CLUSTER_TOPOLOGY_LAYER",
    "NODE_TOPOLOGY_LAYER",
    "ClusterNetworkTopology",
    "ClusterNetworkTopologySpec",
    "ClusterNetworkTopologyStatus",
    "InvalidTopologyChain",
    "NetworkTopologySpec",
    "TopologyInfo",
    "TopologyStatus",
    "chain_problems",
]

CLUSTER_TOPOLOGY_LAYER = "ClusterTopologyLayer"
"""Built-in root layer: the whole cluster (re-exported by ``apis.extension.networktopology``)."""
NODE_TOPOLOGY_LAYER = "NodeTopologyLayer"
"""Built-in leaf layer: one Node."""
CHAIN_FIELD = "spec.networkTopologySpec"


class InvalidTopologyChain(InvalidSpec):
    """The layers do not form one chain from NodeTopologyLayer up to the cluster root."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        prefix = f"{CHAIN_FIELD}: "  # the field is named once, by InvalidSpec
        super().__init__(CHAIN_FIELD, "; ".join(p.removeprefix(prefix) for p in problems))


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

    def layer_chain(self) -> list[NetworkTopologySpec]:
        """The layers top-down: the one below the cluster root first, NodeTopologyLayer last.

        Raises InvalidTopologyChain naming each layer that is missing, duplicated, dangling, off
        the chain or in a cycle (:func:`chain_problems`).
        """
        problems = chain_problems(self)
        if problems:
            raise InvalidTopologyChain(problems)
        by_layer = {item.topology_layer: item for item in self.network_topology_spec}
        chain: list[NetworkTopologySpec] = []
        layer: str | None = NODE_TOPOLOGY_LAYER
        while layer and layer != CLUSTER_TOPOLOGY_LAYER:
            chain.append(by_layer[layer])
            layer = by_layer[layer].parent_topology_layer
        chain.reverse()
        return chain


def chain_problems(spec: ClusterNetworkTopologySpec) -> list[str]:
    """Every reason the layers do not form one linear chain from NodeTopologyLayer up to the root.

    Every item must lie on the chain, each layer appears once, every parent is a layer of the spec
    (or empty / ClusterTopologyLayer for the top), there is no cycle, NodeTopologyLayer is present
    and ClusterTopologyLayer is not listed. Each problem names the item and the layer.
    """
    items = spec.network_topology_spec
    problems: list[str] = []
    layers = {item.topology_layer for item in items}
    first_at: dict[str, int] = {}
    for i, item in enumerate(items):
        layer = item.topology_layer
        if layer in first_at:
            problems.append(
                f"{CHAIN_FIELD}[{i}].topologyLayer: duplicate layer {layer!r} (also at [{first_at[layer]}])"
            )
            continue
        first_at[layer] = i
        if layer == CLUSTER_TOPOLOGY_LAYER:
            problems.append(
                f"{CHAIN_FIELD}[{i}].topologyLayer: {CLUSTER_TOPOLOGY_LAYER} is the implicit root and "
                "must not be listed"
            )
        parent = item.parent_topology_layer
        if parent and parent != CLUSTER_TOPOLOGY_LAYER and parent not in layers:
            problems.append(
                f"{CHAIN_FIELD}[{i}].parentTopologyLayer: {parent!r} is not a layer of the spec "
                f"(dangling parent of {layer!r})"
            )
    if NODE_TOPOLOGY_LAYER not in first_at:
        problems.append(
            f"{CHAIN_FIELD}: {NODE_TOPOLOGY_LAYER} is missing; the chain is walked upward from it"
        )
        return problems
    # Walk up from the node layer; whatever the walk does not reach is off the chain.
    on_chain: list[str] = []
    seen: set[str] = set()
    walked: str | None = NODE_TOPOLOGY_LAYER
    while walked and walked != CLUSTER_TOPOLOGY_LAYER and walked in first_at:
        if walked in seen:
            cycle = _path([*on_chain[on_chain.index(walked) :], walked])
            problems.append(f"{CHAIN_FIELD}: the parentTopologyLayer links form a cycle ({cycle})")
            break
        seen.add(walked)
        on_chain.append(walked)
        walked = items[first_at[walked]].parent_topology_layer
    for name, i in first_at.items():
        if name not in seen and name != CLUSTER_TOPOLOGY_LAYER:
            problems.append(
                f"{CHAIN_FIELD}[{i}]: layer {name!r} is not on the chain from {NODE_TOPOLOGY_LAYER} up to "
                f"{CLUSTER_TOPOLOGY_LAYER} ({_path(on_chain)}); the layers must form one chain"
            )
    return problems


def _path(chain: list[str]) -> str:
    """The walked chain for a message; a long one is shortened to its ends."""
    if len(chain) <= 8:
        return " -> ".join(chain)
    return f"{' -> '.join(chain[:4])} -> ... ({len(chain) - 8} more) -> {' -> '.join(chain[-4:])}"


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
