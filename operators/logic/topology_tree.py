"""Node labels -> the layered domain tree of a ClusterNetworkTopology, and what makes its chain invalid.

Pure functions over ``apis`` models: no Kopf, no I/O. ``operators.handlers.networktopology`` feeds
them the indexed node labels and writes :func:`build_detail_status`'s result into
``status.detailStatus``.

Building the tree (algorithms 2.2, the same steps as Koordinator's ``networktopology/tree.go``):

1. Order the layers top-down by walking ``parentTopologyLayer`` from ``NodeTopologyLayer``
   upwards, exactly as many steps as the spec has items; a layer the walk needs and cannot find
   means there is no tree (:class:`InvalidChain`).
2. The root is a virtual domain of layer ``ClusterTopologyLayer`` with an empty name.
3. For each node, in name order, compute its path top-down: a layer's domain name is the value of
   the first of its ``labelKey`` that is non-empty on the node; the ``NodeTopologyLayer`` name is
   the node's own name. When only the layer directly above the node layer is unlabelled, a
   virtual domain named after the node is used, so every leaf sits at the same depth; a node
   missing any other layer is left out.
4. Domains are indexed by ``(layer, name)`` over the whole tree and created on first sight under
   the current parent.
5. ``detailStatus`` lists the domains depth-first from the root, children in name order, each
   with its parent, child layer, child names (left out when the children are nodes) and node
   count; node leaves get no entry of their own.

Upstream quirks, reproduced on purpose because the scheduler (ours and Koordinator's) and users'
tooling read this status and must see what Koordinator writes:

- Step 4 merges equal names under different parents: blocks labelled ``b1`` under spines ``s1``
  and ``s2`` are one domain, attached under whichever spine was seen first, and every node of
  either ``b1`` is counted there. Koordinator sees nodes in lister order; we walk them in name
  order so the result is at least deterministic. Label values should be globally unique per
  layer (NVIDIA topograph's are).
- Step 1 is lenient: the topmost walked item's own ``parentTopologyLayer`` is never looked at,
  and a cycle whose length happens to match the item count still yields a chain. The status is
  built whenever Koordinator would build it; :func:`validate_chain` is the strict check the
  admission webhook applies, so such specs cannot be created through our API server.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from apis.core import Node
from apis.extension.networktopology import CLUSTER_TOPOLOGY_LAYER, NODE_TOPOLOGY_LAYER
from apis.scheduling.networktopology import (
    ClusterNetworkTopologySpec,
    NetworkTopologySpec,
    TopologyInfo,
    TopologyStatus,
)

__all__ = ["InvalidChain", "build_detail_status", "node_path", "sort_layers", "validate_chain"]

_FIELD = "spec.networkTopologySpec"


class InvalidChain(ValueError):
    """The layers do not form a chain the tree can be built from (Koordinator logs and skips it)."""


def sort_layers(spec: ClusterNetworkTopologySpec) -> list[NetworkTopologySpec]:
    """The spec's layers top-down, walked from NodeTopologyLayer upward as Koordinator does (step 1).

    Raises InvalidChain when a layer the walk needs is absent (no NodeTopologyLayer, a dangling
    parent below the top, or an item that is not on the chain so the walk runs out of layers).
    """
    items = spec.network_topology_spec
    by_layer = {item.topology_layer: item for item in items}  # the last duplicate wins, as upstream
    ordered: list[NetworkTopologySpec] = []
    layer: str | None = NODE_TOPOLOGY_LAYER
    for _ in items:
        current = by_layer.get(layer or "")
        if current is None:
            raise InvalidChain(f"topology layer {layer or '(none)'!r} not found in spec")
        ordered.append(current)
        layer = current.parent_topology_layer
    ordered.reverse()
    return ordered


def node_path(layers: Sequence[NetworkTopologySpec], node: Node) -> list[tuple[str, str]] | None:
    """The node's ``(layer, name)`` path below the root (step 3), or None when it is left out."""
    name = node.metadata.name or ""
    labels = node.metadata.labels or {}
    path: list[tuple[str, str]] = []
    for i, layer in enumerate(layers):
        if layer.topology_layer == NODE_TOPOLOGY_LAYER:
            value = name
        else:
            value = next((labels[key] for key in layer.label_key or () if labels.get(key)), "")
        if not value:
            if i != len(layers) - 2:
                return None
            value = name  # virtual domain for a node without its direct parent layer
        path.append((layer.topology_layer, value))
    return path


@dataclass
class _Domain:
    layer: str
    name: str
    parent: _Domain | None = None
    children: dict[str, _Domain] = field(default_factory=dict)


