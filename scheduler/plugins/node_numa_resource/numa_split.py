"""A pod's requests split over the NUMA nodes of a hint (algorithms 11.4 step 1).

Koordinator's tryBestToDistributeEvenly water-fills each resource over the hint's NUMA nodes in
ascending order of their free amount: with ``k`` nodes, the i-th gets ``min(free, remaining // (k - i))``,
so the small ones are filled first and the large ones take the rest. Anything left over is
``Insufficient NUMA <resource>``.

Ordered by the real NUMA id here: Koordinator's comparator reads the free amounts by slice
position, so for the hint {2, 3} it compares NUMA 0 with NUMA 1 and can fill the large node first
and fail a request that fits (free {2: 4, 3: 10}, request 12: 6 + 4 instead of 4 + 8; 11.7 item 1).

Units: cpu in millicores, other resources in their integer unit. A cpuset pod's cpu is split in
whole CPUs (a NUMA node's free millicores count as whole CPUs only), and with a required FullPCPUs
policy in whole cores; its share per NUMA node comes back in millicores, a multiple of 1000.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.plugins.node_numa_resource.cpu_accumulator import filter_for_required_policy
from scheduler.plugins.node_numa_resource.cpu_topology import CPUTopology

__all__ = [
    "CPU",
    "NUMASplit",
    "insufficient_reason",
    "split_over_numa",
    "split_over_numa_detailed",
    "trim_for_required_policy",
]

CPU = "cpu"


def insufficient_reason(resource: str) -> str:
    """Koordinator's reason for a resource the NUMA nodes of the hint cannot hold."""
    return f"Insufficient NUMA {resource}"


@dataclass(frozen=True)
class NUMASplit:
    allocation: dict[int, dict[str, int]] | None
    """NUMA id -> resource -> amount (ascending ids, zero shares left out), or None on failure."""
    insufficient: tuple[str, ...] = field(default=())
    """The resources that did not fit, sorted; render each with :func:`insufficient_reason`."""

    @property
    def reasons(self) -> list[str]:
        return [insufficient_reason(r) for r in self.insufficient]


def _share(remaining: int, nodes_left: int, cpus_per_core: int | None) -> int:
    if cpus_per_core:
        return remaining // cpus_per_core // nodes_left * cpus_per_core
    return remaining // nodes_left


def split_over_numa_detailed(
    free: Mapping[int, Mapping[str, int]],
    request: Mapping[str, int],
    mask: Sequence[int],
    *,
    cpuset_cpus: int | None,
    cpus_per_core: int | None,
) -> NUMASplit:
    """Split ``request`` over the NUMA ids in ``mask`` given each one's ``free`` amounts.

    ``cpuset_cpus``: the whole CPUs of a cpuset pod (replaces ``request["cpu"]``), None otherwise.
    ``cpus_per_core``: set only under a required FullPCPUs policy, to split cpu in whole cores.
    Only resources that some NUMA node in ``free`` reports are split; the others are left to the
    node-level fit (as Koordinator does)."""
    on_numa = {name for amounts in free.values() for name in amounts}
    nodes = sorted(set(mask))
    allocation: dict[int, dict[str, int]] = {}
    insufficient: list[str] = []
    for name in sorted(request):
        if name not in on_numa:
            continue
        whole_cpus = name == CPU and cpuset_cpus is not None
        remaining = cpuset_cpus if whole_cpus and cpuset_cpus is not None else request[name]
        unit = 1000 if whole_cpus else 1

        def available(node: int, name: str = name, unit: int = unit) -> int:
            return max(0, free.get(node, {}).get(name, 0)) // unit

        for i, node in enumerate(sorted(nodes, key=lambda n: (available(n), n))):
            share = _share(remaining, len(nodes) - i, cpus_per_core if whole_cpus else None)
            taken = min(available(node), share)
            if taken > 0:
                allocation.setdefault(node, {})[name] = taken * unit
                remaining -= taken
        if remaining > 0:
            insufficient.append(name)
    if insufficient:
        return NUMASplit(None, tuple(insufficient))
    return NUMASplit({node: allocation[node] for node in sorted(allocation)})


def split_over_numa(
    free: Mapping[int, Mapping[str, int]],
    request: Mapping[str, int],
    mask: Sequence[int],
    *,
    cpuset_cpus: int | None,
    cpus_per_core: int | None,
) -> dict[int, dict[str, int]] | None:
    """The split, or None when some resource does not fit (see :func:`split_over_numa_detailed`)."""
    return split_over_numa_detailed(
        free, request, mask, cpuset_cpus=cpuset_cpus, cpus_per_core=cpus_per_core
    ).allocation


def trim_for_required_policy(
    topology: CPUTopology,
    free: Mapping[int, Mapping[str, int]],
    available: frozenset[int],
    bind_policy: str,
) -> dict[int, dict[str, int]]:
    """A copy of ``free`` whose cpu per NUMA node is capped at 1000 x the CPUs there that a required
    ``bind_policy`` may use (algorithms 11.3 step 2): under FullPCPUs the CPUs of its fully free
    cores, under SpreadByPCPUs one per core with a free CPU. A zero cpu stays as it is."""
    trimmed = {node: dict(amounts) for node, amounts in free.items()}
    for node, amounts in trimmed.items():
        cpu = amounts.get(CPU, 0)
        if not cpu:
            continue
        usable = filter_for_required_policy(
            topology, available & topology.cpus_in_nodes((node,)), bind_policy
        )
        amounts[CPU] = min(cpu, 1000 * len(usable))
    return trimmed
