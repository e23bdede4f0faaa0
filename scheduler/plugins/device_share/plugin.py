"""DeviceShare: GPUs allocated by card (whole or shared), written to the pod as ``device-allocated``.

PreFilter parses the pod's GPU and RDMA requests (a pod asking for neither skips the plugin) and runs the
allocator on every node that has a Device, so that Filter only masks rows by name; Score rates
nodes with the scoring strategy; Reserve picks the cards and holds them in the store, Unreserve
gives them back, and PreBind writes Koordinator's annotation ``{"gpu": [{"minor": 0, "resources":
{...}}]}``. The store is beside the cache: it also reads bound pods' annotations on the pod watch.
A ``koordinator.sh/rdma`` request gets NICs (and VFs) the same way, jointly with the GPUs under
``device-joint-allocate`` (rdma.py, joint.py).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

import numpy as np

from apis.core import Pod
from apis.errors import InvalidAnnotation, echo
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    DEVICE_TYPES,
    GPU_PARTITION_POLICY_HONOR,
    LABEL_GPU_ISOLATION_PROVIDER,
    LABEL_GPU_MODEL,
    LABEL_GPU_PARTITION_POLICY,
    LABEL_GPU_VENDOR,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_RDMA,
    DeviceHint,
    GPUPartitionSpec,
    get_device_allocate_hints,
    get_device_allocations,
    get_device_joint_allocate,
    get_gpu_partition_spec,
    unknown_device_types,
)
from apis.extension.reservation import get_reservation_allocated, is_reservation_ignored, is_reserve_pod
from apis.quantity import Format, Quantity
from apis.scheduling.device import Device
from apis.scheduling.reservation import Reservation
from scheduler.backend.base import (
    DEVICES,
    NODES,
    PODS,
    RESERVATIONS,
    BackendError,
    ObjectRef,
    WatchEvent,
    each,
)
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import (
    NUMA_AFFINITY,
    RESERVATION_NOMINATED,
    RESERVATIONS_MATCHED,
    NUMAHint,
    ReservationView,
    Room,
)
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEvent, FilterResult, PreFilterResult
from scheduler.framework.rbac import PolicyRule
from scheduler.framework.status import Status
from scheduler.plugins.device_share.adapter import BindContext, adapt
from scheduler.plugins.device_share.allocator import (
    GPU,
    Allocation,
    GPUUsage,
    ScoringType,
    Weights,
    allocate,
    fits,
    node_score,
    take,
)
from scheduler.plugins.device_share.args import DeviceShareArgs, FragmentationArgs
from scheduler.plugins.device_share.fragmentation_strategy import FragmentationStrategy
from scheduler.plugins.device_share.joint import allocate_rdma_jointly, joint_types
from scheduler.plugins.device_share.node_memo import NodeAnswers, ShapeCache
from scheduler.plugins.device_share.npu import npu_resources
from scheduler.plugins.device_share.partition import choose_partition
from scheduler.plugins.device_share.rdma import (
    InvalidRDMARequest,
    RDMAAllocation,
    RDMAUsage,
    Refusal,
    rdma_allocations_of,
    rdma_entries,
    rdma_node_score,
    rdma_quantity,
    wanted,
)
from scheduler.plugins.device_share.request import GPURequest, InvalidGPURequest, gpu_request
from scheduler.plugins.device_share.reserved import RESTRICTED, ReservedCards, ReservedDevices
from scheduler.plugins.device_share.room import describe_shape, room
from scheduler.plugins.device_share.store import DeviceStore, allocations_of
from scheduler.plugins.device_share.templates import (
    CONFIGMAPS,
    ERR_NO_MATCHED_TEMPLATE,
    TemplateCache,
    per_card_resources,
    template_key,
)
from scheduler.plugins.helper.warnings import ObjectWarnings

__all__ = ["ERR_INSUFFICIENT_GPU", "ERR_ISOLATION_PROVIDER", "NAME", "RBAC", "DeviceShare", "new"]

log = logging.getLogger(__name__)

NAME = "DeviceShare"
RBAC: tuple[PolicyRule, ...] = (
    PolicyRule.watching(DEVICES, why="each node's GPUs, from its Device object."),
    PolicyRule.watching(RESERVATIONS, why="the cards each placed Reservation holds."),
    PolicyRule.on(RESERVATIONS, "patch", why="a Reservation's cards, in its device-allocated annotation."),
    PolicyRule.watching(CONFIGMAPS, why="GPU shared-resource templates (vNPU shapes) from their ConfigMap."),
    PolicyRule.on(NODES, "patch", why="the Cambricon dynamic-sMLU node lock (DevicePluginAdaption)."),
)

ERR_INSUFFICIENT_GPU = "Insufficient gpu devices"
ERR_ISOLATION_PROVIDER = "GPUIsolationProviderHAMICore not found on the node"


@dataclass(slots=True)
class _Cycle:
    request: GPURequest | None
    """None: the pod asks for RDMA only."""
    hint: DeviceHint | None
    partition_spec: GPUPartitionSpec | None
    honor_partitions: frozenset[str]
    """Nodes labelled ``gpu-partition-policy: Honor`` (their Device may carry the label instead)."""
    fitting: frozenset[str]
    """Nodes whose cards can hold the request now."""
    with_device: frozenset[str]
    from_reservation: dict[tuple[str, str], bool] = field(default_factory=dict)
    """(node, reservation uid) -> the reservation's cards (with the node's free ones unless it is
    Restricted) hold the request, for the reservations the pod may use."""
    rdma: _RDMAAsk | None = None
    refusals: dict[str, Refusal] = field(default_factory=dict)
    """Why each node outside ``fitting`` cannot hold the pod's devices."""
    ignore_reserved: bool = False
    """A ``reservation-ignored`` pod: the cards reservations hold for owners to come are free to
    it (an owner that arrives evicts it, Reservation's backfill eviction)."""
    templates: dict[str, list[str]] | None = None
    """``<vendor>-<model>`` -> the shared-resource templates the request equals (None: not enforced)."""
    no_template: frozenset[str] = frozenset()
    """Nodes with a Device whose model has no matching template."""


