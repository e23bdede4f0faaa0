"""Which CPUs a cpuset pod gets (``nnr/cpu_accumulator.go`` and ``allocateCPUSet``, algorithms 11.4).

:func:`take_cpus` is Koordinator's allocateCPUSet without a NUMA split: filter the candidates by a
required bind policy, take from the preferred CPUs (a matched reservation's) first, then from the
rest, and verify the required policy. Each take runs the accumulator's stages in order, the first
that satisfies the request winning:

A. FullPCPUs, or one CPU per core: the fully free cores of one NUMA node (exclusive filter on,
   then off), else of one socket, else spill: whole sockets that fit, then one core at a time
   from the sockets set aside, smallest first.
B. Not FullPCPUs: the free CPUs of one NUMA node, then of one socket, in spread order (the first
   CPU of every core, then the second, ...).
C. Fallback: one CPU at a time from a spread-ordered list of all free CPUs, cores ranked by
   CPUs already chosen on their socket, socket and NUMA free counts, half-used cores first.

``numa_strategy`` orders NUMA nodes and sockets: ``MostAllocated`` tries the one with the fewest
free CPUs first (packing), anything else the one with the most. Exclusive policies are a
preference, as in Koordinator: ``PCPULevel`` avoids cores and ``NUMANodeLevel`` NUMA nodes that a
pod with the same policy holds, and is dropped when nothing else fits.

:func:`allocate_cpuset` adds the NUMA split: the CPUs of each NUMA node of the split are taken
there, and the counts must add up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.plugins.node_numa_resource.cpu_topology import CPUSet, CPUTopology
from scheduler.plugins.node_numa_resource.ledger import (
    EXCLUSIVE_NUMA_NODE_LEVEL,
    EXCLUSIVE_PCPU_LEVEL,
    NodeCPUAllocation,
)

__all__ = [
    "FULL_PCPUS",
    "REASON_FAILED",
    "REASON_NOT_ENOUGH",
    "SPREAD_BY_PCPUS",
    "CPUSetResult",
    "allocate_cpuset",
    "filter_for_required_policy",
    "reason_for_required_policy",
    "take_cpus",
    "verify_required_policy",
]

FULL_PCPUS = "FullPCPUs"
SPREAD_BY_PCPUS = "SpreadByPCPUs"
MOST_ALLOCATED = "MostAllocated"

REASON_NOT_ENOUGH = "not enough cpus available to satisfy request"
REASON_FAILED = "failed to allocate cpus"


def reason_for_required_policy(bind_policy: str) -> str:
    return f"insufficient CPUs to satisfy required cpu bind policy {bind_policy}"


@dataclass(frozen=True)
class CPUSetResult:
    cpus: tuple[int, ...] | None
    """Ascending CPU ids, or None when the request cannot be met."""
    reason: str = ""
    """Koordinator's message when ``cpus`` is None."""


# --- required bind policies (11.3 step 2, 11.4 step 2) -----------------------------------------------


def _cpus_by_core(topology: CPUTopology, cpus: Iterable[int]) -> dict[int, list[int]]:
    by_core: dict[int, list[int]] = {}
    for cpu in sorted(cpus):
        detail = topology.details.get(cpu)
        if detail is not None:
            by_core.setdefault(detail.core_id, []).append(cpu)
    return by_core


def filter_for_required_policy(topology: CPUTopology, available: frozenset[int], bind_policy: str) -> CPUSet:
    """FullPCPUs: the CPUs of cores whose CPUs are all available; SpreadByPCPUs: the lowest
    available CPU of every core that has one; any other policy: ``available`` unchanged."""
    if bind_policy == FULL_PCPUS:
        per_core = topology.cpus_per_core
        return CPUSet(
            c for cpus in _cpus_by_core(topology, available).values() if len(cpus) == per_core for c in cpus
        )
    if bind_policy == SPREAD_BY_PCPUS:
        return CPUSet(cpus[0] for cpus in _cpus_by_core(topology, available).values())
    return CPUSet(available)


def verify_required_policy(topology: CPUTopology, cpus: Iterable[int], bind_policy: str) -> bool:
    """FullPCPUs: whole cores only; SpreadByPCPUs: one CPU per core; other policies: always."""
    chosen = frozenset(cpus)
    cores = len(topology.cores_of(chosen))
    if bind_policy == FULL_PCPUS:
        return cores * topology.cpus_per_core == len(chosen)
    if bind_policy == SPREAD_BY_PCPUS:
        return cores == len(chosen)
    return True


# --- the accumulator -------------------------------------------------------------------------------


