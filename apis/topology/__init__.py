"""Custom resources of ``topology.node.k8s.io`` (the upstream NodeResourceTopology)."""

from apis.topology.noderesourcetopology import (
    LABEL_MANAGED_BY,
    MANAGED_BY_KOORDINATOR,
    ZONE_TYPE_NODE,
    AttributeInfo,
    CostInfo,
    NodeResourceTopology,
    ResourceInfo,
    Zone,
    numa_zone_name,
    parse_numa_zone_name,
)

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
