"""Coscheduling's Score: Koordinator's network-topology order of the candidate nodes.

For a pod with ``scheduling.koordinator.sh/network-topology-selector`` (Koordinator's
``PodGroupManager.PreScore``/``Score`` in ``core/network_topology_workflow.go``), the candidate
nodes are sorted by their place in the ClusterNetworkTopology ``default``, comparing layer by
layer from the node upwards:

1. more pods with the same selector value already in the domain (on the node, in its lowest
   domain, ... up to the top layer) first, so that pods sharing a selector gather;
2. then fewer candidate nodes in the domain first (fill the tighter domains, keep big ones whole);
3. then the node name.

A node's score is its index in that order (0 for the best), normalized in reverse to
[0, MAX_NODE_SCORE] as Koordinator's ``DefaultNormalizeScore(MaxNodeScore, reverse=true)``. Nodes
outside the tree come last, by name. A pod without a selector, or a cluster without a usable
topology, is not scored (PreScore SKIP).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from apis.extension.networktopology import get_network_topology_selector
from apis.scheduling.networktopology import ClusterNetworkTopology
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.interfaces import MAX_NODE_SCORE
from scheduler.plugins.coscheduling.placement import TopologyError, layer_chain, node_path

__all__ = ["normalize_reversed", "selector_counts", "topology_order"]


def topology_order(
    candidates: Sequence[str],
    labels: Mapping[str, Mapping[str, str]],
    topology: ClusterNetworkTopology,
    existing: Mapping[str, int],
) -> dict[str, int] | None:
    """Candidate node -> its index in the order above; None: the topology is no chain of layers.

    ``labels``: every node's labels (the existing pods of nodes that are not candidates count in
    their domains too); ``existing``: node -> pods already there with the selector."""
    try:
        chain = layer_chain(topology)
    except TopologyError:
        return None
    paths = {name: node_path(dict(node_labels), name, chain) for name, node_labels in labels.items()}
    # Domains are named by their whole path, so equal values under different parents stay apart.
    pods_in: Counter[tuple[str, ...]] = Counter()
    for name, count in existing.items():
        for domain in _domains(name, paths.get(name)):
            pods_in[domain] += count
    slots_in: Counter[tuple[str, ...]] = Counter()
    for name in candidates:
        for domain in _domains(name, paths.get(name)):
            slots_in[domain] += 1

    def key(name: str) -> tuple[int, tuple[int, ...], tuple[int, ...], str]:
        domains = list(_domains(name, paths.get(name)))
        if not domains:
            return (1, (), (), name)
        return (0, tuple(-pods_in[d] for d in domains), tuple(slots_in[d] for d in domains), name)

    return {name: i for i, name in enumerate(sorted(candidates, key=key))}


def _domains(node: str, path: tuple[str, ...] | None) -> Iterable[tuple[str, ...]]:
    """The node itself, then each domain above it up to the top layer (empty: outside the tree)."""
    if path is None:
        return ()
    full = (*path, node)
    return [full[: len(full) - i] for i in range(len(full))]


def normalize_reversed(scores: IntArray) -> IntArray:
    """Koordinator's ``DefaultNormalizeScore(MaxNodeScore, reverse=true)``: the lowest raw score
    gets MAX_NODE_SCORE; all equal to 0: every node gets MAX_NODE_SCORE."""
    top = int(scores.max()) if scores.size else 0
    if top <= 0:
        return np.full(scores.size, MAX_NODE_SCORE, dtype=np.int64)
    return np.asarray(MAX_NODE_SCORE - MAX_NODE_SCORE * scores // top, dtype=np.int64)


def selector_counts(selector: str, pods: Iterable[tuple[PodInfo, str]]) -> dict[str, int]:
    """Node -> the assigned pods (pod, node) there with network-topology-selector ``selector``."""
    out: Counter[str] = Counter()
    for pod, node in pods:
        if get_network_topology_selector(pod.annotations) == selector:
            out[node] += 1
    return dict(out)
