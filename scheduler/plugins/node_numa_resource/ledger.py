"""What the pods on one node hold: cpusets, per-NUMA amounts, exclusive policies (``nnr/node_allocation.go``).

One :class:`NodeCPUAllocation` per node. A CPU's reference count is the number of pods (or
reservations) holding it; it is free for a new pod while the count is below ``max_ref_count``
(1 unless a plugin allows sharing). Per NUMA node the ledger sums the resources the pods were
given there, and tells whether the node is idle, held only by single-NUMA pods, or shared with a
pod spanning several NUMA nodes (the ``singleNUMANodeExclusive`` check of algorithms 11.3), keyed
by the real NUMA id (Koordinator indexes a slice by position, which breaks on ids like {0, 2}).

Exclusive policies are answered per pod, not per CPU: a core is held ``PCPULevel`` while any
PCPULevel pod holds one of its CPUs (Koordinator keeps the policy of the last pod that took each
CPU, which forgets the first holder when a shared CPU gains a second one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from scheduler.plugins.node_numa_resource.cpu_topology import CPUSet, CPUTopology

__all__ = [
    "EXCLUSIVE_NONE",
    "EXCLUSIVE_NUMA_NODE_LEVEL",
    "EXCLUSIVE_PCPU_LEVEL",
    "NUMANodeStatus",
    "NodeCPUAllocation",
    "PodCPUAllocation",
]

EXCLUSIVE_NONE = "None"
EXCLUSIVE_PCPU_LEVEL = "PCPULevel"
EXCLUSIVE_NUMA_NODE_LEVEL = "NUMANodeLevel"

NUMANodeStatus = Literal["idle", "single", "shared"]


@dataclass(frozen=True)
class PodCPUAllocation:
    pod_uid: str
    cpus: CPUSet
    numa_resources: Mapping[int, Mapping[str, int]]
    """Resource name -> amount per NUMA id (cpu in millicores, others in their integer unit)."""
    exclusive_policy: str
    cpu_nodes: frozenset[int]
    """The NUMA nodes of ``cpus`` when they were added."""


class NodeCPUAllocation:
    """The allocation ledger of one node; the topology maps CPUs to cores and NUMA nodes."""

    def __init__(self, topology: CPUTopology) -> None:
        self._topology = topology
        self._pods: dict[str, PodCPUAllocation] = {}
        self._ref_counts: dict[int, int] = {}
        self._numa_allocated: dict[int, dict[str, int]] = {}

    @property
    def topology(self) -> CPUTopology:
        return self._topology

    def set_topology(self, topology: CPUTopology) -> None:
        """A new NodeResourceTopology: later adds map CPUs with it; recorded pods keep their NUMA nodes."""
        self._topology = topology

    # --- changes ----------------------------------------------------------------------------------

    def add(
        self,
        pod_uid: str,
        cpus: frozenset[int],
        numa_resources: Mapping[int, Mapping[str, int]],
        exclusive_policy: str,
    ) -> None:
        """Record a pod's allocation; a pod already recorded is released first (Koordinator's Update)."""
        self.release(pod_uid)
        record = PodCPUAllocation(
            pod_uid=pod_uid,
            cpus=CPUSet(cpus),
            numa_resources={n: dict(r) for n, r in numa_resources.items()},
            exclusive_policy=exclusive_policy or EXCLUSIVE_NONE,
            cpu_nodes=self._topology.nodes_of(cpus),
        )
        self._pods[pod_uid] = record
        for cpu in record.cpus:
            self._ref_counts[cpu] = self._ref_counts.get(cpu, 0) + 1
        for node, resources in record.numa_resources.items():
            sums = self._numa_allocated.setdefault(node, {})
            for name, amount in resources.items():
                sums[name] = sums.get(name, 0) + amount

    def release(self, pod_uid: str) -> PodCPUAllocation | None:
        """Forget a pod; returns its record, or None when it held nothing here."""
        record = self._pods.pop(pod_uid, None)
        if record is None:
            return None
        for cpu in record.cpus:
            left = self._ref_counts.get(cpu, 0) - 1
            if left > 0:
                self._ref_counts[cpu] = left
            else:
                self._ref_counts.pop(cpu, None)
        for node, resources in record.numa_resources.items():
            sums = self._numa_allocated.get(node, {})
            for name, amount in resources.items():
                sums[name] = max(0, sums.get(name, 0) - amount)
        return record

    # --- queries ----------------------------------------------------------------------------------

    def pods(self) -> Mapping[str, PodCPUAllocation]:
        return self._pods

    def get(self, pod_uid: str) -> PodCPUAllocation | None:
        return self._pods.get(pod_uid)

    def ref_count(self, cpu: int) -> int:
        return self._ref_counts.get(cpu, 0)

    def ref_counts(self) -> Mapping[int, int]:
        return self._ref_counts

    def allocated_cpus(self) -> CPUSet:
        """Every CPU some pod holds."""
        return CPUSet(self._ref_counts)

    def available_cpus(
        self,
        topology: CPUTopology,
        reserved: frozenset[int],
        max_ref_count: int = 1,
        preferred: frozenset[int] = frozenset(),
        preemptible: frozenset[int] = frozenset(),
    ) -> CPUSet:
        """The CPUs a new pod may take: the node's CPUs minus ``reserved`` minus those held
        ``max_ref_count`` times. ``preferred`` (a matched reservation's CPUs) and ``preemptible``
        (CPUs of the victims) each lower the count of their CPUs once, as Koordinator does."""
        counts = dict(self._ref_counts)
        for lowered in (preferred, preemptible):
            for cpu in lowered:
                if cpu in counts:
                    counts[cpu] -= 1
        full = {cpu for cpu, count in counts.items() if count >= max_ref_count}
        return CPUSet(topology.all_cpus() - full - reserved)

    def numa_allocated(self, numa_id: int) -> dict[str, int]:
        """The resources pods were given on one NUMA node (name -> amount, milli for cpu)."""
        return {k: v for k, v in self._numa_allocated.get(numa_id, {}).items() if v}

    def numa_cpuset_cpus(self, numa_id: int) -> int:
        """How many CPUs of this NUMA node are held by cpusets (for cpu amplification)."""
        return len(self.allocated_cpus() & self._topology.cpus_in_nodes((numa_id,)))

    def numa_status(self, numa_id: int, *, include_cpu_share: bool = False) -> NUMANodeStatus:
        """``idle``: no pod bound here; ``single``: only pods bound to this NUMA node alone;
        ``shared``: some pod spans it and another NUMA node.

        As in Koordinator only cpusets count; ``include_cpu_share`` also counts the NUMA nodes of
        pods that were given ``numaNodeResources`` without a cpuset (algorithms 11.7 item 5)."""
        single = shared = False
        for record in self._pods.values():
            nodes = record.cpu_nodes
            if not nodes and include_cpu_share:
                nodes = frozenset(n for n, r in record.numa_resources.items() if any(r.values()))
            if numa_id not in nodes:
                continue
            if len(nodes) > 1:
                shared = True
            else:
                single = True
        return "shared" if shared else "single" if single else "idle"

    def pcpu_exclusive_cores(self) -> frozenset[int]:
        """Cores holding a CPU of a ``PCPULevel`` pod."""
        held = (r.cpus for r in self._pods.values() if r.exclusive_policy == EXCLUSIVE_PCPU_LEVEL)
        return self._topology.cores_of(frozenset[int]().union(*held))

    def numa_exclusive_nodes(self) -> frozenset[int]:
        """NUMA nodes holding a CPU of a ``NUMANodeLevel`` pod."""
        return frozenset[int]().union(
            *(r.cpu_nodes for r in self._pods.values() if r.exclusive_policy == EXCLUSIVE_NUMA_NODE_LEVEL)
        )
