"""One trial allocation of a pod on a node, for a NUMA mask or none (algorithms 11.4 ``Allocate``).

1. With a mask: split the pod's zone resources (cpu, memory, batch resources, ...) over the mask's
   NUMA nodes from what each has free (``numa_split``); a resource that does not fit is the reason
   ``Insufficient NUMA <res>``. A required bind policy counts only the CPUs it could give.
2. A cpuset pod: its CPUs, per NUMA node of the split (or over the whole node without a mask),
   from the CPUs no pod holds and no reservation keeps (``cpu_accumulator``), checked against a
   required policy.

Filter, Score and Reserve all call this, so a node Filter admits is a node Reserve can allocate on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.plugins.node_numa_resource.amplification import amplify
from scheduler.plugins.node_numa_resource.cpu_accumulator import FULL_PCPUS, allocate_cpuset
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from scheduler.plugins.node_numa_resource.numa_split import split_over_numa_detailed, trim_for_required_policy
from scheduler.plugins.node_numa_resource.policy import NodeCPUBind
from scheduler.plugins.node_numa_resource.topology_manager import numa_ids_of
from scheduler.plugins.node_numa_resource.topology_options import TopologyOptions

__all__ = ["Allocation", "PodNUMARequest", "allocate", "numa_free", "numa_used", "zone_request"]


@dataclass(frozen=True, slots=True)
class PodNUMARequest:
    resources: Mapping[str, int]
    """The pod's requests in the node table's units (milli for cpu)."""
    bind: NodeCPUBind
    num_cpus: int
    exclusive_policy: str = "None"
    numa_strategy: str = "LeastAllocated"
    """The cpuset NUMA allocate strategy (node label, else from ``numaScoringStrategy``)."""
    preferred: frozenset[int] = frozenset()
    """CPUs taken first (those of the reservation the pod allocates from)."""


@dataclass(frozen=True, slots=True)
class Allocation:
    cpus: frozenset[int] = frozenset()
    numa_resources: dict[int, dict[str, int]] = field(default_factory=dict)
    """NUMA id -> resource -> amount (empty: no NUMA placement)."""


def numa_used(options: TopologyOptions, ledger: NodeCPUAllocation, numa: int) -> dict[str, int]:
    """What pods were given on one NUMA node; on an amplified node a cpuset CPU counts amplified
    (it cannot be shared), other cpu as requested."""
    used = ledger.numa_allocated(numa)
    if options.cpu_ratio > 1:
        held = 1000 * ledger.numa_cpuset_cpus(numa)
        if held:
            used["cpu"] = max(0, used.get("cpu", 0) - held) + amplify(held, options.cpu_ratio)
    return used


def numa_free(
    options: TopologyOptions, ledger: NodeCPUAllocation, bind: NodeCPUBind
) -> dict[int, dict[str, int]]:
    """Per NUMA node, what is free (allocatable less allocated); a required bind policy caps cpu
    at the CPUs it could give there (11.3 step 2)."""
    free: dict[int, dict[str, int]] = {}
    for numa, allocatable in options.numa_allocatable.items():
        used = numa_used(options, ledger, numa)
        free[numa] = {name: max(0, amount - used.get(name, 0)) for name, amount in allocatable.items()}
    if bind.bind and bind.required:
        topology = options.cpu_topology
        available = ledger.available_cpus(topology, options.reserved_cpus)
        return trim_for_required_policy(topology, free, available, bind.policy)
    return free


def zone_request(options: TopologyOptions, resources: Mapping[str, int]) -> dict[str, int]:
    """The pod's requests of the resources some NUMA zone reports."""
    names = {name for allocatable in options.numa_allocatable.values() for name in allocatable}
    return {name: amount for name, amount in resources.items() if amount > 0 and name in names}


def allocate(
    options: TopologyOptions,
    ledger: NodeCPUAllocation,
    request: PodNUMARequest,
    mask: int | None,
) -> Allocation | str:
    """The pod's allocation on this node within ``mask`` (None: anywhere), or why there is none."""
    bind = request.bind
    topology = options.cpu_topology
    split: dict[int, dict[str, int]] = {}
    if mask is not None:
        free = numa_free(options, ledger, bind)
        full_cores = bind.bind and bind.required and bind.policy == FULL_PCPUS
        got = split_over_numa_detailed(
            free,
            zone_request(options, request.resources),
            [i for i in numa_ids_of(mask) if i in free],
            cpuset_cpus=request.num_cpus if bind.bind else None,
            cpus_per_core=topology.cpus_per_core if full_cores else None,
        )
        if got.allocation is None:
            return ", ".join(got.reasons)
        split = got.allocation
    if not bind.bind:
        return Allocation(frozenset(), split)
    if not topology.is_valid:
        return "node(s) invalid CPU Topology"
    result = allocate_cpuset(
        topology,
        ledger.available_cpus(topology, options.reserved_cpus),
        request.num_cpus,
        numa_split={numa: amounts.get("cpu", 0) // 1000 for numa, amounts in split.items()} or None,
        bind_policy=bind.policy,
        required=bind.required,
        exclusive_policy=request.exclusive_policy,
        numa_strategy=request.numa_strategy,
        ledger=ledger,
        preferred=request.preferred,
    )
    if result.cpus is None:
        return result.reason
    chosen = frozenset(result.cpus)
    if not split:
        # No NUMA placement asked: the cpuset still sits on NUMA nodes, and the ledger's per-NUMA
        # cpu must count it for the pods that come with a NUMA policy.
        for cpu in sorted(chosen):
            numa = topology.details[cpu].node_id
            split.setdefault(numa, {"cpu": 0})["cpu"] += 1000
    return Allocation(chosen, split)
