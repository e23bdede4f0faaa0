"""DeviceShare: GPUs allocated by card (whole or shared), written to the pod as ``device-allocated``.

PreFilter parses the pod's GPU and RDMA requests (a pod asking for neither skips the plugin) and runs the
allocator on every node that has a Device, so that Filter only masks rows by name; Score rates
nodes with the scoring strategy; Reserve picks the cards and holds them in the store, Unreserve
gives them back, and PreBind writes Koordinator's annotation ``{"gpu": [{"minor": 0, "resources":
{...}}]}``. The store is beside the cache: it also reads bound pods' annotations on the pod watch.
A ``koordinator.sh/rdma`` request gets NICs (and VFs) the same way, jointly with the GPUs under
``device-joint-allocate`` (rdma.py, joint.py).

This module holds the extension points only: the informers' handlers are in ``handlers/``, the
cycle's request in cycle.py, a node's allocation in cycle_allocator.py, Filter's and Score's
per-node answers in filtering.py and scoring.py, NUMA hints in topology_hint.py, PreBind's writes
in prebind.py and annotation.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np

from apis.client.backend import DEVICES, NODES, PODS, RESERVATIONS
from apis.client.rbac import PolicyRule
from apis.extension.device import RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO, RESOURCE_RDMA
from apis.extension.reservation import is_reserve_pod
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import (
    NUMA_AFFINITY,
    RESERVATION_NOMINATED,
    RESERVATIONS_MATCHED,
    NUMAHint,
    ReservationView,
    Room,
    SkipReads,
)
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEvent, FilterResult, PreFilterResult
from scheduler.framework.status import Status
from scheduler.plugins.device_share.allocator import ScoringType, Weights
from scheduler.plugins.device_share.annotation import allocated_annotation
from scheduler.plugins.device_share.args import DeviceShareArgs, FragmentationArgs
from scheduler.plugins.device_share.cycle import (
    ALLOCATED,
    CYCLE,
    RDMA_ALLOCATED,
    TEMPLATE,
    Cycle,
    cycle_of,
    host_take,
    memoizable,
)
from scheduler.plugins.device_share.cycle_allocator import ERR_INSUFFICIENT_GPU, CycleAllocator
from scheduler.plugins.device_share.filtering import ERR_ISOLATION_PROVIDER, NodeRefusals
from scheduler.plugins.device_share.fragmentation_strategy import FragmentationStrategy
from scheduler.plugins.device_share.handlers.devices import DeviceHandler
from scheduler.plugins.device_share.handlers.mix import MixHandler
from scheduler.plugins.device_share.handlers.pods import PodHandler
from scheduler.plugins.device_share.handlers.reservations import ReservationHandler
from scheduler.plugins.device_share.node_memo import NodeAnswers
from scheduler.plugins.device_share.prebind import write_allocation
from scheduler.plugins.device_share.rdma import Refusal
from scheduler.plugins.device_share.reserved import ReservedCards, ReservedDevices
from scheduler.plugins.device_share.room import describe_shape, room
from scheduler.plugins.device_share.scoring import NodeScorer
from scheduler.plugins.device_share.shape_sums_memo import ShapeSumsMemo
from scheduler.plugins.device_share.single_card_memo import SingleCardMemo
from scheduler.plugins.device_share.store import DeviceStore
from scheduler.plugins.device_share.templates import CONFIGMAPS, ERR_NO_MATCHED_TEMPLATE, TemplateCache
from scheduler.plugins.device_share.topology_hint import numa_hints
from scheduler.plugins.helper.warnings import ObjectWarnings

__all__ = [
    "ERR_INSUFFICIENT_GPU",
    "ERR_ISOLATION_PROVIDER",
    "NAME",
    "RBAC",
    "DeviceShare",
    "allocated_annotation",
    "new",
]

NAME = "DeviceShare"
RBAC: tuple[PolicyRule, ...] = (
    PolicyRule.watching(DEVICES, why="each node's GPUs, from its Device object."),
    PolicyRule.watching(RESERVATIONS, why="the cards each placed Reservation holds."),
    PolicyRule.on(RESERVATIONS, "patch", why="a Reservation's cards, in its device-allocated annotation."),
    PolicyRule.watching(CONFIGMAPS, why="GPU shared-resource templates (vNPU shapes) from their ConfigMap."),
    PolicyRule.on(NODES, "patch", why="the Cambricon dynamic-sMLU node lock (DevicePluginAdaption)."),
)


class DeviceShare:
    def __init__(self, args: DeviceShareArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.store = DeviceStore()
        self.reserved = ReservedDevices(self.store)
        weight = {spec.name: spec.weight for spec in args.scoring_strategy.resources}
        self.weights: Weights = (weight.get(RESOURCE_GPU_MEMORY_RATIO, 0), weight.get(RESOURCE_GPU_MEMORY, 0))
        strategy = args.scoring_strategy
        self.fragmentation: FragmentationStrategy | None = None
        self.card_order: ScoringType = "MostAllocated"
        """How the allocator ranks cards (Fragmentation bin-packs those it does not pick itself)."""
        if strategy.type == "Fragmentation":
            self.fragmentation = FragmentationStrategy(
                strategy.fragmentation or FragmentationArgs(),
                SingleCardMemo(self.store),
                ShapeSumsMemo(self.store),
            )
        else:
            self.card_order = strategy.type
        self.allocator = CycleAllocator(
            self.store,
            self.reserved,
            self.card_order,
            self.weights,
            weight.get(RESOURCE_RDMA, 0),
            self.fragmentation,
        )
        self.refusals = NodeRefusals(self.allocator, args)
        self.scorer = NodeScorer(self.allocator)
        self.templates = TemplateCache(args.gpu_shared_resource_templates_config)
        self._on_device = DeviceHandler(self.store).on_event
        self._on_pod = PodHandler(self.store, self.reserved, ObjectWarnings(handle.backend)).on_event
        self._on_reservation = ReservationHandler(self.reserved).on_event
        handle.subscribe(DEVICES, self._on_device)
        handle.subscribe(CONFIGMAPS, self.templates.on_event)
        handle.subscribe(PODS, self._on_pod)
        handle.subscribe(RESERVATIONS, self._on_reservation)
        if self.fragmentation is not None and self.fragmentation.cluster is not None:
            handle.subscribe(PODS, MixHandler(self.fragmentation.cluster).on_event)

    @property
    def name(self) -> str:
        return NAME

    pre_filter_skip_reads = SkipReads.SPEC
    """``SkipByClass``: PreFilter skips exactly the pods that ask for no GPU and no RDMA (their
    requests), leaving nothing behind."""

    def events_to_register(self) -> ClusterEvent:
        # A Device appearing or changing is a custom-resource event; a pod leaving frees its cards.
        return ClusterEvent.NODE_ADD | ClusterEvent.POD_DELETE | ClusterEvent.CUSTOM_RESOURCE

    # ---- PreFilter / Filter ----

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        cycle = self._cycle_of(pod, snapshot)
        if not isinstance(cycle, Cycle):
            return PreFilterResult(cycle)
        refused_rows = None
        if memoizable(cycle):
            table = self.refusals.table(cycle)
            cycle.refusals, holding = table.frozen(self.store.device_names())
            refused_rows = table.refused.copy()
        else:
            cycle.refusals = self.refusals.of_cycle(cycle)
            holding = frozenset(self.store.has_device - cycle.refusals.keys())
        fitting = set[str]()
        from_reservations = []
        for node, views in (state.get(RESERVATIONS_MATCHED) or {}).items():
            if node not in self.store.has_device or cycle.request is None:
                continue  # a reservation holds cards only
            for view in views:
                fits_there = self.allocator.allocate_from(node, cycle, view.uid) is not None
                cycle.from_reservation[(node, view.uid)] = fits_there
                if fits_there:
                    fitting.add(node)
                    from_reservations.append(node)
        cycle.fitting = holding | fitting if fitting else holding
        if refused_rows is not None:
            cards = self.store.cards()
            cycle.refused_rows = refused_rows
            cycle.fitting_rows = cards.device & ~refused_rows
            cycle.fitting_rows[[cards.row[node] for node in from_reservations]] = True
            cycle.card_layout = cards.layout
        state.write(CYCLE, cycle)
        if self.fragmentation is not None and cycle.request is not None:
            self.fragmentation.observe(pod.uid, cycle.request, host_take(pod))
        return PreFilterResult()

    # The memo's tests compare these, the kept answers, with answers asked afresh.
    @staticmethod
    def _memoizable(cycle: Cycle) -> bool:
        return memoizable(cycle)

    def _fit_table(self, cycle: Cycle) -> NodeAnswers[Refusal]:
        return self.refusals.table(cycle)

    def _refusal(self, node: str, cycle: Cycle) -> Refusal | None:
        return self.refusals.refusal(node, cycle)

    def _cycle_of(self, pod: PodInfo, snapshot: Snapshot) -> Cycle | Status:
        return cycle_of(pod, snapshot, self.store, self.templates)

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        cycle = state.get(CYCLE)
        if cycle is None:
            return FilterResult.all_feasible(rows.size)
        # A node without a Device passes, as in Koordinator: its GPUs are only counted (by
        # NodeResourcesFit), as kube-scheduler would, and no card is named for the pod there.
        fitting = self.refusals.fitting(cycle, snapshot)
        no_template = (
            snapshot.rows_named(rows, cycle.no_template)
            if cycle.no_template
            else np.zeros(rows.size, dtype=np.bool_)
        )
        rejections: list[tuple[str, BoolArray]] = [(ERR_NO_MATCHED_TEMPLATE, no_template)]
        unresolvable = no_template.copy()
        cards = self.store.cards()
        if (
            cycle.fitting_rows is not None
            and cycle.refused_rows is not None
            and fitting is cycle.fitting
            and cycle.card_layout == cards.layout
            and cycle.with_device is self.store.device_names()
        ):
            # PreFilter's answers as masks over the card rows: no name looked up per node.
            at = self.scorer.card_rows(snapshot, rows)
            without_device = ~cards.device[at]
            insufficient = ~cycle.fitting_rows[at] & ~without_device & ~no_template
            refused = cycle.refused_rows & ~cycle.fitting_rows
            if refused.any():  # every refusal of a memoizable cycle is for want of cards
                rejections.append((ERR_INSUFFICIENT_GPU, refused[at] & insufficient))
        else:
            without_device = ~snapshot.rows_named(rows, cycle.with_device)
            insufficient = ~snapshot.rows_named(rows, fitting) & ~without_device & ~no_template
            by_refusal: dict[Refusal, set[str]] = {}
            for node, refusal in cycle.refusals.items():
                if node not in fitting:
                    by_refusal.setdefault(refusal, set()).add(node)
            for refusal, nodes in sorted(by_refusal.items()):
                mask = snapshot.rows_named(rows, frozenset(nodes)) & insufficient
                rejections.append((refusal.reason, mask))
                if refusal.unresolvable:
                    unresolvable |= mask
        if cycle.request is not None and not cycle.request.whole:
            for reason, mask in self.refusals.of_sharing(pod, snapshot, rows):
                rejections.append((reason, mask))
                unresolvable |= mask
        feasible = ~insufficient & ~unresolvable
        return FilterResult(feasible=feasible, rejections=rejections, unresolvable=unresolvable)

    def filter_reservation(self, state: CycleState, pod: PodInfo, reservation: ReservationView) -> Status:
        """``extensions.ReservationFilterPlugin``: the pod's cards fit when allocated from it."""
        cycle = state.get(CYCLE)
        if cycle is None or reservation.node not in cycle.with_device:
            return Status.success()
        fits_there = cycle.from_reservation.get((reservation.node, reservation.uid))
        if fits_there is None:
            fits_there = self.allocator.allocate_from(reservation.node, cycle, reservation.uid) is not None
        return Status.success() if fits_there else Status.unschedulable(ERR_INSUFFICIENT_GPU)

    # ---- room for gangs and preemption, NUMA hints ----

    def member_room(self, pod: PodInfo, snapshot: Snapshot, nodes: Sequence[str], limit: int) -> Room | None:
        cycle = self._cycle_of(pod, snapshot)
        if not isinstance(cycle, Cycle) or cycle.request is None:
            return None
        allocator = self.allocator
        withdrawn = allocator.withdrawn(snapshot)
        per_node = {
            node: room(
                partial(allocator.allocate, node, cycle),
                # The cards of the reservations restored for the plan (ReservedRoom) are the
                # members' to take, as the room of those reservations is.
                allocator.gpu_usage(
                    node,
                    cycle,
                    withdrawn.get(node, set())
                    | {uid for uid in self.reserved.on_node(node) if snapshot.is_lifted_reserved(uid)},
                ),
                limit,
            )
            for node in nodes
            if node in cycle.with_device
        }
        return Room(describe_shape(cycle.request, cycle.hint, cycle.partition_spec), per_node)

    def numa_hints(
        self, state: CycleState, pod: PodInfo, node: str, numa_ids: Sequence[int]
    ) -> Mapping[str, Sequence[NUMAHint] | None] | None:
        """``extensions.NUMAHintProvider``: the NUMA node sets whose cards (and NICs) hold the pod's
        GPUs and RDMA (topology_hint.py)."""
        cycle = state.get(CYCLE)
        if cycle is None or node not in cycle.with_device or self.args.disable_device_numa_topology_alignment:
            return None
        return numa_hints(self.allocator, node, cycle, numa_ids)

    # ---- Score ----

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        return self.scorer.scores(state.get(CYCLE), pod, snapshot, rows)

    def _score_table(self, cycle: Cycle) -> NodeAnswers[int]:
        return self.scorer.table(cycle)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        cycle = state.get(CYCLE)
        if self.fragmentation is not None and cycle is not None and cycle.request is not None:
            return scores  # already 0..100 across the nodes scored
        top = int(scores.max()) if scores.size else 0
        if top <= 0:
            return scores
        normalized: IntArray = scores * MAX_NODE_SCORE // top
        return normalized

    # ---- Reserve / PreBind ----

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        cycle = state.get(CYCLE)
        if cycle is None or node not in cycle.with_device:
            return Status.success()
        nominated = (state.get(RESERVATION_NOMINATED) or {}).get(node)
        chosen = None
        if nominated is not None and cycle.request is not None:
            chosen = self.allocator.allocate_from(node, cycle, nominated)
            if chosen is None:
                return Status.unschedulable(ERR_INSUFFICIENT_GPU)
        mask = (state.get(NUMA_AFFINITY) or {}).get(node)
        numa = (
            None
            if mask is None or chosen is not None
            else frozenset(i for i in range(mask.bit_length()) if mask >> i & 1)
        )
        got = self.allocator.allocate_all(node, cycle, reserve=True, gpus=chosen, numa=numa)
        if isinstance(got, Refusal):
            return Status.unschedulable(got.reason)
        allocations, nics = got
        if is_reserve_pod(pod.annotations):
            # The reserve pod's uid is its reservation's: the cards are held for the reservation
            # (its policy is read from the Reservation once it is placed, before any owner uses it).
            self.reserved.set_reservation(pod.uid, ReservedCards(node, tuple(allocations), "", assumed=True))
        else:
            self.store.hold(pod.uid, node, allocations, assumed=True, rdma=nics)
            if nominated is not None:
                self.reserved.set_owner(pod.uid, nominated, allocations)
        state.write(ALLOCATED, (node, tuple(allocations)))
        state.write(RDMA_ALLOCATED, tuple(nics))
        names = (cycle.templates or {}).get(self.allocator.template_key(node), [])
        if len(names) == 1:
            # Several matching templates: Koordinator leaves the choice to the device plugin (no tag).
            state.write(TEMPLATE, names[0])
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if state.get(ALLOCATED) is not None:
            if is_reserve_pod(pod.annotations):
                self.reserved.remove_reservation(pod.uid)
            else:
                self.store.release(pod.uid)
                self.reserved.remove_owner(pod.uid)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        allocated = state.get(ALLOCATED)
        if allocated is None:
            return Status.success()
        nics = state.get(RDMA_ALLOCATED) or ()
        return await write_allocation(
            self.handle, self.store, state, pod, node, allocated[1], nics, state.get(TEMPLATE)
        )


def new(args: DeviceShareArgs | None, handle: Handle) -> DeviceShare:
    return DeviceShare(args or DeviceShareArgs(), handle)
