"""The pod on one node: the NUMA policy and cpuset it gets there, and the NUMA nodes and CPUs the
topology manager admits it with, merging every hint provider's hints (this plugin's and
DeviceShare's, ``extensions.NUMAHintProvider``)."""

from __future__ import annotations

from apis.extension.numa import (
    NUMAAllocateStrategy,
    node_cpu_bind_policy,
    node_numa_allocate_strategy,
    node_numa_topology_policy,
)
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import RESERVATION_NOMINATED, RESERVATIONS_MATCHED
from scheduler.framework.handle import Handle
from scheduler.framework.status import Status
from scheduler.plugins.node_numa_resource.allocation import PodNUMARequest, allocate
from scheduler.plugins.node_numa_resource.amplification import (
    ERR_INSUFFICIENT_AMPLIFIED_CPU,
    amplified_cpu_fits,
)
from scheduler.plugins.node_numa_resource.args import NodeNUMAResourceArgs
from scheduler.plugins.node_numa_resource.cycle import Cycle, Placed
from scheduler.plugins.node_numa_resource.hints import resource_hints
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from scheduler.plugins.node_numa_resource.node_ratios import NodeRatios
from scheduler.plugins.node_numa_resource.policy import (
    ERR_POLICY_NOT_MATCH,
    NodeCPUBind,
    merge_policy,
    node_cpu_bind,
    node_numa_policy,
)
from scheduler.plugins.node_numa_resource.store import NUMAStore
from scheduler.plugins.node_numa_resource.topology_manager import (
    NUMAStatus,
    ProviderHints,
    admit,
    exclusive_ok,
)
from scheduler.plugins.node_numa_resource.topology_options import TopologyOptions

__all__ = ["ERR_INVALID_CPU_TOPOLOGY", "ERR_MISSING_NUMA", "Placer"]

ERR_INVALID_CPU_TOPOLOGY = "node(s) invalid CPU Topology"
ERR_MISSING_NUMA = "node(s) missing NUMA resources"