def build_detail_status(spec: ClusterNetworkTopologySpec, nodes: Iterable[Node]) -> list[TopologyStatus]:
    """``status.detailStatus`` for ``spec`` over ``nodes`` (steps 1-5). Raises InvalidChain."""
    layers = sort_layers(spec)
    root = _Domain(CLUSTER_TOPOLOGY_LAYER, "")
    index: dict[tuple[str, str], _Domain] = {(root.layer, root.name): root}
    for node in sorted(nodes, key=lambda n: n.metadata.name or ""):
        path = node_path(layers, node)
        if path is None:
            continue
        parent = root
        for key in path:
            domain = index.get(key)
            if domain is None:
                domain = _Domain(key[0], key[1], parent)
                parent.children[key[1]] = domain
                index[key] = domain
            parent = domain
    out: list[TopologyStatus] = []
    _emit(root, out)
    return out


def _emit(domain: _Domain, out: list[TopologyStatus]) -> int:
    """Append ``domain`` and its subtree depth-first; return its node count (step 5)."""
    if domain.layer == NODE_TOPOLOGY_LAYER:
        return 1
    names = sorted(domain.children)
    child_layer = domain.children[names[0]].layer if names else None
    entry = TopologyStatus(
        topology_info=TopologyInfo(topology_layer=domain.layer, topology_name=domain.name),
        parent_topology_info=(
            TopologyInfo(topology_layer=domain.parent.layer, topology_name=domain.parent.name)
            if domain.parent is not None
            else None
        ),
        child_topology_layer=child_layer,
        child_topology_names=names if names and child_layer != NODE_TOPOLOGY_LAYER else None,
        node_num=0,
    )
    out.append(entry)
    entry.node_num = sum(_emit(domain.children[name], out) for name in names)
    return entry.node_num


def validate_chain(spec: ClusterNetworkTopologySpec) -> list[str]:
    """Every reason the layers do not form one linear chain from NodeTopologyLayer up to the root.

    Stricter than :func:`sort_layers` (which mirrors what Koordinator tolerates): every item must
    lie on the chain, each layer appears once, every parent is a layer of the spec (or empty /
    ClusterTopologyLayer for the top), there is no cycle, and NodeTopologyLayer is present and
    has no labelKey (it is named after the node).
    """
    items = spec.network_topology_spec
    problems: list[str] = []
    layers = {item.topology_layer for item in items}
    first_at: dict[str, int] = {}
    for i, item in enumerate(items):
        layer = item.topology_layer
        if layer in first_at:
            problems.append(
                f"{_FIELD}[{i}].topologyLayer: duplicate layer {layer!r} (also at [{first_at[layer]}])"
            )
            continue
        first_at[layer] = i
        if layer == CLUSTER_TOPOLOGY_LAYER:
            problems.append(
                f"{_FIELD}[{i}].topologyLayer: {CLUSTER_TOPOLOGY_LAYER} is the implicit root and "
                "must not be listed"
            )
        parent = item.parent_topology_layer
        if parent and parent != CLUSTER_TOPOLOGY_LAYER and parent not in layers:
            problems.append(
                f"{_FIELD}[{i}].parentTopologyLayer: {parent!r} is not a layer of the spec "
                f"(dangling parent of {layer!r})"
            )
    node_at = first_at.get(NODE_TOPOLOGY_LAYER)
    if node_at is None:
        problems.append(f"{_FIELD}: {NODE_TOPOLOGY_LAYER} is missing; the chain is walked upward from it")
        return problems
    if items[node_at].label_key:
        problems.append(
            f"{_FIELD}[{node_at}].labelKey: {NODE_TOPOLOGY_LAYER} is named after the node "
            "and takes no labelKey"
        )
    # Walk up from the node layer; whatever the walk does not reach is off the chain.
    on_chain: list[str] = []
    walked: str | None = NODE_TOPOLOGY_LAYER
    while walked and walked != CLUSTER_TOPOLOGY_LAYER and walked in first_at:
        if walked in on_chain:
            cycle = " -> ".join([*on_chain[on_chain.index(walked) :], walked])
            problems.append(f"{_FIELD}: the parentTopologyLayer links form a cycle ({cycle})")
            break
        on_chain.append(walked)
        walked = items[first_at[walked]].parent_topology_layer
    for name, i in first_at.items():
        if name not in on_chain and name != CLUSTER_TOPOLOGY_LAYER:
            problems.append(
                f"{_FIELD}[{i}]: layer {name!r} is not on the chain from {NODE_TOPOLOGY_LAYER} up to "
                f"{CLUSTER_TOPOLOGY_LAYER} ({' -> '.join(on_chain)}); the layers must form one chain"
            )
    return problems
