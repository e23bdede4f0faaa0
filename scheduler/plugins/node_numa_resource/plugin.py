"""NodeNUMAResource: NUMA topology policies, NUMA-level scoring and cpusets (algorithms 11).

PreFilter reads the pod's requests, ``resource-spec`` and ``numa-topology-spec`` (a pod asking for
nothing skips the plugin). Filter resolves each node's policy (``policy``), merges the pod's, and
under BestEffort, Restricted or SingleNUMANode asks every hint provider (this plugin, DeviceShare)
and the topology manager for the NUMA nodes the pod gets; a cpuset pod on a None-policy node gets a
trial allocation; on a node with a cpu amplification ratio above 1 cpuset CPUs count amplified
(``amplification``). BestEffort is checked here too, not first at Reserve (11.7 item 6). Score rates
the NUMA nodes the pod would get (``scoringStrategy``). Reserve allocates into the ledger; PreBind
writes ``scheduling.koordinator.sh/resource-status`` (and the implicit ``resource-spec``) onto the
Binding. Bound pods' resource-status and the NRT's kubelet-managed CPUs rebuild the ledger on restart.

This module holds the extension points only: the informers' handlers are in ``handlers/``, the
pod's placement on a node in placement.py, the room for gangs in node_room.py, a node's score in
node_scoring.py, the ``resource-status`` annotation in resource_status.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from apis.client.backend import PODS, RESERVATIONS, BackendError, EventType, WatchEvent, each
from apis.client.rbac import PolicyRule
from apis.core import Pod
from apis.extension.numa import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    LABEL_NODE_CPU_BIND_POLICY,
    LABEL_NUMA_TOPOLOGY_POLICY,
)
from apis.extension.reservation import is_reserve_pod
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import NUMA_AFFINITY, Room, carry_on_binding
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import ClusterEvent, FilterResult, PreFilterResult
from scheduler.framework.status import Code, Status
from scheduler.plugins.node_numa_resource.allocation import allocate
from scheduler.plugins.node_numa_resource.args import NodeNUMAResourceArgs
from scheduler.plugins.node_numa_resource.cycle import CYCLE, RESERVED, Cycle
from scheduler.plugins.node_numa_resource.handlers.nrts import NRTS, NRTHandler
from scheduler.plugins.node_numa_resource.handlers.pods import PodHandler
from scheduler.plugins.node_numa_resource.handlers.reservations import ReservationHandler
from scheduler.plugins.node_numa_resource.node_ratios import NodeRatios
from scheduler.plugins.node_numa_resource.node_room import room_on
from scheduler.plugins.node_numa_resource.node_scoring import placed_score
from scheduler.plugins.node_numa_resource.placement import Placer
from scheduler.plugins.node_numa_resource.pod_request import PodRequests
from scheduler.plugins.node_numa_resource.resource_status import resource_status_annotation
from scheduler.plugins.node_numa_resource.room import describe_shape
from scheduler.plugins.node_numa_resource.store import NUMAStore, Record
from scheduler.plugins.node_numa_resource.warning_events import WarningEvents

__all__ = ["NAME", "NRTS", "RBAC", "NodeNUMAResource", "new"]

NAME = "NodeNUMAResource"
RBAC: tuple[PolicyRule, ...] = (
    PolicyRule.on(
        NRTS, "get", "list", "watch", why="each node's NUMA zones, CPU topology and kubelet policies."
    ),
    PolicyRule.watching(RESERVATIONS, why="the CPUs each placed Reservation holds."),
    PolicyRule.on(RESERVATIONS, "patch", why="a Reservation's CPUs, in its resource-status annotation."),
)


class NodeNUMAResource:
    def __init__(self, args: NodeNUMAResourceArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.store = NUMAStore()
        events = WarningEvents(handle)
        self.ratios = NodeRatios(events)
        self.placer = Placer(args, handle, self.store, self.ratios)
        self._requests = PodRequests(args.default_cpu_bind_policy)
        self._pods = PodHandler(self.store, events)
        self._upsert_pod = self._pods.upsert
        self._delete_pod = self._pods.delete
        self._on_nrt = NRTHandler(self.store, events).on_event
        handle.subscribe(NRTS, self._on_nrt)
        handle.subscribe(PODS, self._on_pod)
        handle.subscribe(RESERVATIONS, ReservationHandler(self.store).on_event)

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> ClusterEvent:
        # An NRT appearing or changing is a custom-resource event; a pod leaving frees its CPUs.
        return (
            ClusterEvent.NODE_ADD
            | ClusterEvent.NODE_UPDATE
            | ClusterEvent.POD_DELETE
            | ClusterEvent.CUSTOM_RESOURCE
        )

    def _on_pod(self, event: WatchEvent[Pod]) -> None:
        # Through the plugin's attributes, so that one replaced (a test breaking a pod) counts on relists too.
        if event.type is EventType.LISTED:  # a page of the first list; its REPLACED skips it
            each(event.objects, self._upsert_pod)
            return
        event.dispatch(
            lambda pods: self._pods.replace(pods, self._upsert_pod, untold=event.untold),
            self._upsert_pod,
            self._delete_pod,
        )

    # ---- PreFilter / Filter ----

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        request = self._requests.of(pod)
        if request is None:
            return PreFilterResult(Status.skip())
        if isinstance(request, str):
            return PreFilterResult(Status.unresolvable(request))
        state.write(CYCLE, Cycle(dict(request.resources), request.cpu, request.spec, request.numa_spec))
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        cycle = state.get(CYCLE)
        if cycle is None:
            return FilterResult.all_feasible(rows.size)
        interesting = self._interesting(cycle, snapshot, rows)
        if not interesting.any():  # a plain pod on nodes without NUMA topology or policy labels
            return FilterResult.all_feasible(rows.size)
        feasible = np.ones(rows.size, dtype=np.bool_)
        unresolvable = np.zeros(rows.size, dtype=np.bool_)
        reasons: dict[str, BoolArray] = {}
        affinity = state.get(NUMA_AFFINITY) or {}
        names = snapshot.table.names
        # Pods a preemption is weighing count as gone (their CPUs free) in its what-if.
        withdrawn = frozenset(uid for uid in snapshot.withdrawn() if uid in self.store.records)
        for i in np.flatnonzero(interesting).tolist():
            node = names[int(rows[i])]
            info = snapshot.node(node)
            labels = info.labels if info is not None else {}
            got = self.placer.amplified_misfit(
                cycle, snapshot, int(rows[i]), node, labels
            ) or self.placer.place(state, pod, cycle, node, labels, withdrawn)
            if isinstance(got, Status):
                feasible[i] = False
                if got.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    unresolvable[i] = True
                reason = got.message()
                reasons.setdefault(reason, np.zeros(rows.size, dtype=np.bool_))[i] = True
                continue
            cycle.placed[node] = got
            if got.mask is not None:
                affinity[node] = got.mask
        state.write(NUMA_AFFINITY, affinity)
        return FilterResult(feasible=feasible, rejections=sorted(reasons.items()), unresolvable=unresolvable)

    def _interesting(self, cycle: Cycle, snapshot: Snapshot, rows: IntArray) -> BoolArray:
        """The rows the plugin has something to say about; the others pass untouched."""
        if cycle.cpu.bind or cycle.numa_spec.numa_topology_policy:
            return np.ones(rows.size, dtype=np.bool_)
        labelled = snapshot.label_mask(LABEL_NUMA_TOPOLOGY_POLICY) | snapshot.label_mask(
            LABEL_NODE_CPU_BIND_POLICY
        )
        mask: BoolArray = labelled[rows]
        if self.store.options:  # no node has a topology without koordlet: nothing to look up
            mask |= snapshot.rows_named(rows, frozenset(self.store.options))
        return mask

    def _interesting_node(self, cycle: Cycle, node: str, labels: dict[str, str]) -> bool:
        """``_interesting`` of one node."""
        return bool(
            cycle.cpu.bind
            or cycle.numa_spec.numa_topology_policy
            or node in self.store.options
            or LABEL_NUMA_TOPOLOGY_POLICY in labels
            or LABEL_NODE_CPU_BIND_POLICY in labels
        )

    # ---- room for gangs and preemption ----

    def member_room(self, pod: PodInfo, snapshot: Snapshot, nodes: Sequence[str], limit: int) -> Room | None:
        """``extensions.MemberRoom``: how many pods like ``pod`` each node holds by NUMA node and
        CPU (``room``); None when no node's NUMA policy or cpuset limits the pod."""
        state = CycleState()
        if not self.pre_filter(state, pod, snapshot).status.ok:
            return None
        cycle = state.get(CYCLE)
        if cycle is None:
            return None
        # A preemption's victims, and the reservations restored for a gang's plan, are gone.
        gone = frozenset(
            uid
            for uid, record in self.store.records.items()
            if snapshot.is_withdrawn(uid) or (record.reservation and snapshot.is_lifted_reserved(uid))
        )
        per_node: dict[str, int] = {}
        # As Filter: on the rows the plugin has nothing to say about, the node does not limit it.
        rows = np.fromiter((snapshot.table.row.get(n, -1) for n in nodes), dtype=np.int64, count=len(nodes))
        asked = rows < 0  # not in the table: asked as before
        asked[~asked] = self._interesting(cycle, snapshot, rows[~asked])
        for node in (nodes[i] for i in np.flatnonzero(asked).tolist()):
            count = room_on(self.placer, state, pod, cycle, snapshot, node, gone, limit)
            if count is not None:
                per_node[node] = count
        return Room(describe_shape(pod.requests, cycle.cpu), per_node) if per_node else None

    # ---- Score ----

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        scores = np.zeros(rows.size, dtype=np.int64)
        cycle = state.get(CYCLE)
        if cycle is None:
            return scores
        # Only nodes where Filter placed CPUs or NUMA resources are rated: visit those, not every
        # row (a plain pod on nodes without a NUMA policy has none, and scores 0 everywhere).
        allocated = {node for node, placed in cycle.placed.items() if placed.allocation is not None}
        if not allocated:
            return scores
        names = snapshot.table.names
        column = snapshot.table.column.get("cpu")
        for i, row in enumerate(rows.tolist()):
            node = names[row]
            if node not in allocated:
                continue
            placed = cycle.placed[node]
            options = self.placer.options(node, snapshot)
            if options is None:
                continue
            cap, ratio = 0, 1.0
            if not placed.policy:
                cap = int(snapshot.table.allocatable[row, column]) if column is not None else 0
                ratio = self.ratios.cpu(snapshot, node)
            ledger = self.store.ledger(node)
            strategy = self.args.scoring_strategy
            scores[i] = placed_score(strategy, placed, options, ledger, cycle.resources, cap, ratio)
        return scores

    # ---- Reserve / PreBind ----

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        cycle = state.get(CYCLE)
        if cycle is None:
            return Status.success()
        placed = cycle.placed.get(node)
        info = self.handle.snapshot().node(node)
        labels = info.labels if info is not None else {}
        if placed is None:
            if not self._interesting_node(cycle, node, labels):
                return Status.success()  # Filter let it pass untouched: nothing to allocate
            got = self.placer.place(state, pod, cycle, node, labels)
            if isinstance(got, Status):
                return got
            placed = got
        options = self.placer.options(node, self.handle.snapshot())
        if placed.allocation is None or options is None:
            return Status.success()
        bind = placed.bind
        reserved = self.placer.reserved_for(state, node)
        ledger = self.store.ledger_without(node, reserved) if reserved else self.store.ledger(node)
        # The ledger may have changed since Filter (a pod bound meanwhile): allocate again.
        request = self.placer.request(cycle, bind, labels, self.placer.cpus_of(reserved))
        fresh = allocate(options, ledger, request, placed.mask)
        if isinstance(fresh, str):
            return Status.unschedulable(fresh)
        stand_in = is_reserve_pod(pod.annotations)  # its uid is its Reservation's
        record = Record(
            node,
            fresh.cpus,
            fresh.numa_resources,
            cycle.cpu.exclusive_policy,
            assumed=True,
            reservation=stand_in,
        )
        self.store.hold(pod.uid, record)
        state.write(RESERVED, (node, fresh, bind))
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if state.get(RESERVED) is not None:
            self.store.release(pod.uid)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        reserved = state.get(RESERVED)
        cycle = state.get(CYCLE)
        if reserved is None or cycle is None:
            return Status.success()
        _, allocation, bind = reserved
        if is_reserve_pod(pod.annotations):
            # Koordinator records a reservation's CPUs on the Reservation object.
            patch = {
                "metadata": {
                    "annotations": {ANNOTATION_RESOURCE_STATUS: resource_status_annotation(allocation)}
                }
            }
            try:
                await self.handle.backend.patch_custom(RESERVATIONS, None, pod.name, patch)
            except BackendError as exc:
                return Status.error(f"writing {ANNOTATION_RESOURCE_STATUS} on reservation {pod.name}: {exc}")
            return Status.success()
        annotations = {ANNOTATION_RESOURCE_STATUS: resource_status_annotation(allocation)}
        if bind.bind and (cycle.cpu.implicit_spec or bind.node_forced):
            spec = cycle.spec.model_copy()
            if bind.node_forced:
                spec.required_cpu_bind_policy = bind.policy  # type: ignore[assignment]
            else:
                spec.preferred_cpu_bind_policy = bind.policy  # type: ignore[assignment]
            annotations[ANNOTATION_RESOURCE_SPEC] = spec.model_dump_json(by_alias=True, exclude_none=True)
        carry_on_binding(state, annotations)
        return Status.success()


def new(args: NodeNUMAResourceArgs | None, handle: Handle) -> NodeNUMAResource:
    return NodeNUMAResource(args or NodeNUMAResourceArgs(), handle)
