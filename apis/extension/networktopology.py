"""Network-topology-aware gang placement (api-reference 2.2).

The gang annotation ``gang.scheduling.koordinator.sh/network-topology-spec`` holds
``{"gatherStrategy": [{"layer": "<TopologyLayer>", "strategy": "MustGather"|"PreferGather",
"podCountMultiple": <int>}]}``. ``layer`` names a ``topologyLayer`` of the ClusterNetworkTopology
called ``default``; node label keys come from that object, not from fixed Koordinator keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from apis.base import KoordModel
from apis.extension._annotation import lookup, parse_json
from apis.scheduling.networktopology import CLUSTER_TOPOLOGY_LAYER, NODE_TOPOLOGY_LAYER
from apis.types import Int64

__all__ = [
    "ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC",
    "ANNOTATION_POD_NETWORK_TOPOLOGY_SELECTOR",
    "CLUSTER_TOPOLOGY_LAYER",
    "GATHER_STRATEGY_MUST",
    "GATHER_STRATEGY_PREFER",
    "LABEL_NVIDIA_TOPOLOGY_ACCELERATOR",
    "LABEL_NVIDIA_TOPOLOGY_BLOCK",
    "LABEL_NVIDIA_TOPOLOGY_DATACENTER",
    "LABEL_NVIDIA_TOPOLOGY_SPINE",
    "NODE_TOPOLOGY_LAYER",
    "GatherStrategy",
    "NetworkTopologyGatherRule",
    "NetworkTopologySpec",
    "get_network_topology_selector",
    "get_network_topology_spec",
    "parse_network_topology_spec",
]

ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
ANNOTATION_POD_NETWORK_TOPOLOGY_SELECTOR = "scheduling.koordinator.sh/network-topology-selector"
"""Opaque string: pods sharing the value count as existing members per node."""


# Conventional node labels written by NVIDIA topograph; referenced from ClusterNetworkTopology labelKey.
LABEL_NVIDIA_TOPOLOGY_ACCELERATOR = "network.topology.nvidia.com/accelerator"
LABEL_NVIDIA_TOPOLOGY_BLOCK = "network.topology.nvidia.com/block"
LABEL_NVIDIA_TOPOLOGY_SPINE = "network.topology.nvidia.com/spine"
LABEL_NVIDIA_TOPOLOGY_DATACENTER = "network.topology.nvidia.com/datacenter"

GatherStrategy = Literal["MustGather", "PreferGather"]
GATHER_STRATEGY_MUST: GatherStrategy = "MustGather"
GATHER_STRATEGY_PREFER: GatherStrategy = "PreferGather"


class NetworkTopologyGatherRule(KoordModel):
    layer: str = Field(min_length=1)
    """A topologyLayer name of the ClusterNetworkTopology."""
    strategy: GatherStrategy
    """MustGather: stay within one instance of the layer (hard). PreferGather: soft preference."""
    pod_count_multiple: Int64 | None = Field(default=None, ge=1)
    """Pods per layer instance must be a multiple of this number (omitted on the wire when unset)."""


class NetworkTopologySpec(KoordModel):
    gather_strategy: list[NetworkTopologyGatherRule] | None = None


def parse_network_topology_spec(raw: str) -> NetworkTopologySpec:
    """Parse the JSON value; an unknown strategy, an empty layer or podCountMultiple < 1 is rejected."""
    return parse_json(ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC, raw, NetworkTopologySpec)


def get_network_topology_spec(annotations: Mapping[str, str] | None) -> NetworkTopologySpec | None:
    """The spec of a Pod or PodGroup, or None when the annotation is absent or empty (as Koordinator)."""
    raw = lookup(annotations, ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC)
    if not raw:
        return None
    return parse_network_topology_spec(raw)


def get_network_topology_selector(annotations: Mapping[str, str] | None) -> str:
    return lookup(annotations, ANNOTATION_POD_NETWORK_TOPOLOGY_SELECTOR) or ""
