"""The topology domains a gang may be gathered into: the instances of its MustGather layer (the
deepest one when it names several) from the ClusterNetworkTopology and the node labels, or single
nodes when it gathers nowhere."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from apis.core import Node
from apis.errors import InvalidSpec
from apis.extension.networktopology import GATHER_STRATEGY_MUST, NetworkTopologySpec
from apis.scheduling.networktopology import NODE_TOPOLOGY_LAYER, ClusterNetworkTopology

__all__ = ["Domain", "domains", "gather_layer"]


@dataclass(frozen=True, slots=True)
class Domain:
    layer: str
    name: str
    nodes: tuple[str, ...]
    """Sorted."""


def gather_layer(spec: NetworkTopologySpec | None, topology: ClusterNetworkTopology | None) -> str | None:
    """The deepest MustGather layer of the gang's spec that the topology's chain knows; the node
    layer when the gang gathers nowhere; None when it must gather on a layer the topology lacks
    (nothing can be planned for it)."""
    must = (
        [r.layer for r in (spec.gather_strategy or []) if r.strategy == GATHER_STRATEGY_MUST] if spec else []
    )
    if not must:
        return NODE_TOPOLOGY_LAYER
    if topology is None or topology.spec is None:
        return None
    try:
        chain = [item.topology_layer for item in topology.spec.layer_chain()]
    except InvalidSpec:
        return None
    known = [layer for layer in must if layer in chain]
    if len(known) < len(must):
        return None
    return max(known, key=chain.index)


def domains(nodes: Sequence[Node], topology: ClusterNetworkTopology | None, layer: str) -> list[Domain]:
    """The instances of ``layer`` with their nodes, by name. A node without the layer's label is in
    none, except under the layer right above the nodes, where it is a domain of its own (as the
    scheduler's topology tree has it)."""
    names = sorted(n.metadata.name or "" for n in nodes)
    if layer == NODE_TOPOLOGY_LAYER:
        return [Domain(layer, name, (name,)) for name in names]
    assert topology is not None
    assert topology.spec is not None
    chain = topology.spec.layer_chain()
    index = next(i for i, item in enumerate(chain) if item.topology_layer == layer)
    keys = chain[index].label_key or []
    right_above_nodes = index == len(chain) - 2
    members: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        labels = node.metadata.labels or {}
        name = node.metadata.name or ""
        value = next((labels[k] for k in keys if labels.get(k)), None)
        if value is None and right_above_nodes:
            value = name
        if value is not None:
            members[value].append(name)
    return [Domain(layer, value, tuple(sorted(members[value]))) for value in sorted(members)]