class _Accumulator:
    def __init__(
        self,
        topology: CPUTopology,
        available: frozenset[int],
        need: int,
        exclusive_policy: str,
        numa_strategy: str,
        ledger: NodeCPUAllocation | None,
        max_ref_count: int,
    ) -> None:
        self.topology = topology
        self.free = {c: topology.details[c] for c in available if c in topology.details}
        self.need = need
        self.policy = exclusive_policy
        self.most_allocated = numa_strategy == MOST_ALLOCATED
        self.use_ref_counts = max_ref_count > 1
        self.ref_counts: Mapping[int, int] = ledger.ref_counts() if ledger is not None else {}
        self.excl_cores = set(ledger.pcpu_exclusive_cores()) if ledger is not None else set()
        self.excl_nodes = set(ledger.numa_exclusive_nodes()) if ledger is not None else set()
        self.result: list[int] = []

    # the state

    def take(self, cpus: Iterable[int]) -> None:
        for cpu in cpus:
            detail = self.free.pop(cpu)
            self.result.append(cpu)
            self.need -= 1
            if self.policy == EXCLUSIVE_PCPU_LEVEL:
                self.excl_cores.add(detail.core_id)
            elif self.policy == EXCLUSIVE_NUMA_NODE_LEVEL:
                self.excl_nodes.add(detail.node_id)

    def needs(self, n: int) -> bool:
        return self.need >= n

    @property
    def satisfied(self) -> bool:
        return self.need < 1

    def _pcpu_excluded(self, cpu: int) -> bool:
        return self.policy == EXCLUSIVE_PCPU_LEVEL and self.free[cpu].core_id in self.excl_cores

    def _numa_excluded(self, cpu: int) -> bool:
        return self.policy == EXCLUSIVE_NUMA_NODE_LEVEL and self.free[cpu].node_id in self.excl_nodes

    # orderings

    def _by_free(self, count: int) -> int:
        """Sort key for a free count: MostAllocated tries the fewest free first."""
        return count if self.most_allocated else -count

    def _core_ref_count(self, cpus: Iterable[int]) -> int:
        return sum(self.ref_counts.get(c, 0) for c in cpus)

    def _sorted_cpus(self, cpus: Iterable[int]) -> list[int]:
        if self.use_ref_counts:
            return sorted(cpus, key=lambda c: (self.ref_counts.get(c, 0), c))
        return sorted(cpus)

    def _one_per_core(self, cpus: list[int]) -> list[int]:
        seen: set[int] = set()
        kept = []
        for cpu in cpus:
            core = self.topology.details[cpu].core_id
            if core not in seen:
                seen.add(core)
                kept.append(cpu)
        return kept

    def spread(self, cpus: list[int]) -> list[int]:
        """Round-robin over cores: the first CPU of every core in list order, then the second, ..."""
        if len(cpus) <= self.topology.cpus_per_core:
            return cpus
        out: list[int] = []
        pending = cpus
        while pending:
            seen: set[int] = set()
            later = []
            for cpu in pending:
                core = self.topology.details[cpu].core_id
                if core in seen:
                    later.append(cpu)
                else:
                    seen.add(core)
                    out.append(cpu)
            pending = later
        return out

    def _full_cores(self, cpu_filter: bool) -> tuple[dict[int, list[int]], dict[int, int]]:
        """Fully free cores (CPUs ascending) and the free CPUs per socket (before the full-core cut)."""
        by_core: dict[int, list[int]] = {}
        socket_free: dict[int, int] = {}
        for cpu, detail in self.free.items():
            if cpu_filter and self._numa_excluded(cpu):
                continue
            by_core.setdefault(detail.core_id, []).append(cpu)
            socket_free[detail.socket_id] = socket_free.get(detail.socket_id, 0) + 1
        per_core = self.topology.cpus_per_core
        return {k: sorted(v) for k, v in by_core.items() if len(v) == per_core}, socket_free

    def _cores_flat(self, cores: list[int], by_core: Mapping[int, list[int]]) -> list[int]:
        def key(core: int) -> tuple[int, int, int]:
            ref = self._core_ref_count(by_core[core]) if self.use_ref_counts else 0
            return (-len(by_core[core]), ref, core)

        return [cpu for core in sorted(cores, key=key) for cpu in by_core[core]]

    def free_cores_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        by_core, socket_free = self._full_cores(filter_exclusive)
        cores_in_node: dict[int, list[int]] = {}
        for core, cpus in by_core.items():
            cores_in_node.setdefault(self.free[cpus[0]].node_id, []).append(core)
        lists = {node: self._cores_flat(cores, by_core) for node, cores in cores_in_node.items()}

        def key(node: int) -> tuple[int, int, int]:
            socket = self.free[lists[node][0]].socket_id
            return (self._by_free(len(lists[node])), self._by_free(socket_free[socket]), node)

        return [lists[node] for node in sorted(lists, key=key)]

    def free_cores_in_socket(self) -> list[list[int]]:
        by_core, _ = self._full_cores(cpu_filter=False)
        cores_in_socket: dict[int, list[int]] = {}
        for core, cpus in by_core.items():
            cores_in_socket.setdefault(self.free[cpus[0]].socket_id, []).append(core)
        lists = {s: self._cores_flat(cores, by_core) for s, cores in cores_in_socket.items()}
        return [lists[s] for s in sorted(lists, key=lambda s: (self._by_free(len(lists[s])), s))]

    def free_cpus_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        in_node: dict[int, list[int]] = {}
        socket_free: dict[int, int] = {}
        for cpu, detail in self.free.items():
            if filter_exclusive and (self._pcpu_excluded(cpu) or self._numa_excluded(cpu)):
                continue
            in_node.setdefault(detail.node_id, []).append(cpu)
            socket_free[detail.socket_id] = socket_free.get(detail.socket_id, 0) + 1
        node_free = {node: len(cpus) for node, cpus in in_node.items()}
        lists: dict[int, list[int]] = {}
        for node, cpus in in_node.items():
            ordered = self._sorted_cpus(cpus)
            lists[node] = self._one_per_core(ordered) if filter_exclusive else ordered

        def key(node: int) -> tuple[int, int, int]:
            socket = self.free[lists[node][0]].socket_id
            return (self._by_free(node_free[node]), self._by_free(socket_free[socket]), node)

        return [lists[node] for node in sorted(lists, key=key)]

    def free_cpus_in_socket(self, filter_exclusive: bool) -> list[list[int]]:
        in_socket: dict[int, list[int]] = {}
        for cpu, detail in self.free.items():
            if filter_exclusive and self._pcpu_excluded(cpu):
                continue
            in_socket.setdefault(detail.socket_id, []).append(cpu)
        lists: dict[int, list[int]] = {}
        for socket, cpus in in_socket.items():
            ordered = self._sorted_cpus(cpus)
            lists[socket] = self._one_per_core(ordered) if filter_exclusive else ordered
        return [lists[s] for s in sorted(lists, key=lambda s: (self._by_free(len(lists[s])), s))]

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        """All free CPUs, cores ranked by: CPUs already taken on their socket (more first), socket
        free count, NUMA free count (per strategy), core free count ascending, socket id,
        reference count, core id."""
        by_core: dict[int, list[int]] = {}
        node_free: dict[int, int] = {}
        socket_free: dict[int, int] = {}
        for cpu, detail in self.free.items():
            if filter_exclusive and (self._pcpu_excluded(cpu) or self._numa_excluded(cpu)):
                continue
            by_core.setdefault(detail.core_id, []).append(cpu)
            node_free[detail.node_id] = node_free.get(detail.node_id, 0) + 1
            socket_free[detail.socket_id] = socket_free.get(detail.socket_id, 0) + 1
        taken = {s: len(self.topology.cpus_in_sockets((s,)).intersection(self.result)) for s in socket_free}

        def key(core: int) -> tuple[int, ...]:
            first = self.topology.details[by_core[core][0]]
            socket, node = first.socket_id, first.node_id
            ref = self._core_ref_count(by_core[core]) if self.use_ref_counts else 0
            return (
                -taken[socket],
                self._by_free(socket_free[socket]),
                self._by_free(node_free[node]),
                len(by_core[core]),
                socket,
                ref,
                core,
            )

        return [cpu for core in sorted(by_core, key=key) for cpu in self._sorted_cpus(by_core[core])]