@dataclass(frozen=True, slots=True)
class _RDMAAsk:
    quantity: int
    hint: DeviceHint | None
    joint: tuple[str, ...]
    """``device-joint-allocate``'s types taking part, primary first (joint.joint_types)."""
    same_pcie: bool
    secondary: bool
    """RDMA is a secondary type of a whole-GPU joint pod: nodes whose Device says their NICs are
    well planned check it at Reserve only."""


_CYCLE = StateKey[_Cycle]("DeviceShare/cycle")


def _host_take(pod: PodInfo) -> tuple[int, int]:
    """The cpu (milli) and memory (bytes) ``pod`` asks of its node besides devices."""
    return pod.requests.get("cpu", 0), pod.requests.get("memory", 0)


def _host_free(snapshot: Snapshot, rows: IntArray) -> IntArray:
    """(rows, 2): each node's free cpu (milli) and memory (bytes); unbounded where the node does
    not report the resource."""
    table = snapshot.table
    free = np.full((rows.size, 2), np.iinfo(np.int64).max // 4, dtype=np.int64)
    for i, name in enumerate(("cpu", "memory")):
        col = table.column.get(name)
        if col is not None:
            free[:, i] = table.free(rows, np.array([col], dtype=np.int64))[:, 0]
    return free


_ALLOCATED = StateKey[tuple[str, tuple[Allocation, ...]]]("DeviceShare/allocated")
_RDMA_ALLOCATED = StateKey[tuple[RDMAAllocation, ...]]("DeviceShare/rdma-allocated")
_TEMPLATE = StateKey[str]("DeviceShare/template")


class DeviceShare:
    def __init__(self, args: DeviceShareArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._warnings = ObjectWarnings(handle.backend)
        self.store = DeviceStore()
        self._fits: ShapeCache[NodeAnswers[Refusal]] = ShapeCache(NodeAnswers)
        """PreFilter's refusals per request shape (``node_memo``)."""
        self._scores: ShapeCache[NodeAnswers[int]] = ShapeCache(NodeAnswers)
        """Score's card score per request shape and node (MostAllocated / LeastAllocated)."""
        self.reserved = ReservedDevices(self.store)
        weight = {spec.name: spec.weight for spec in args.scoring_strategy.resources}
        self.weights: Weights = (weight.get(RESOURCE_GPU_MEMORY_RATIO, 0), weight.get(RESOURCE_GPU_MEMORY, 0))
        self.rdma_weight = weight.get(RESOURCE_RDMA, 0)
        strategy = args.scoring_strategy
        self.fragmentation: FragmentationStrategy | None = None
        self.card_order: ScoringType = "MostAllocated"
        """How the allocator ranks cards (Fragmentation bin-packs those it does not pick itself)."""
        if strategy.type == "Fragmentation":
            self.fragmentation = FragmentationStrategy(strategy.fragmentation or FragmentationArgs())
        else:
            self.card_order = strategy.type
        self.templates = TemplateCache(args.gpu_shared_resource_templates_config)
        handle.subscribe(DEVICES, self._on_device)
        handle.subscribe(CONFIGMAPS, self.templates.on_event)
        handle.subscribe(PODS, self._on_pod)
        handle.subscribe(RESERVATIONS, self._on_reservation)

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        # A Device appearing or changing is a custom-resource event; a pod leaving frees its cards.
        return ClusterEvent.NODE_ADD | ClusterEvent.POD_DELETE | ClusterEvent.CUSTOM_RESOURCE

    # ---- informers ----

    def _on_device(self, event: WatchEvent[Device]) -> None:
        event.dispatch(
            self.store.replace_devices,
            self.store.set_device,
            lambda d: self.store.remove_device(d.metadata.name or ""),
        )

    def _on_pod(self, event: WatchEvent[Pod]) -> None:
        event.dispatch(self._replace_pods, self._upsert_pod, self._delete_pod)

    def _delete_pod(self, pod: Pod) -> None:
        self.store.release(pod.metadata.uid or "")
        self.reserved.remove_owner(pod.metadata.uid or "")

    def _replace_pods(self, pods: Sequence[Pod]) -> None:
        present = {pod.metadata.uid or "" for pod in pods}
        each(pods, self._upsert_pod)
        for uid in self.store.holders():
            if uid not in present and not self.store.is_assumed(uid) and not self.reserved.knows(uid):
                self.store.release(uid)
                self.reserved.remove_owner(uid)

    def _upsert_pod(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        if is_reserve_pod(pod.metadata.annotations):
            return  # a reservation's cards are read from the Reservation (_on_reservation)
        if pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
            self._delete_pod(pod)
            return
        node = pod.spec.node_name
        if not node:
            return  # not bound: only Reserve (an assumed pod) holds cards for it
        regarding = ObjectRef(
            kind="Pod", namespace=pod.metadata.namespace, name=pod.metadata.name or "", uid=uid
        )
        try:
            allocated = get_device_allocations(pod.metadata.annotations)
        except InvalidAnnotation as exc:
            self._warnings.warn(regarding, f"devices not counted: {exc}")
            return
        if allocated is None:
            return
        if unknown := unknown_device_types(allocated):
            # Koordinator accepts and ignores them: so do we, saying so.
            self._warnings.warn(
                regarding,
                f"{ANNOTATION_DEVICE_ALLOCATED}: unknown device type(s) {echo(unknown)} ignored "
                f"(known: {', '.join(DEVICE_TYPES)})",
            )
        allocations = allocations_of(allocated)
        self.store.hold(uid, node, allocations, assumed=False, rdma=rdma_allocations_of(allocated))
        self._follow_owner(pod, allocations)

    def _follow_owner(self, pod: Pod, allocations: Sequence[Allocation]) -> None:
        """A bound pod allocated from a reservation takes its cards out of the reservation's."""
        uid = pod.metadata.uid or ""
        try:
            reservation = get_reservation_allocated(pod.metadata.annotations)
        except InvalidAnnotation:
            reservation = None
        if reservation is None or not reservation.uid:
            self.reserved.remove_owner(uid)
        else:
            self.reserved.set_owner(uid, reservation.uid, allocations)

    def _on_reservation(self, event: WatchEvent[Reservation]) -> None:
        event.dispatch(self._replace_reservations, self._upsert_reservation, self._delete_reservation)

    def _replace_reservations(self, reservations: Sequence[Reservation]) -> None:
        present = {r.metadata.uid or r.metadata.name or "" for r in reservations}
        for uid, cards in list(self.reserved.reservations.items()):
            if uid not in present and not cards.assumed:
                self.reserved.remove_reservation(uid)
        each(reservations, self._upsert_reservation)

    def _delete_reservation(self, reservation: Reservation) -> None:
        self.reserved.remove_reservation(reservation.metadata.uid or reservation.metadata.name or "")

    def _upsert_reservation(self, reservation: Reservation) -> None:
        """A placed reservation holds the cards its ``device-allocated`` annotation names (the one
        this plugin wrote at its PreBind): read back on every event, so a restart rebuilds them."""
        uid = reservation.metadata.uid or reservation.metadata.name or ""
        status = reservation.status
        phase = status.phase if status is not None else None
        if phase in ("Succeeded", "Failed") or reservation.metadata.deletion_timestamp:
            self.reserved.remove_reservation(uid)
            return
        node = status.node_name if status is not None else None
        if phase != "Available" or not node:
            return  # not placed yet: an assumed reserve pod keeps what Reserve gave it
        try:
            allocated = get_device_allocations(reservation.metadata.annotations)
        except InvalidAnnotation:
            log.warning(
                "reservation %s: malformed %s", reservation.metadata.name, ANNOTATION_DEVICE_ALLOCATED
            )
            return
        if allocated is None:
            return
        policy = (reservation.spec.allocate_policy if reservation.spec else None) or ""
        cards = ReservedCards(node, tuple(allocations_of(allocated)), policy, assumed=False)
        self.reserved.set_reservation(uid, cards)

    # ---- PreFilter / Filter ----

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        cycle = self._cycle_of(pod, snapshot)
        if not isinstance(cycle, _Cycle):
            return PreFilterResult(cycle)
        if self._memoizable(cycle):
            cycle.refusals = dict(self._fit_table(cycle).by_node)
        else:
            for node in self.store.has_device:
                refusal = self._refusal(node, cycle)
                if refusal is not None:
                    cycle.refusals[node] = refusal
        fitting = set(self.store.has_device - cycle.refusals.keys())
        for node, views in (state.get(RESERVATIONS_MATCHED) or {}).items():
            if node not in self.store.has_device or cycle.request is None:
                continue  # a reservation holds cards only
            for view in views:
                fits_there = self._allocate_from(node, cycle, view.uid) is not None
                cycle.from_reservation[(node, view.uid)] = fits_there
                if fits_there:
                    fitting.add(node)
        cycle.fitting = frozenset(fitting)
        state.write(_CYCLE, cycle)
        if self.fragmentation is not None and cycle.request is not None:
            self.fragmentation.observe(pod.uid, cycle.request, _host_take(pod))
        return PreFilterResult()

    @staticmethod
    def _memoizable(cycle: _Cycle) -> bool:
        """Whether a node's answer for this cycle follows from its cards, their usage and the
        request alone (``node_memo``): not so with a device hint, a partition spec, an RDMA ask, or
        reservations the pod may take cards from."""
        return (
            cycle.request is not None
            and cycle.hint is None
            and cycle.partition_spec is None
            and cycle.rdma is None
            and not cycle.ignore_reserved
        )

    def _fit_table(self, cycle: _Cycle) -> NodeAnswers[Refusal]:
        """The refusals of every node with a Device for the cycle's request shape, asking again
        only the nodes changed since the shape was last asked (``node_memo``)."""
        table = self._fits.of((cycle.request, cycle.honor_partitions, cycle.no_template))
        changed = self.store.changed_since(table.synced) if table.synced >= 0 else None
        if changed is None:
            table.by_node.clear()
            changed = set(self.store.has_device)
        for node in changed:
            refusal = self._refusal(node, cycle) if node in self.store.has_device else None
            if refusal is None:
                table.by_node.pop(node, None)
            else:
                table.by_node[node] = refusal
        table.synced = self.store.changes
        return table

    def _refusal(self, node: str, cycle: _Cycle) -> Refusal | None:
        got = self._allocate_all(node, cycle)
        return got if isinstance(got, Refusal) else None

    def _cycle_of(self, pod: PodInfo, snapshot: Snapshot) -> _Cycle | Status:
        """The pod's request and hints (``fitting`` left empty), or why the plugin skips or refuses it."""
        try:
            request = gpu_request(pod.requests)
        except InvalidGPURequest as exc:
            return Status.unresolvable(f"invalid GPU request: {exc}")
        try:
            rdma = rdma_quantity(pod.requests)
        except InvalidRDMARequest as exc:
            return Status.unresolvable(str(exc))
        if request is None and rdma is None:
            return Status.skip()
        try:
            hints = get_device_allocate_hints(pod.annotations) or {}
            partition_spec = get_gpu_partition_spec(pod.annotations)
            joint = get_device_joint_allocate(pod.annotations)
        except InvalidAnnotation as exc:
            return Status.unresolvable(str(exc))
        honor_rows = snapshot.label_values(LABEL_GPU_PARTITION_POLICY).get(GPU_PARTITION_POLICY_HONOR, set())
        names = snapshot.table.names
        cycle = _Cycle(
            request,
            hints.get("gpu"),
            partition_spec,
            frozenset(names[row] for row in honor_rows),
            frozenset(),
            frozenset(self.store.has_device),
        )
        if request is not None:
            per_card = per_card_resources(request)
            if self.templates.enforced(per_card, not request.whole):
                cycle.templates = self.templates.matched(per_card)
                if not cycle.templates:
                    return Status.unresolvable(ERR_NO_MATCHED_TEMPLATE)
                cycle.no_template = frozenset(
                    node for node in self.store.has_device if self._template_key(node) not in cycle.templates
                )
        cycle.ignore_reserved = is_reservation_ignored(pod.labels)
        if rdma is not None:
            requested = frozenset(t for t, asked in (("gpu", request), ("rdma", rdma)) if asked is not None)
            types = joint_types(joint, requested, hints)
            cycle.rdma = _RDMAAsk(
                rdma,
                hints.get("rdma"),
                types,
                joint is not None and joint.required_scope == "SamePCIe",
                bool(types) and types[0] != "rdma" and request is not None and request.whole,
            )
        return cycle

    # ---- room for gangs and preemption ----

    def member_room(self, pod: PodInfo, snapshot: Snapshot, nodes: Sequence[str], limit: int) -> Room | None:
        cycle = self._cycle_of(pod, snapshot)
        if not isinstance(cycle, _Cycle) or cycle.request is None:
            return None
        withdrawn = self._withdrawn(snapshot)
        per_node = {
            node: room(
                partial(self._allocate, node, cycle),
                # The cards of the reservations restored for the plan (ReservedRoom) are the
                # members' to take, as the room of those reservations is.
                self._gpu_usage(
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

    def _allocate_from(self, node: str, cycle: _Cycle, reservation_uid: str) -> list[Allocation] | None:
        """An owner's cards when it allocates from this reservation: the reservation's remaining
        cards first (*preferred*), then, unless it is Restricted, the node's free cards as well;
        Restricted: only within the reservation's remaining per-card amounts."""
        cards = self.reserved.get(reservation_uid)
        if cards is None or cards.node != node:
            return self._allocate(node, cycle)
        if cards.policy == RESTRICTED:
            capacity = {g.minor: GPUUsage(g.core, g.memory, g.ratio) for g in self.store.gpus(node)}
            minors, usage = self.reserved.restricted_usage(
                reservation_uid, {m: c for m, c in capacity.items() if m in cards.minors}
            )
            return self._allocate(node, cycle, usage, only=minors)
        restored = self.reserved.restored_usage(node, reservation_uid)
        preferred = self._allocate(node, cycle, restored, only=cards.minors)
        return preferred if preferred is not None else self._allocate(node, cycle, restored)

    def filter_reservation(self, state: CycleState, pod: PodInfo, reservation: ReservationView) -> Status:
        """``extensions.ReservationFilterPlugin``: the pod's cards fit when allocated from it."""
        cycle = state.get(_CYCLE)
        if cycle is None or reservation.node not in cycle.with_device:
            return Status.success()
        fits_there = cycle.from_reservation.get((reservation.node, reservation.uid))
        if fits_there is None:
            fits_there = self._allocate_from(reservation.node, cycle, reservation.uid) is not None
        return Status.success() if fits_there else Status.unschedulable(ERR_INSUFFICIENT_GPU)

    def _allocate_all(
        self,
        node: str,
        cycle: _Cycle,
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
            got = self._allocate(node, cycle, usage, only, choosing=reserve)
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
            rdma_usage if rdma_usage is not None else self._rdma_usage(node, cycle),
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

    def numa_hints(
        self, state: CycleState, pod: PodInfo, node: str, numa_ids: Sequence[int]
    ) -> Mapping[str, Sequence[NUMAHint] | None] | None:
        """``extensions.NUMAHintProvider``: the NUMA node sets whose cards (and NICs) hold the pod's
        GPUs and RDMA, the smallest preferred (Koordinator's ``deviceshare/topology_hint.go``). A set
        that gives the same cards as the whole node scores 500, above any CPU score, so the cards
        the node would pick anyway win ties."""
        cycle = state.get(_CYCLE)
        if cycle is None or node not in cycle.with_device or self.args.disable_device_numa_topology_alignment:
            return None
        resources = [
            name for name, asked in (("gpu", cycle.request), ("rdma", cycle.rdma)) if asked is not None
        ]
        whole = self._allocate_all(node, cycle)
        best = None if isinstance(whole, Refusal) else sorted(a.minor for a in whole[0])
        found: list[tuple[int, int, int]] = []
        for size in range(1, len(numa_ids) + 1):
            for subset in itertools.combinations(numa_ids, size):
                got = self._allocate_all(node, cycle, numa=frozenset(subset))
                if isinstance(got, Refusal):
                    continue
                score = 500 if best is not None and sorted(a.minor for a in got[0]) == best else 0
                found.append((sum(1 << i for i in subset), size, score))
        smallest = min((size for _, size, _ in found), default=0)
        hints = [NUMAHint(mask, size == smallest, score) for mask, size, score in found]
        return {name: hints for name in resources}

    def _template_key(self, node: str) -> str:
        return template_key(*self.store.vendor_model(node))

    def _allocate(
        self,
        node: str,
        cycle: _Cycle,
        usage: Mapping[int, GPUUsage] | None = None,
        only: frozenset[int] | None = None,
        *,
        choosing: bool = False,
    ) -> list[Allocation] | None:
        """The cards the pod would get on ``node``; ``choosing``: Reserve's final choice (the
        Fragmentation strategy's card then, any fitting card is as good for Filter)."""
        if node in cycle.no_template:
            return None
        gpus: list[GPU] = self.store.gpus(node)
        if only is not None:
            gpus = [g for g in gpus if g.minor in only]
        hint, request = cycle.hint, cycle.request
        assert request is not None
        if hint is not None and hint.selector is not None:
            selector = hint.selector
            gpus = [g for g in gpus if selector.matches(g.labels)]
        if usage is None:
            usage = self._gpu_usage(node, cycle)
        table = self.store.partitions(node)
        honor = node in cycle.honor_partitions or self.store.honors_partitions(node)
        if request.whole and table and (honor or cycle.partition_spec is not None):
            free = [g.minor for g in gpus if fits(g, usage.get(g.minor, GPUUsage()), request)]
            minors = choose_partition(table, free, request.count, cycle.partition_spec)
            if minors is not None:
                by_minor = {g.minor: g for g in gpus}
                return [Allocation(m, take(by_minor[m], request)) for m in minors]
            restricted = (
                cycle.partition_spec is not None and cycle.partition_spec.allocate_policy == "Restricted"
            )
            if honor or restricted:
                return None
        if choosing and self.fragmentation is not None and self._any_card(node, cycle):
            return self.fragmentation.choose(gpus, usage, request)
        return allocate(
            gpus,
            usage,
            request,
            self.card_order,
            hint.required_topology_scope if hint else None,
            self.weights,
        )

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        cycle = state.get(_CYCLE)
        if cycle is None:
            return FilterResult.all_feasible(rows.size)
        # A node without a Device passes, as in Koordinator: its GPUs are only counted (by
        # NodeResourcesFit), as kube-scheduler would, and no card is named for the pod there.
        without_device = ~snapshot.rows_named(rows, cycle.with_device)
        fitting = self._fitting(cycle, snapshot)
        no_template = snapshot.rows_named(rows, cycle.no_template)
        insufficient = ~snapshot.rows_named(rows, fitting) & ~without_device & ~no_template
        by_refusal: dict[Refusal, set[str]] = {}
        for node, refusal in cycle.refusals.items():
            if node not in fitting:
                by_refusal.setdefault(refusal, set()).add(node)
        rejections: list[tuple[str, BoolArray]] = [(ERR_NO_MATCHED_TEMPLATE, no_template)]
        unresolvable = no_template.copy()
        for refusal, nodes in sorted(by_refusal.items()):
            mask = snapshot.rows_named(rows, frozenset(nodes)) & insufficient
            rejections.append((refusal.reason, mask))
            if refusal.unresolvable:
                unresolvable |= mask
        if cycle.request is not None and not cycle.request.whole:
            for reason, mask in self._share_refusals(pod, snapshot, rows):
                rejections.append((reason, mask))
                unresolvable |= mask
        feasible = ~insufficient & ~unresolvable
        return FilterResult(feasible=feasible, rejections=rejections, unresolvable=unresolvable)

    def _fitting(self, cycle: _Cycle, snapshot: Snapshot) -> frozenset[str]:
        """The nodes whose cards hold the request, counting pods a preemption is weighing as gone."""
        victims = self._withdrawn(snapshot)
        if not victims:
            return cycle.fitting
        freed = {
            node
            for node, uids in victims.items()
            if node in cycle.with_device
            and not isinstance(
                self._allocate_all(
                    node, cycle, self._gpu_usage(node, cycle, uids), self._rdma_usage(node, cycle, uids)
                ),
                Refusal,
            )
        }
        return cycle.fitting | freed

    def _left_out(self, node: str, cycle: _Cycle, gone: AbstractSet[str]) -> set[str]:
        """The holders whose cards and NICs the pod sees as free on ``node``: ``gone`` (the victims
        a preemption is weighing, the reservations a gang plan restores) and, for a
        ``reservation-ignored`` pod, every reservation there."""
        left_out = set(gone)
        if cycle.ignore_reserved:
            left_out |= self.reserved.on_node(node)
        return left_out

    def _gpu_usage(
        self, node: str, cycle: _Cycle, gone: AbstractSet[str] = frozenset()
    ) -> Mapping[int, GPUUsage]:
        """The card usage the pod sees on ``node`` (Filter, Score, Reserve and the planners alike)."""
        left_out = self._left_out(node, cycle, gone)
        return self.store.usage_without(node, left_out) if left_out else self.store.usage(node)

    def _rdma_usage(self, node: str, cycle: _Cycle, gone: AbstractSet[str] = frozenset()) -> RDMAUsage:
        """The NIC usage the pod sees on ``node``, as :meth:`_gpu_usage`."""
        left_out = self._left_out(node, cycle, gone)
        return self.store.rdma_usage_without(node, left_out) if left_out else self.store.rdma_usage(node)

    def _withdrawn(self, snapshot: Snapshot) -> dict[str, set[str]]:
        """Node -> the pods holding cards there that a preemption is weighing (gone in the what-if)."""
        victims: dict[str, set[str]] = {}
        for uid in snapshot.withdrawn():
            held = self.store.held(uid)
            if held is not None:
                victims.setdefault(held[0], set()).add(uid)
        return victims

    def _share_refusals(
        self, pod: PodInfo, snapshot: Snapshot, rows: IntArray
    ) -> list[tuple[str, BoolArray]]:
        """Nodes that refuse a shared GPU: a model listed in ``gpuShareUnsupportedModels``, or an
        isolation provider other than the one the pod's label asks for."""
        refusals: list[tuple[str, BoolArray]] = []
        for unsupported in self.args.gpu_share_unsupported_models:
            on_model = (
                snapshot.label_mask(LABEL_GPU_VENDOR, frozenset((unsupported.vendor,)))
                & snapshot.label_mask(LABEL_GPU_MODEL, frozenset((unsupported.model,)))
            )[rows]
            reason = (
                f"model {unsupported.model!r} of vendor {unsupported.vendor!r} does not support GPU Share"
            )
            refusals.append((reason, on_model))
        provider = pod.labels.get(LABEL_GPU_ISOLATION_PROVIDER)
        if provider:
            other = ~snapshot.label_mask(LABEL_GPU_ISOLATION_PROVIDER, frozenset((provider,)))[rows]
            refusals.append((ERR_ISOLATION_PROVIDER, other))
        return refusals

    # ---- Score ----

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        cycle = state.get(_CYCLE)
        scores = np.zeros(rows.size, dtype=np.int64)
        names = snapshot.table.names
        if cycle is None:
            if self.fragmentation is None or not any(_host_take(pod)):
                return scores
            # A pod without GPUs still takes the cpu and memory the GPUs' pods need: rated by
            # the cards it would strand (FGD's rating of CPU-only tasks), 0..100.
            nodes = [names[row] for row in rows.tolist()]
            return self.fragmentation.host_scores(
                [(self.store.gpus(n), self.store.usage(n)) for n in nodes],
                _host_free(snapshot, rows),
                _host_take(pod),
            )
        if self.fragmentation is not None and cycle.request is not None:
            # Its scores are already 0..100 across the nodes (NICs are not rated under it).
            nodes = [names[row] for row in rows.tolist()]
            any_card = [self._any_card(n, cycle) for n in nodes]
            return self.fragmentation.scores(
                cycle.request,
                [(self._gpus(n, cycle), self._gpu_usage(n, cycle)) for n in nodes],
                [None if free else self._allocate(n, cycle) for n, free in zip(nodes, any_card, strict=True)],
                any_card,
                _host_free(snapshot, rows),
                _host_take(pod),
            )
        if self._memoizable(cycle):
            kept = self._score_table(cycle).by_node
            return np.fromiter((kept.get(names[row], 0) for row in rows.tolist()), np.int64, rows.size)
        strategy = self.card_order
        for i, row in enumerate(rows.tolist()):
            node = names[row]
            gpus = self.store.gpus(node)
            if gpus and cycle.request is not None:
                scores[i] = node_score(
                    gpus, self._gpu_usage(node, cycle), cycle.request, strategy, self.weights
                )
            scores[i] += self._rdma_score(node, cycle)
        return scores

    def _score_table(self, cycle: _Cycle) -> NodeAnswers[int]:
        """Every node's card score for the cycle's request shape (the memoizable cycles': no RDMA,
        nothing left out), scoring again only the nodes changed since the shape was last scored."""
        assert cycle.request is not None
        table = self._scores.of(cycle.request)
        changed = self.store.changed_since(table.synced) if table.synced >= 0 else None
        if changed is None:
            table.by_node.clear()
            changed = set(self.store.has_device)
        for node in changed:
            gpus = self.store.gpus(node)
            if gpus:
                usage = self.store.usage(node)
                table.by_node[node] = node_score(gpus, usage, cycle.request, self.card_order, self.weights)
            else:
                table.by_node.pop(node, None)
        table.synced = self.store.changes
        return table

    def _rdma_score(self, node: str, cycle: _Cycle) -> int:
        """Koordinator adds each device type's node score."""
        ask = cycle.rdma
        if ask is None or (ask.secondary and self.store.secondary_well_planned(node)):
            return 0
        nics = self.store.rdmas(node)
        per_nic = wanted(ask.quantity, ask.hint, nics)
        if isinstance(per_nic, Refusal):
            return 0
        strategy = self.card_order
        return rdma_node_score(nics, self._rdma_usage(node, cycle), per_nic[0], strategy, self.rdma_weight)

    def _gpus(self, node: str, cycle: _Cycle) -> list[GPU]:
        """The node's cards the pod may get (the hint's selector applied, as in ``_allocate``)."""
        gpus: list[GPU] = self.store.gpus(node)
        hint = cycle.hint
        if hint is not None and hint.selector is not None:
            selector = hint.selector
            gpus = [g for g in gpus if selector.matches(g.labels)]
        return gpus

    def _partitioned(self, node: str, cycle: _Cycle) -> bool:
        """Whether ``_allocate`` takes a partition of the node's table (the same condition)."""
        honor = node in cycle.honor_partitions or self.store.honors_partitions(node)
        return (
            cycle.request is not None
            and cycle.request.whole
            and bool(self.store.partitions(node))
            and (honor or cycle.partition_spec is not None)
        )

    def _any_card(self, node: str, cycle: _Cycle) -> bool:
        """Whether the scoring strategy picks the card: one card, no scope to keep, no partition."""
        scope = cycle.hint.required_topology_scope if cycle.hint else None
        return (
            cycle.request is not None
            and cycle.request.count == 1
            and scope in (None, "Device", "Node")
            and not self._partitioned(node, cycle)
        )

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        cycle = state.get(_CYCLE)
        if self.fragmentation is not None and cycle is not None and cycle.request is not None:
            return scores  # already 0..100 across the nodes scored
        top = int(scores.max()) if scores.size else 0
        if top <= 0:
            return scores
        normalized: IntArray = scores * MAX_NODE_SCORE // top
        return normalized

    # ---- Reserve / PreBind ----

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        cycle = state.get(_CYCLE)
        if cycle is None or node not in cycle.with_device:
            return Status.success()
        nominated = (state.get(RESERVATION_NOMINATED) or {}).get(node)
        chosen = None
        if nominated is not None and cycle.request is not None:
            chosen = self._allocate_from(node, cycle, nominated)
            if chosen is None:
                return Status.unschedulable(ERR_INSUFFICIENT_GPU)
        mask = (state.get(NUMA_AFFINITY) or {}).get(node)
        numa = (
            None
            if mask is None or chosen is not None
            else frozenset(i for i in range(mask.bit_length()) if mask >> i & 1)
        )
        got = self._allocate_all(node, cycle, reserve=True, gpus=chosen, numa=numa)
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
        state.write(_ALLOCATED, (node, tuple(allocations)))
        state.write(_RDMA_ALLOCATED, tuple(nics))
        names = (cycle.templates or {}).get(self._template_key(node), [])
        if len(names) == 1:
            # Several matching templates: Koordinator leaves the choice to the device plugin (no tag).
            state.write(_TEMPLATE, names[0])
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if state.get(_ALLOCATED) is not None:
            if is_reserve_pod(pod.annotations):
                self.reserved.remove_reservation(pod.uid)
            else:
                self.store.release(pod.uid)
                self.reserved.remove_owner(pod.uid)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        allocated = state.get(_ALLOCATED)
        if allocated is None:
            return Status.success()
        template = state.get(_TEMPLATE)
        nics = state.get(_RDMA_ALLOCATED)
        value = allocated_annotation(allocated[1], nics or (), template)
        metadata: dict[str, dict[str, str]] = {"annotations": {ANNOTATION_DEVICE_ALLOCATED: value}}
        reserve_pod = is_reserve_pod(pod.annotations)
        if self.handle.features.device_plugin_adaption and not reserve_pod:
            refused = await self._adapt(pod, node, allocated[1], template, metadata)
            if refused is not None:
                return refused
        try:
            if reserve_pod:
                # Koordinator records a reservation's cards on the Reservation object.
                await self.handle.backend.patch_custom(RESERVATIONS, None, pod.name, {"metadata": metadata})
            else:
                await self.handle.backend.patch_pod(pod.pod, {"metadata": metadata})
        except BackendError as exc:
            return Status.error(f"writing {ANNOTATION_DEVICE_ALLOCATED} on {pod.key}: {exc}")
        return Status.success()

    async def _adapt(
        self,
        pod: PodInfo,
        node: str,
        allocations: Sequence[Allocation],
        template: str | None,
        metadata: dict[str, dict[str, str]],
    ) -> Status | None:
        """Adds what vendors' device plugins read to ``metadata`` (and locks the node when the
        vendor needs it); a Status when the bind must fail."""
        info = self.handle.snapshot().node(node)
        node_obj = info.node if info is not None else None
        vendor, model = self.store.vendor_model(node)
        ctx = BindContext(
            namespace=pod.pod.metadata.namespace or "",
            name=pod.pod.metadata.name or "",
            pod_labels=pod.labels,
            node=node,
            node_annotations=(node_obj.metadata.annotations or {}) if node_obj else {},
            vendor=vendor,
            model=model,
            now=datetime.now(UTC),
        )
        adapted = adapt(ctx, allocations, template)
        if isinstance(adapted, str):
            return Status.error(f"adapting for the device plugin of vendor {vendor!r}: {adapted}")
        metadata["annotations"].update(adapted.annotations)
        if adapted.labels:
            metadata["labels"] = adapted.labels
        if adapted.node_annotations:
            patch = {"metadata": {"annotations": adapted.node_annotations}}
            try:
                await self.handle.backend.patch_custom(NODES, None, node, patch)
            except BackendError as exc:
                return Status.error(f"locking node {node}: {exc}")
        return None


def allocated_annotation(
    allocations: Sequence[Allocation], rdma: Sequence[RDMAAllocation] = (), template: str | None = None
) -> str:
    """Koordinator's ``device-allocated`` JSON: GPU entries carry gpu-core, gpu-memory and ratio (an
    NPU's carry its npu-* amounts instead of gpu-core) and the shared-resource template if any; rdma
    entries their amount and VF (rdma.rdma_entries)."""
    gpu: list[dict[str, object]] = []
    for a in allocations:
        memory = {
            RESOURCE_GPU_MEMORY: str(Quantity.from_int(a.usage.memory, Format.BINARY_SI)),
            RESOURCE_GPU_MEMORY_RATIO: str(a.usage.ratio),
        }
        entry: dict[str, object] = {
            "minor": a.minor,
            "resources": {**npu_resources(a.usage.npu), **memory}
            if any(a.usage.npu)
            else {RESOURCE_GPU_CORE: str(a.usage.core), **memory},
        }
        if template:
            entry["extension"] = {"gpuSharedResourceTemplate": template}
        gpu.append(entry)
    value: dict[str, object] = {"gpu": gpu} if gpu else {}
    if rdma:
        value["rdma"] = rdma_entries(rdma)
    return json.dumps(value, separators=(",", ":"))


def new(args: DeviceShareArgs | None, handle: Handle) -> DeviceShare:
    return DeviceShare(args or DeviceShareArgs(), handle)
