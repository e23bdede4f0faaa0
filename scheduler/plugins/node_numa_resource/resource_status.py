"""Koordinator's ``scheduling.koordinator.sh/resource-status``: the cpuset and per-NUMA amounts a
pod or reservation holds, written at PreBind and read back by the informers."""

from __future__ import annotations

import json

from apis.extension.numa import get_resource_status
from apis.resources import from_int_units, to_int_units
from scheduler.plugins.node_numa_resource.allocation import Allocation
from scheduler.plugins.node_numa_resource.cpu_topology import CPUSet

__all__ = ["held", "resource_status_annotation"]


def held(annotations: dict[str, str]) -> tuple[frozenset[int], dict[int, dict[str, int]]]:
    """The cpuset and per-NUMA amounts of a ``resource-status``; raises on a malformed one."""
    status = get_resource_status(annotations)
    cpus = CPUSet.parse(status.cpuset or "")
    numa: dict[int, dict[str, int]] = {}
    for entry in status.numa_node_resources or ():
        numa[entry.node] = {name: to_int_units(name, q) for name, q in (entry.resources or {}).items()}
    return cpus, numa


def resource_status_annotation(allocation: Allocation) -> str:
    """Koordinator's ``resource-status`` JSON: the cpuset (omitted when empty) and the per-NUMA
    amounts sorted by NUMA id, as Kubernetes quantities."""
    value: dict[str, object] = {}
    if allocation.cpus:
        value["cpuset"] = CPUSet(allocation.cpus).format()
    if allocation.numa_resources:
        value["numaNodeResources"] = [
            {
                "node": numa,
                "resources": {
                    name: str(from_int_units(name, amount))
                    for name, amount in sorted(resources.items())
                    if amount
                },
            }
            for numa, resources in sorted(allocation.numa_resources.items())
        ]
    return json.dumps(value, separators=(",", ":"))