def _take(
    topology: CPUTopology,
    available: frozenset[int],
    need: int,
    bind_policy: str,
    exclusive_policy: str,
    numa_strategy: str,
    ledger: NodeCPUAllocation | None,
    max_ref_count: int,
) -> tuple[list[int], str]:
    """Koordinator's takeCPUs: the chosen CPUs, or ``[]`` and the reason."""
    acc = _Accumulator(topology, available, need, exclusive_policy, numa_strategy, ledger, max_ref_count)
    if acc.satisfied:
        return acc.result, ""
    if acc.need > len(acc.free):
        return [], REASON_NOT_ENOUGH
    full_pcpus = bind_policy == FULL_PCPUS
    per_core = topology.cpus_per_core

    if full_pcpus or per_core == 1:
        # A.1 the fully free cores of one NUMA node
        if acc.need <= topology.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cores_in_node(filter_exclusive):
                    if len(cpus) >= acc.need:
                        acc.take(cpus[: acc.need])
                        return acc.result, ""
        # A.2 ... of one socket
        if acc.need <= topology.cpus_per_socket:
            for cpus in acc.free_cores_in_socket():
                if len(cpus) >= acc.need:
                    acc.take(cpus[: acc.need])
                    return acc.result, ""
        # A.3 spill: whole sockets while they fit, then core by core from the smallest set aside
        set_aside: list[list[int]] = []
        for cpus in sorted(acc.free_cores_in_socket(), key=len, reverse=True):
            if not acc.needs(len(cpus)):
                set_aside.append(cpus)
                continue
            acc.take(cpus)
            if acc.satisfied:
                return acc.result, ""
        if acc.needs(per_core):
            for cpus in sorted(set_aside, key=len):
                for i in range(0, len(cpus), per_core):
                    acc.take(cpus[i : i + per_core])
                    if acc.satisfied:
                        return acc.result, ""
                    if not acc.needs(per_core):
                        break

    if not full_pcpus:
        # B.1 one NUMA node, B.2 one socket, spread over cores
        if acc.need <= topology.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_node(filter_exclusive):
                    if len(cpus) >= acc.need:
                        acc.take(acc.spread(cpus)[: acc.need])
                        return acc.result, ""
        if acc.need <= topology.cpus_per_socket:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_socket(filter_exclusive):
                    if len(cpus) >= acc.need:
                        acc.take(acc.spread(cpus)[: acc.need])
                        return acc.result, ""

    # C. anywhere, one CPU at a time
    for filter_exclusive in (True, False):
        for cpu in acc.spread(acc.free_cpus(filter_exclusive)):
            if acc.needs(1):
                acc.take((cpu,))
            if acc.satisfied:
                return acc.result, ""
    return [], REASON_FAILED


