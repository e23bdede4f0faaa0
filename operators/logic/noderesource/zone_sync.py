"""Whether and how the NUMA-level batch resources go into a NodeResourceTopology's zones.

koordlet writes the same object (its zones' cpu, memory and hugepages, its annotations), so only
``numa.ZONE_RESOURCES`` are replaced; a zone's other resources, the zones' order and everything
else stay. Each batch resource is written with ``capacity = allocatable = available``, zone
resources sorted by name (as Koordinator and koordlet keep them); a removed one is deleted from the
zone, never set to 0 (Koordinator zeroes it, algorithms.md 10.2.4).

The damping is the node's (``damping``) with its own timer: write when the NRT has not been written
by this process for ``updateTimeThresholdSeconds``, or when a batch resource of a zone appears,
disappears, or one of its three values moves by more than ``resourceDiffThreshold``.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.quantity import Quantity
from apis.topology import NodeResourceTopology, ResourceInfo, Zone
from operators.logic.noderesource.damping import is_resource_diff
from operators.logic.noderesource.numa import ZONE_RESOURCES

__all__ = ["merged_zones", "zones_need_sync"]

ZoneValues = Mapping[str, Mapping[str, Quantity]]


def merged_zones(nrt: NodeResourceTopology, desired: ZoneValues) -> list[Zone]:
    """The NRT's zones with their batch resources set to ``desired`` (zone name -> values)."""
    zones = []
    for zone in nrt.zones:
        resources = {r.name: r for r in zone.resources or () if r.name not in ZONE_RESOURCES}
        for name, value in (desired.get(zone.name) or {}).items():
            resources[name] = ResourceInfo(name=name, capacity=value, allocatable=value, available=value)
        zones.append(zone.model_copy(update={"resources": [resources[k] for k in sorted(resources)] or None}))
    return zones


def zones_need_sync(
    nrt: NodeResourceTopology,
    desired: ZoneValues,
    *,
    last_write: float | None,
    now: float,
    update_time_threshold_seconds: float,
    resource_diff_threshold: float,
) -> bool:
    merged = merged_zones(nrt, desired)
    if [z.to_wire() for z in merged] == [z.to_wire() for z in nrt.zones]:
        return False
    if last_write is None or now - last_write > update_time_threshold_seconds:
        return True
    for zone in nrt.zones:
        values = desired.get(zone.name) or {}
        for name in ZONE_RESOURCES:
            old, new = zone.resource(name), values.get(name)
            if (old is None) != (new is None):
                return True
            if (
                old is not None
                and new is not None
                and any(
                    is_resource_diff(q, new, resource_diff_threshold)
                    for q in (old.capacity, old.allocatable, old.available)
                )
            ):
                return True
    return False
