"""ClusterNetworkTopology status: the domain tree rebuilt from indexed node labels.

Kopf keeps every node's labels in an in-memory index (one watch, no listing), and a timer on each
ClusterNetworkTopology rebuilds ``status.detailStatus`` from that index every
``ManagerConfig.resync_seconds`` (Koordinator rebuilds every 10s), writing the status
subresource only when the tree changed. A node added, removed or relabelled therefore shows in
the status within one interval; the tree itself is built by ``operators.logic.topology_tree``.

The timer puts no finalizer on the object (``operators.handlers.timers``): deleting a
ClusterNetworkTopology does not wait for koord-manager. A spec whose layers do not chain is a
permanent error, reported once as a Warning event on the object.
"""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from apis.core import Node
from apis.meta import ObjectMeta
from apis.scheduling.networktopology import ClusterNetworkTopology
from operators.config import ManagerConfig
from operators.handlers import errors, timers
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


async def sync_detail_status(
    body: kopf.Body,
    patch: kopf.Patch,
    memo: Any,
    node_topology_labels: NodeLabels,
    **_: Any,
) -> None:
    """Rebuild the tree; patch ``status.detailStatus`` only when it differs from what is stored.

    A topology that does not parse or whose layers do not chain is a permanent error (once per
    distinct problem): nothing is built until the user fixes the spec.
    """
    try:
        topology = ClusterNetworkTopology.model_validate(dict(body))  # nested values are raw dicts
    except ValidationError as exc:
        errors.raise_once(memo, "spec", errors.invalid_object("ClusterNetworkTopology", exc))
        return
    if topology.spec is None:
        return
    try:
        detail = topology_tree.build_detail_status(topology.spec, _nodes(node_topology_labels))
    except topology_tree.InvalidChain as exc:
        problem = kopf.PermanentError(f"no topology tree: {exc}; fix spec.networkTopologySpec")
        errors.raise_once(memo, "spec", problem)
        return
    errors.raise_once(memo, "spec", None)
    stored = topology.status.detail_status if topology.status else None
    if stored != detail:
        patch.status["detailStatus"] = [entry.to_wire() for entry in detail]


def register(registry: kopf.OperatorRegistry, config: ManagerConfig) -> None:
    """Index node labels; rebuild each ClusterNetworkTopology's status on a timer."""
    info = ClusterNetworkTopology.crd
    sync: Any = sync_detail_status  # Kopf's TimerFn protocol does not list index kwargs
    kopf.index("", "v1", "nodes", id="node_topology_labels", registry=registry)(node_topology_labels)
    timers.resync_timer(
        info.group,
        info.version,
        info.plural,
        id="networktopology_detail_status",
        interval=config.resync_seconds,
        registry=registry,
    )(sync)