def _take_preferred(
    topology: CPUTopology,
    available: frozenset[int],
    preferred: frozenset[int],
    need: int,
    bind_policy: str,
    exclusive_policy: str,
    numa_strategy: str,
    ledger: NodeCPUAllocation | None,
    max_ref_count: int,
) -> tuple[list[int], str]:
    """Koordinator's takePreferredCPUs: from ``preferred`` first, then from the rest."""
    args = (bind_policy, exclusive_policy, numa_strategy, ledger, max_ref_count)
    own = available & preferred
    result: list[int] = []
    if own:
        result, reason = _take(topology, own, min(need, len(own)), *args)
        if reason:
            return [], reason
    if need > len(result):
        rest, reason = _take(topology, available - frozenset(result), need - len(result), *args)
        if reason:
            return [], reason
        result += rest
    return result, ""


def allocate_cpuset(
    topology: CPUTopology,
    available: frozenset[int],
    need: int,
    *,
    numa_split: Mapping[int, int] | None = None,
    bind_policy: str,
    required: bool,
    exclusive_policy: str,
    numa_strategy: str,
    ledger: NodeCPUAllocation | None,
    preferred: frozenset[int] = frozenset(),
    max_ref_count: int = 1,
) -> CPUSetResult:
    """Koordinator's allocateCPUSet. ``numa_split`` maps NUMA id -> whole CPUs to take there (the
    cpu of the NUMA split divided by 1000); the CPUs taken there must add up to ``need``."""
    if required:
        available = filter_for_required_policy(topology, available, bind_policy)
    if len(available) < need:
        return CPUSetResult(None, REASON_NOT_ENOUGH)
    args = (bind_policy, exclusive_policy, numa_strategy, ledger, max_ref_count)
    result: list[int] = []
    remaining = need
    if numa_split:
        for node in sorted(numa_split):
            in_node = available & topology.cpus_in_nodes((node,))
            count = min(len(in_node), numa_split[node])
            cpus, reason = _take_preferred(topology, in_node, preferred, count, *args)
            if reason:
                return CPUSetResult(None, reason)
            result += cpus
        remaining -= len(result)
        if remaining != 0:
            return CPUSetResult(None, REASON_NOT_ENOUGH)
    if remaining > 0:
        cpus, reason = _take_preferred(topology, available - frozenset(result), preferred, remaining, *args)
        if reason:
            return CPUSetResult(None, reason)
        result += cpus
    if required and not verify_required_policy(topology, result, bind_policy):
        return CPUSetResult(None, reason_for_required_policy(bind_policy))
    return CPUSetResult(tuple(sorted(result)))


def take_cpus(
    topology: CPUTopology,
    available: frozenset[int],
    need: int,
    *,
    bind_policy: str,
    required: bool,
    exclusive_policy: str,
    numa_strategy: str,
    ledger: NodeCPUAllocation | None,
    preferred: frozenset[int] = frozenset(),
    max_ref_count: int = 1,
) -> tuple[int, ...] | None:
    """``need`` CPUs out of ``available`` for one pod (ascending), or None; see the module docstring.

    ``available`` comes from :meth:`NodeCPUAllocation.available_cpus`; ``ledger`` supplies the
    exclusive holders and, with ``max_ref_count > 1``, the reference counts that rank shared CPUs."""
    return allocate_cpuset(
        topology,
        available,
        need,
        bind_policy=bind_policy,
        required=required,
        exclusive_policy=exclusive_policy,
        numa_strategy=numa_strategy,
        ledger=ledger,
        preferred=preferred,
        max_ref_count=max_ref_count,
    ).cpus