class Placer:
    def __init__(
        self, args: NodeNUMAResourceArgs, handle: Handle, store: NUMAStore, ratios: NodeRatios
    ) -> None:
        self.args = args
        self.handle = handle
        self.store = store
        self.ratios = ratios

    def place(
        self,
        state: CycleState,
        pod: PodInfo,
        cycle: Cycle,
        node: str,
        labels: dict[str, str],
        withdrawn: frozenset[str] = frozenset(),
        scratch: NodeCPUAllocation | None = None,
    ) -> Placed | Status:
        """The pod on one node (``withdrawn``: pods counted as gone; ``scratch``: the ledger to
        place on instead of the node's, reservations left out), or why it cannot run there."""
        resolved = self.resolve(cycle, node, labels)
        if isinstance(resolved, Status):
            return resolved
        merged, bind = resolved
        if not merged and not bind.bind:
            return Placed(merged, bind, None)
        options = self.options(node, self.handle.snapshot())
        if options is None:
            return Status.unresolvable(ERR_MISSING_NUMA if merged else ERR_INVALID_CPU_TOPOLOGY)
        # An owner's reservations on this node give it their CPUs back (taken first).
        reserved = self.reserved_for(state, node) if scratch is None else frozenset()
        gone = withdrawn | reserved
        if scratch is not None:
            ledger = scratch
        else:
            ledger = self.store.ledger_without(node, gone) if gone else self.store.ledger(node)
        request = self.request(cycle, bind, labels, self.cpus_of(reserved))
        if not merged:
            got = allocate(options, ledger, request, None)
            return Status.unschedulable(got) if isinstance(got, str) else Placed(merged, bind, got)
        return self._admit(state, pod, cycle, node, options, ledger, request, merged, bind)

    def _admit(
        self,
        state: CycleState,
        pod: PodInfo,
        cycle: Cycle,
        node: str,
        options: TopologyOptions,
        ledger: NodeCPUAllocation,
        request: PodNUMARequest,
        merged: str,
        bind: NodeCPUBind,
    ) -> Placed | Status:
        """Under a NUMA policy: the NUMA nodes the topology manager admits the pod with."""
        ids = options.numa_ids
        if not ids:
            return Status.unresolvable(ERR_MISSING_NUMA)
        providers: list[ProviderHints] = [
            resource_hints(options, ledger, request, merged, self.args.numa_scoring_strategy)
        ]
        for provider in self.handle.profile.numa_hint_providers():
            providers.append(provider.numa_hints(state, pod, node, ids))
        statuses: dict[int, NUMAStatus] = {i: ledger.numa_status(i) for i in ids}
        required = cycle.cpu.exclusive == "Required"
        admission = admit(merged, ids, providers, exclusive_status=statuses if required else None)
        if not admission.admitted:
            detail = ", ".join(admission.reasons) or "no set of NUMA nodes holds every resource"
            return Status.unschedulable(f"node(s) cannot satisfy {merged} policy: {detail}")
        got = allocate(options, ledger, request, admission.mask)
        if isinstance(got, str):
            return Status.unschedulable(f"node(s) cannot satisfy {merged} policy: {got}")
        kept = True
        if cycle.cpu.exclusive == "Preferred" and got.numa_resources:
            kept = exclusive_ok(sum(1 << n for n in got.numa_resources), statuses)
        return Placed(merged, bind, got, admission.mask, kept)

    def resolve(self, cycle: Cycle, node: str, labels: dict[str, str]) -> tuple[str, NodeCPUBind] | Status:
        """The NUMA policy the pod gets on ``node`` ("" for None) and its cpuset there, or why the
        node can never run it."""
        options = self.store.options.get(node)
        policy = node_numa_policy(
            node_numa_topology_policy(labels), options.kubelet_policy if options else ""
        )
        merged = merge_policy(cycle.numa_spec.numa_topology_policy, policy)
        if merged is None:
            return Status.unresolvable(ERR_POLICY_NOT_MATCH)
        bind = node_cpu_bind(
            cycle.cpu, node_cpu_bind_policy(labels, options.cpu_manager_policy if options else None)
        )
        if isinstance(bind, str):
            return Status.unresolvable(bind)
        if bind.bind:
            if options is None or not options.cpu_topology.is_valid:
                return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY)
            per_core = options.cpu_topology.cpus_per_core
            if bind.required and bind.policy == "FullPCPUs" and cycle.cpu.num_cpus % per_core:
                return Status.unresolvable(
                    f"the requested CPUs ({cycle.cpu.num_cpus}) are not a multiple of the node's "
                    f"{per_core} CPUs per core (FullPCPUs)"
                )
        return merged, bind

    def amplified_misfit(
        self, cycle: Cycle, snapshot: Snapshot, row: int, node: str, labels: dict[str, str]
    ) -> Status | None:
        """``Insufficient amplified cpu`` when the pod's cpu does not fit the node once its cpuset
        CPUs count amplified (algorithms 11.3 step 4); None when it fits."""
        ratio = self.ratios.cpu(snapshot, node)
        if ratio <= 1 or not cycle.cpu.milli_cpu:
            return None
        resolved = self.resolve(cycle, node, labels)
        binds = not isinstance(resolved, Status) and resolved[1].bind
        column = snapshot.table.column.get("cpu")
        fits = amplified_cpu_fits(
            pod_milli_cpu=cycle.cpu.milli_cpu,
            pod_binds=binds,
            ratio=ratio,
            node_allocatable=int(snapshot.table.allocatable[row, column]) if column is not None else 0,
            node_requested=snapshot.table.requested_exact(row, "cpu"),
            cpuset_cpus=len(self.store.ledger(node).allocated_cpus()),
        )
        return None if fits else Status.unschedulable(ERR_INSUFFICIENT_AMPLIFIED_CPU)

    def options(self, node: str, snapshot: Snapshot) -> TopologyOptions | None:
        """The node's topology options, amplified by its amplification ratios."""
        options = self.store.options.get(node)
        return None if options is None else options.amplified(self.ratios.of(snapshot, node))

    def reserved_for(self, state: CycleState, node: str) -> frozenset[str]:
        """The reservations on ``node`` the pod may allocate from that hold CPUs: the one
        Reservation nominated for it there (Reserve), else every one matched (Filter)."""
        nominated = (state.get(RESERVATION_NOMINATED) or {}).get(node)
        uids = (
            [nominated]
            if nominated is not None
            else [view.uid for view in (state.get(RESERVATIONS_MATCHED) or {}).get(node, ())]
        )
        return frozenset(
            uid for uid in uids if uid in self.store.records and self.store.records[uid].reservation
        )

    def cpus_of(self, uids: frozenset[str]) -> frozenset[int]:
        return frozenset().union(*(self.store.records[uid].cpus for uid in uids)) if uids else frozenset()

    def request(
        self,
        cycle: Cycle,
        bind: NodeCPUBind,
        labels: dict[str, str],
        preferred: frozenset[int] = frozenset(),
    ) -> PodNUMARequest:
        default: NUMAAllocateStrategy = self.args.numa_scoring_strategy.scoring_type
        strategy = node_numa_allocate_strategy(labels, default)
        return PodNUMARequest(
            resources=cycle.resources,
            bind=bind,
            num_cpus=cycle.cpu.num_cpus,
            exclusive_policy=cycle.cpu.exclusive_policy,
            numa_strategy="LeastAllocated" if strategy == "DistributeEvenly" else strategy,
            preferred=preferred,
        )
