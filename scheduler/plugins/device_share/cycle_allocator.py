"""The cards and NICs a cycle's pod gets on one node (Koordinator's ``deviceshare/device_allocator.go``):
the node's cards as the pod may see them (hint selector, partitions, reservations left out) handed
to the allocator's pure math (allocator.py, rdma.py, joint.py)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from scheduler.cache.snapshot import Snapshot
from scheduler.plugins.device_share.allocator import (
    GPU,
    Allocation,
    GPUUsage,
    ScoringType,
    Weights,
    allocate,
    fits,
    take,
)
from scheduler.plugins.device_share.cycle import Cycle, memoizable
from scheduler.plugins.device_share.fragmentation_strategy import FragmentationStrategy
from scheduler.plugins.device_share.joint import allocate_rdma_jointly
from scheduler.plugins.device_share.partition import choose_partition
from scheduler.plugins.device_share.rdma import RDMAAllocation, RDMAUsage, Refusal
from scheduler.plugins.device_share.reserved import RESTRICTED, ReservedDevices
from scheduler.plugins.device_share.store import DeviceStore
from scheduler.plugins.device_share.templates import template_key

__all__ = ["ERR_INSUFFICIENT_GPU", "CycleAllocator"]

ERR_INSUFFICIENT_GPU = "Insufficient gpu devices"


class CycleAllocator:
    def __init__(
        self,
        store: DeviceStore,
        reserved: ReservedDevices,
        card_order: ScoringType,
        weights: Weights,
        rdma_weight: int,
        fragmentation: FragmentationStrategy | None,
    ) -> None:
        self.store = store
        self.reserved = reserved
        self.card_order = card_order
        """How cards are ranked (Fragmentation bin-packs those it does not pick itself)."""
        self.weights = weights
        self.rdma_weight = rdma_weight
        self.fragmentation = fragmentation

    def allocate_from(self, node: str, cycle: Cycle, reservation_uid: str) -> list[Allocation] | None:
        """An owner's cards when it allocates from this reservation: the reservation's remaining
        cards first (*preferred*), then, unless it is Restricted, the node's free cards as well;
        Restricted: only within the reservation's remaining per-card amounts."""
        cards = self.reserved.get(reservation_uid)
        if cards is None or cards.node != node:
            return self.allocate(node, cycle)
        if cards.policy == RESTRICTED:
            capacity = {g.minor: GPUUsage(g.core, g.memory, g.ratio) for g in self.store.gpus(node)}
            minors, usage = self.reserved.restricted_usage(
                reservation_uid, {m: c for m, c in capacity.items() if m in cards.minors}
            )
            return self.allocate(node, cycle, usage, only=minors)
        restored = self.reserved.restored_usage(node, reservation_uid)
        preferred = self.allocate(node, cycle, restored, only=cards.minors)
        return preferred if preferred is not None else self.allocate(node, cycle, restored)

    def allocate_all(
        self,
        node: str,
        cycle: Cycle,
        usage: Mapping[int, GPUUsage] | None = None,
        rdma_usage: RDMAUsage | None = None,
        *,
        reserve: bool = False,
        gpus: list[Allocation] | None = None,
        numa: frozenset[int] | None = None,
    ) -> tuple[list[Allocation], list[RDMAAllocation]] | Refusal:
        """The GPUs and NICs the pod gets on ``node``, or why it cannot have them; ``gpus``: the
        cards already chosen (from a reservation), the NICs to go with them; ``numa``: only the
        cards and NICs on these NUMA nodes (the NUMA nodes NodeNUMAResource admitted the pod on)."""
        if gpus is None and cycle.request is not None:
            only = (
                None if numa is None else frozenset(g.minor for g in self.store.gpus(node) if g.numa in numa)
            )
            got = self.allocate(node, cycle, usage, only, choosing=reserve)
            if got is None:
                return Refusal(ERR_INSUFFICIENT_GPU)
            gpus = got
        gpus = gpus or []
        ask = cycle.rdma
        if ask is None or (ask.secondary and not reserve and self.store.secondary_well_planned(node)):
            return gpus, []
        nics_there = self.store.rdmas(node)
        if numa is not None:
            nics_there = [nic for nic in nics_there if nic.numa in numa]
        nics = allocate_rdma_jointly(
            self.store.gpus(node),
            gpus,
            nics_there,
            rdma_usage if rdma_usage is not None else self.rdma_usage(node, cycle),
            ask.quantity,
            ask.hint,
            ask.joint,
            ask.same_pcie,
            self.card_order,
            self.rdma_weight,
        )
        if isinstance(nics, Refusal):
            return nics
        return gpus, nics

    def allocate(
        self,
        node: str,
        cycle: Cycle,
        usage: Mapping[int, GPUUsage] | None = None,
        only: frozenset[int] | None = None,
        *,
        choosing: bool = False,
    ) -> list[Allocation] | None:
        """The cards the pod would get on ``node``; ``choosing``: Reserve's final choice (the
        Fragmentation strategy's card then, any fitting card is as good for Filter)."""
        if node in cycle.no_template:
            return None
        gpus = self.gpus(node, cycle)
        if only is not None:
            gpus = [g for g in gpus if g.minor in only]
        hint, request = cycle.hint, cycle.request
        assert request is not None
        # The node's cards and usage as the store holds them (its card-table row's).
        as_stored = usage is None and only is None and memoizable(cycle)
        if usage is None:
            usage = self.gpu_usage(node, cycle)
        if self.partitioned(node, cycle):
            partition = self._partition(node, cycle, gpus, usage)
            if partition is not None or self._partition_required(node, cycle):
                return partition
        if choosing and self.fragmentation is not None and self.any_card(node, cycle):
            row = self.store.cards().row.get(node) if as_stored else None
            return self.fragmentation.choose(gpus, usage, request, row)
        return allocate(
            gpus,
            usage,
            request,
            self.card_order,
            hint.required_topology_scope if hint else None,
            self.weights,
        )

    def holds(self, node: str, cycle: Cycle) -> bool:
        """Whether ``allocate`` finds the pod's cards on ``node``, without choosing them where the
        answer does not depend on the choice: with no hint and no partition to take, enough
        fitting cards are enough (one card is any fitting card; several, with no scope required,
        fit the node's scope at least)."""
        request = cycle.request
        assert request is not None
        if node in cycle.no_template:
            return False
        if cycle.hint is not None or cycle.partition_spec is not None or self.partitioned(node, cycle):
            return self.allocate(node, cycle) is not None
        usage = self.gpu_usage(node, cycle)
        idle = GPUUsage()
        fitting = sum(1 for g in self.store.gpus(node) if fits(g, usage.get(g.minor, idle), request))
        return fitting >= request.count

    def _partition(
        self, node: str, cycle: Cycle, gpus: list[GPU], usage: Mapping[int, GPUUsage]
    ) -> list[Allocation] | None:
        """A whole-card pod's cards from one partition of the node's table, if one is free."""
        request = cycle.request
        assert request is not None
        free = [g.minor for g in gpus if fits(g, usage.get(g.minor, GPUUsage()), request)]
        table = self.store.partitions(node)
        assert table  # partitioned(): the node has a partition table
        minors = choose_partition(table, free, request.count, cycle.partition_spec)
        if minors is None:
            return None
        by_minor = {g.minor: g for g in gpus}
        return [Allocation(m, take(by_minor[m], request)) for m in minors]

    def _partition_required(self, node: str, cycle: Cycle) -> bool:
        """No partition free: the pod gets no cards there rather than any cards."""
        restricted = cycle.partition_spec is not None and cycle.partition_spec.allocate_policy == "Restricted"
        return self._honors_partitions(node, cycle) or restricted

    def _honors_partitions(self, node: str, cycle: Cycle) -> bool:
        return node in cycle.honor_partitions or self.store.honors_partitions(node)

    def partitioned(self, node: str, cycle: Cycle) -> bool:
        """Whether ``allocate`` takes a partition of the node's table."""
        return (
            cycle.request is not None
            and cycle.request.whole
            and bool(self.store.partitions(node))
            and (self._honors_partitions(node, cycle) or cycle.partition_spec is not None)
        )

    def any_card(self, node: str, cycle: Cycle) -> bool:
        """Whether the scoring strategy picks the card: one card, no scope to keep, no partition."""
        scope = cycle.hint.required_topology_scope if cycle.hint else None
        return (
            cycle.request is not None
            and cycle.request.count == 1
            and scope in (None, "Device", "Node")
            and not self.partitioned(node, cycle)
        )

    def gpus(self, node: str, cycle: Cycle) -> list[GPU]:
        """The node's cards the pod may get (the hint's selector applied)."""
        gpus: list[GPU] = self.store.gpus(node)
        hint = cycle.hint
        if hint is not None and hint.selector is not None:
            selector = hint.selector
            gpus = [g for g in gpus if selector.matches(g.labels)]
        return gpus

    def left_out(self, node: str, cycle: Cycle, gone: AbstractSet[str]) -> set[str]:
        """The holders whose cards and NICs the pod sees as free on ``node``: ``gone`` (the victims
        a preemption is weighing, the reservations a gang plan restores) and, for a
        ``reservation-ignored`` pod, every reservation there."""
        left_out = set(gone)
        if cycle.ignore_reserved:
            left_out |= self.reserved.on_node(node)
        return left_out

    def gpu_usage(
        self, node: str, cycle: Cycle, gone: AbstractSet[str] = frozenset()
    ) -> Mapping[int, GPUUsage]:
        """The card usage the pod sees on ``node`` (Filter, Score, Reserve and the planners alike)."""
        left_out = self.left_out(node, cycle, gone)
        return self.store.usage_without(node, left_out) if left_out else self.store.usage(node)

    def rdma_usage(self, node: str, cycle: Cycle, gone: AbstractSet[str] = frozenset()) -> RDMAUsage:
        """The NIC usage the pod sees on ``node``, as :meth:`gpu_usage`."""
        left_out = self.left_out(node, cycle, gone)
        return self.store.rdma_usage_without(node, left_out) if left_out else self.store.rdma_usage(node)

    def withdrawn(self, snapshot: Snapshot) -> dict[str, set[str]]:
        """Node -> the pods holding cards there that a preemption is weighing (gone in the what-if)."""
        victims: dict[str, set[str]] = {}
        for uid in snapshot.withdrawn():
            held = self.store.held(uid)
            if held is not None:
                victims.setdefault(held[0], set()).add(uid)
        return victims

    def template_key(self, node: str) -> str:
        return template_key(*self.store.vendor_model(node))
