"""Score's rating of one node by the NUMA nodes and CPUs Filter placed the pod on
(``scoringStrategy``): with a NUMA policy, the resources of those NUMA nodes; without one, a
cpuset pod by the node's CPUs held by cpusets."""

from __future__ import annotations

from scheduler.plugins.node_numa_resource.allocation import numa_used
from scheduler.plugins.node_numa_resource.amplification import amplify
from scheduler.plugins.node_numa_resource.args import NUMAScoringStrategy
from scheduler.plugins.node_numa_resource.cycle import Placed
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from scheduler.plugins.node_numa_resource.scoring import resource_score
from scheduler.plugins.node_numa_resource.topology_options import TopologyOptions

__all__ = ["placed_score"]


def placed_score(
    strategy: NUMAScoringStrategy,
    placed: Placed,
    options: TopologyOptions,
    ledger: NodeCPUAllocation,
    resources: dict[str, int],
    cpu_allocatable: int,
    cpu_ratio: float,
) -> int:
    """``placed.allocation`` must be set; ``cpu_allocatable``, ``cpu_ratio``: the node's (used
    without a NUMA policy only)."""
    allocation = placed.allocation
    assert allocation is not None
    weights = strategy.weights()
    if not placed.policy:
        # A cpuset CPU cannot be shared: it counts amplified against the amplified allocatable.
        held = amplify(1000 * len(allocation.cpus | ledger.allocated_cpus()), cpu_ratio)
        return resource_score(
            strategy.scoring_type, {"cpu": weights.get("cpu", 1)}, {"cpu": cpu_allocatable}, {"cpu": held}, {}
        )
    numa = sorted(allocation.numa_resources)
    allocatable: dict[str, int] = {}
    requested: dict[str, int] = dict(resources)
    for n in numa:
        for name, amount in options.numa_allocatable.get(n, {}).items():
            allocatable[name] = allocatable.get(name, 0) + amount
        for name, amount in numa_used(options, ledger, n).items():
            requested[name] = requested.get(name, 0) + amount
    if placed.bind.bind:
        on_numa = options.cpu_topology.cpus_in_nodes(numa) & ledger.allocated_cpus()
        requested["cpu"] = amplify(1000 * len(allocation.cpus | on_numa), options.cpu_ratio)
    score = resource_score(strategy.scoring_type, weights, allocatable, requested, {})
    # singleNUMANodeExclusive: Preferred ranks nodes where the pod keeps it first.
    return score if placed.kept else score // 2
