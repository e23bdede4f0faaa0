"""ClusterNetworkTopology status: the domain tree rebuilt from indexed node labels.

Kopf keeps every node's labels in an in-memory index (one watch, no listing), and a timer on each
ClusterNetworkTopology rebuilds ``status.detailStatus`` from that index every
``ManagerConfig.resync_seconds`` (Koordinator rebuilds every 10s), writing the status
subresource only when the tree changed. A node added, removed or relabelled therefore shows in
the status within one interval; the tree itself is built by ``operators.logic.topology_tree``.

A timer makes Kopf put its finalizer on the object (to stop the timer on deletion): deleting a
ClusterNetworkTopology waits for a running koord-manager.
"""

from __future__ import annotations

from typing import Any

import kopf

from apis.core import Node
from apis.meta import ObjectMeta
from apis.scheduling.networktopology import ClusterNetworkTopology
from operators.config import ManagerConfig
from operators.logic import topology_tree

__all__ = ["register"]

NodeLabels = kopf.Index[str, dict[str, str]]


def node_topology_labels(name: str, labels: kopf.Labels, **_: Any) -> dict[str, dict[str, str]]:
    """Index: node name -> its labels (the tree reads only labels and names)."""
    return {name: dict(labels)}


def _nodes(index: NodeLabels) -> list[Node]:
    return [
        Node(metadata=ObjectMeta(name=name, labels=labels))
        for name, store in index.items()
        for labels in store
    ]


def sync_detail_status(
    body: kopf.Body,
    patch: kopf.Patch,
    memo: Any,
    logger: kopf.Logger,
    node_topology_labels: NodeLabels,
    **_: Any,
) -> None:
    """Rebuild the tree; patch ``status.detailStatus`` only when it differs from what is stored."""
    topology = ClusterNetworkTopology.model_validate(dict(body))  # nested values are raw dicts
    if topology.spec is None:
        return
    try:
        detail = topology_tree.build_detail_status(topology.spec, _nodes(node_topology_labels))
    except topology_tree.InvalidChain as exc:
        if memo.get("invalid_chain") != str(exc):  # say it once, not every interval
            memo["invalid_chain"] = str(exc)
            logger.warning(f"no topology tree: {exc}")
        return
    memo.pop("invalid_chain", None)
    stored = topology.status.detail_status if topology.status else None
    if stored != detail:
        patch.status["detailStatus"] = [entry.to_wire() for entry in detail]


def register(registry: kopf.OperatorRegistry, config: ManagerConfig) -> None:
    """Index node labels; rebuild each ClusterNetworkTopology's status on a timer."""
    info = ClusterNetworkTopology.crd
    sync: Any = sync_detail_status  # Kopf's TimerFn protocol does not list index kwargs
    kopf.index("", "v1", "nodes", id="node_topology_labels", registry=registry)(node_topology_labels)
    kopf.timer(
        info.group,
        info.version,
        info.plural,
        id="networktopology_detail_status",
        interval=config.resync_seconds,
        registry=registry,
    )(sync)
