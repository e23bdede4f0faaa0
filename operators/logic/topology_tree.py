"""Node labels -> the layered domain tree of a ClusterNetworkTopology, and what makes its chain invalid.

Pure functions over ``apis`` models: no Kopf, no I/O. ``operators.handlers.networktopology`` feeds
them the indexed node labels and writes :func:`build_detail_status`'s result into
``status.detailStatus``.

Building the tree (algorithms 2.2, the same steps as Koordinator's ``networktopology/tree.go``):

1. Order the layers top-down by walking ``parentTopologyLayer`` from ``NodeTopologyLayer``
   upwards (``ClusterNetworkTopologySpec.layer_chain``, the walk koord-scheduler's placement
   uses too); layers that do not form one chain mean there is no tree (:class:`InvalidChain`).
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
Not reproduced: Koordinator's step 1 walks exactly as many steps as the spec has items and never
looks at the topmost item's own ``parentTopologyLayer``, so a dangling top parent, or a cycle whose
length happens to match the item count, still yields a status there. Here the status is built only
from a chain the scheduler would place gangs on, so the status never shows a tree the scheduler
refuses; :func:`validate_chain` (the admission check) rejects the same specs up front.

The tree is emitted without recursion: a chain of hundreds of layers (admission allows any
number) is as safe as three.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from apis.core import Node
from apis.scheduling.networktopology import (
    CHAIN_FIELD,
    CLUSTER_TOPOLOGY_LAYER,
    NODE_TOPOLOGY_LAYER,
    ClusterNetworkTopologySpec,
    InvalidTopologyChain,
    NetworkTopologySpec,
    TopologyInfo,
    TopologyStatus,
    chain_problems,
)

__all__ = ["InvalidChain", "build_detail_status", "node_path", "sort_layers", "validate_chain"]

InvalidChain = InvalidTopologyChain
"""The layers do not form a chain the tree can be built from (logged, and no status is written)."""


def sort_layers(spec: ClusterNetworkTopologySpec) -> list[NetworkTopologySpec]:
    """The spec's layers top-down, NodeTopologyLayer last (step 1). Raises InvalidChain."""
    return spec.layer_chain()


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


def _emit(root: _Domain, out: list[TopologyStatus]) -> None:
    """Append ``root`` and its subtree depth-first, children in name order (step 5), with an
    explicit stack: each entry is appended on the way down, its node count filled on the way up."""
    counts: dict[int, int] = {}
    entries: dict[int, TopologyStatus] = {}
    stack: list[tuple[_Domain, bool]] = [(root, False)]
    while stack:
        domain, done = stack.pop()
        if domain.layer == NODE_TOPOLOGY_LAYER:
            counts[id(domain)] = 1
            continue
        names = sorted(domain.children)
        if done:
            entry = entries[id(domain)]
            entry.node_num = sum(counts.pop(id(domain.children[name])) for name in names)
            counts[id(domain)] = entry.node_num
            continue
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
        entries[id(domain)] = entry
        stack.append((domain, True))
        stack.extend((domain.children[name], False) for name in reversed(names))


def validate_chain(spec: ClusterNetworkTopologySpec) -> list[str]:
    """Every reason to reject the layers at admission: those of ``apis`` ``chain_problems`` (the
    same that stop the tree and placement), plus a labelKey on NodeTopologyLayer, which is named
    after the node and would be silently ignored."""
    problems = chain_problems(spec)
    items = spec.network_topology_spec
    node_at = next((i for i, item in enumerate(items) if item.topology_layer == NODE_TOPOLOGY_LAYER), None)
    if node_at is not None and items[node_at].label_key:
        problems.append(
            f"{CHAIN_FIELD}[{node_at}].labelKey: {NODE_TOPOLOGY_LAYER} is named after the node "
            "and takes no labelKey"
        )
    return problems
