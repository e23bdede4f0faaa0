"""NodeNUMAResource: NUMA-aware placement and CPU orchestration (algorithms 11).

The CPU allocation core is a pure library: ``cpu_topology`` (the node's CPUs), ``ledger`` (what
the pods on a node hold), ``numa_split`` (a request over a NUMA hint) and ``cpu_accumulator``
(which CPUs a pod gets). Around it: ``handlers/`` (one informer handler per watched kind),
``placement`` (the pod on one node under its NUMA policy), ``node_room`` and ``node_scoring`` (room
for gangs, a node's score), ``resource_status`` (the annotation), ``plugin`` (the extension points).
"""

from scheduler.framework.registry import PluginSpec
from scheduler.plugins.node_numa_resource.args import NodeNUMAResourceArgs
from scheduler.plugins.node_numa_resource.plugin import NAME, RBAC, NodeNUMAResource, new

__all__ = ["NAME", "PLUGIN", "RBAC", "NodeNUMAResource", "NodeNUMAResourceArgs", "new"]

PLUGIN = PluginSpec(NAME, new, NodeNUMAResourceArgs, RBAC)
