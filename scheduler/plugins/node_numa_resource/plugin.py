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
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.numa import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    LABEL_NODE_CPU_BIND_POLICY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    NUMAAllocateStrategy,
    NUMATopologySpec,
    ResourceSpec,
    get_numa_topology_spec,
    get_resource_spec,
    get_resource_status,
    node_cpu_bind_policy,
    node_numa_allocate_strategy,
    node_numa_topology_policy,
)
from apis.extension.reservation import is_reserve_pod
from apis.resources import from_int_units, to_int_units
from apis.scheduling.reservation import Reservation
from apis.topology import NodeResourceTopology
from scheduler.backend.base import (
    PODS,
    RESERVATIONS,
    BackendError,
    EventRecord,
    ObjectRef,
    ResourceType,
    WatchEvent,
    each,
)
from scheduler.background import BackgroundTasks
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import (
    BIND_ANNOTATIONS,
    NUMA_AFFINITY,
    RESERVATION_NOMINATED,
    RESERVATIONS_MATCHED,
    Room,
)
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import ClusterEvent, FilterResult, PreFilterResult
from scheduler.framework.rbac import PolicyRule
from scheduler.framework.status import Code, Status
from scheduler.plugins.node_numa_resource.allocation import Allocation, PodNUMARequest, allocate, numa_used
from scheduler.plugins.node_numa_resource.amplification import (
    ERR_INSUFFICIENT_AMPLIFIED_CPU,
    amplified_cpu_fits,
    amplify,
    safe_amplification_ratios,
)
from scheduler.plugins.node_numa_resource.args import NodeNUMAResourceArgs
from scheduler.plugins.node_numa_resource.cpu_topology import CPUSet
from scheduler.plugins.node_numa_resource.hints import resource_hints
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from scheduler.plugins.node_numa_resource.policy import (
    ERR_POLICY_NOT_MATCH,
    CPURequest,
    NodeCPUBind,
    cpu_request,
    merge_policy,
    node_cpu_bind,
    node_numa_policy,
)
from scheduler.plugins.node_numa_resource.room import describe_shape, greedy_room, trial_room
from scheduler.plugins.node_numa_resource.scoring import resource_score
from scheduler.plugins.node_numa_resource.store import NUMAStore, Record
from scheduler.plugins.node_numa_resource.topology_manager import (
    NUMAStatus,
    ProviderHints,
    admit,
    exclusive_ok,
)
from scheduler.plugins.node_numa_resource.topology_options import TopologyOptions, topology_options

__all__ = ["NAME", "NRTS", "RBAC", "NodeNUMAResource", "new"]

log = logging.getLogger(__name__)

NAME = "NodeNUMAResource"
NRTS = ResourceType.of(NodeResourceTopology)
RBAC: tuple[PolicyRule, ...] = (
    PolicyRule.on(
        NRTS, "get", "list", "watch", why="each node's NUMA zones, CPU topology and kubelet policies."
    ),
    PolicyRule.watching(RESERVATIONS, why="the CPUs each placed Reservation holds."),
    PolicyRule.on(RESERVATIONS, "patch", why="a Reservation's CPUs, in its resource-status annotation."),
)

ERR_INVALID_CPU_TOPOLOGY = "node(s) invalid CPU Topology"
ERR_MISSING_NUMA = "node(s) missing NUMA resources"


@dataclass(slots=True)
class _Cycle:
    resources: dict[str, int]
    cpu: CPURequest
    spec: ResourceSpec
    numa_spec: NUMATopologySpec
    placed: dict[str, _Placed] = field(default_factory=dict)
    """The nodes Filter passed."""


@dataclass(frozen=True, slots=True)
class _Placed:
    """The pod on one node, as Filter found it."""

    policy: str
    """The NUMA policy the pod gets there ("" for None)."""
    bind: NodeCPUBind
    allocation: Allocation | None
    """The trial allocation; None: nothing to allocate."""
    mask: int | None = None
    """The NUMA nodes the topology manager admitted the pod with (None: any)."""
    kept: bool = True
    """The placement keeps a Preferred ``singleNUMANodeExclusive``."""


_CYCLE = StateKey[_Cycle]("NodeNUMAResource/cycle")
_TRIAL_UID = "NodeNUMAResource/room/"
"""The ledger key of a trial member (no pod uid looks like it)."""
_RESERVED = StateKey[tuple[str, Allocation, NodeCPUBind]]("NodeNUMAResource/reserved")


class NodeNUMAResource:
    def __init__(self, args: NodeNUMAResourceArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.store = NUMAStore()
        self._background = BackgroundTasks()
        self._reported: dict[str, tuple[str, ...]] = {}
        """NRT name -> the problems last reported on it."""
        self._reported_pods: dict[str, str] = {}
        """Pod uid -> the resource-status problem last reported on it."""
        self._reported_nodes: dict[str, str] = {}
        """Node -> the amplification-ratio problem last reported on it."""
        handle.subscribe(NRTS, self._on_nrt)
        handle.subscribe(PODS, self._on_pod)
        handle.subscribe(RESERVATIONS, self._on_reservation)

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

    # ---- informers ----

    def _on_nrt(self, event: WatchEvent[NodeResourceTopology]) -> None:
        event.dispatch(self._replace_nrts, self._upsert_nrt, self._delete_nrt)

    def _replace_nrts(self, nrts: Sequence[NodeResourceTopology]) -> None:
        present = {nrt.metadata.name or "" for nrt in nrts}
        for node in list(self.store.options):
            if node not in present:
                self.store.remove_options(node)
        each(nrts, self._upsert_nrt)

    def _upsert_nrt(self, nrt: NodeResourceTopology) -> None:
        node = nrt.metadata.name or ""
        options = topology_options(nrt)
        self.store.set_options(node, options)
        if options.problems and self._reported.get(node) != options.problems:
            self._reported[node] = options.problems
            message = "; ".join(options.problems)
            log.warning("NodeResourceTopology %s: %s", node, message)
            self._report(nrt, message)

    def _report(self, nrt: NodeResourceTopology, message: str) -> None:
        regarding = ObjectRef(
            api_version=NRTS.api_version, kind=NRTS.kind, name=nrt.metadata.name or "", uid=nrt.metadata.uid
        )
        self._event(regarding, message)

    def _event(self, regarding: ObjectRef, message: str) -> None:
        """A Warning event (only where an event loop runs: a unit test feeding events by hand has
        the log line only)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        event = EventRecord(regarding=regarding, type="Warning", reason="InvalidAnnotation", message=message)
        self._background.spawn(self.handle.backend.record_event(event))

    def _delete_nrt(self, nrt: NodeResourceTopology) -> None:
        self.store.remove_options(nrt.metadata.name or "")

    def _on_pod(self, event: WatchEvent[Pod]) -> None:
        event.dispatch(self._replace_pods, self._upsert_pod, self._delete_pod)

    def _replace_pods(self, pods: Sequence[Pod]) -> None:
        present = {pod.metadata.uid or "" for pod in pods}
        for uid, record in list(self.store.records.items()):
            if uid not in present and not record.assumed and not record.reservation:
                self.store.release(uid)
        each(pods, self._upsert_pod)

    def _delete_pod(self, pod: Pod) -> None:
        self.store.release(pod.metadata.uid or "")
        self._reported_pods.pop(pod.metadata.uid or "", None)

    def _upsert_pod(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        if pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
            self.store.release(uid)
            return
        node = pod.spec.node_name
        if not node:
            return  # not bound: only Reserve (an assumed pod) holds for it
        annotations = pod.metadata.annotations or {}
        if ANNOTATION_RESOURCE_STATUS not in annotations:
            return  # bound without a record (or the Binding's annotations not seen yet)
        try:
            cpus, numa = _held(annotations)
            exclusive = get_resource_spec(annotations).preferred_cpu_exclusive_policy or "None"
        except (InvalidAnnotation, ValueError) as exc:
            # Nothing is held for it: say so on the pod, once per problem.
            message = f"{ANNOTATION_RESOURCE_STATUS} not counted: {exc}"
            if self._reported_pods.get(uid) != message:
                self._reported_pods[uid] = message
                log.warning("pod %s/%s: %s", pod.metadata.namespace, pod.metadata.name, message)
                regarding = ObjectRef(
                    kind="Pod", namespace=pod.metadata.namespace, name=pod.metadata.name or "", uid=uid
                )
                self._event(regarding, message)
            return
        self.store.hold(uid, Record(node, cpus, numa, exclusive, assumed=False))

    def _on_reservation(self, event: WatchEvent[Reservation]) -> None:
        event.dispatch(self._replace_reservations, self._upsert_reservation, self._delete_reservation)

    def _replace_reservations(self, reservations: Sequence[Reservation]) -> None:
        present = {r.metadata.uid or r.metadata.name or "" for r in reservations}
        for uid, record in list(self.store.records.items()):
            if record.reservation and uid not in present and not record.assumed:
                self.store.release(uid)
        each(reservations, self._upsert_reservation)

    def _delete_reservation(self, reservation: Reservation) -> None:
        uid = reservation.metadata.uid or reservation.metadata.name or ""
        record = self.store.records.get(uid)
        if record is not None and record.reservation:
            self.store.release(uid)

    def _upsert_reservation(self, reservation: Reservation) -> None:
        """A placed reservation holds the CPUs of the ``resource-status`` this plugin wrote on it at
        its PreBind: read back on every event, so a restart holds them again."""
        uid = reservation.metadata.uid or reservation.metadata.name or ""
        status = reservation.status
        phase = status.phase if status is not None else None
        if phase in ("Succeeded", "Failed") or reservation.metadata.deletion_timestamp:
            self._delete_reservation(reservation)
            return
        node = status.node_name if status is not None else None
        annotations = reservation.metadata.annotations or {}
        if phase != "Available" or not node or ANNOTATION_RESOURCE_STATUS not in annotations:
            return  # not placed yet: an assumed stand-in keeps what Reserve gave it
        try:
            cpus, numa = _held(annotations)
        except (InvalidAnnotation, ValueError) as exc:
            log.warning("reservation %s: %s", reservation.metadata.name, exc)
            return
        self.store.hold(uid, Record(node, cpus, numa, "None", assumed=False, reservation=True))

    # ---- PreFilter / Filter ----

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        resources = {name: amount for name, amount in pod.requests.items() if amount > 0}
        if not resources:
            return PreFilterResult(Status.skip())
        try:
            spec = get_resource_spec(pod.annotations)
            numa_spec = get_numa_topology_spec(pod.annotations)
        except InvalidAnnotation as exc:
            return PreFilterResult(Status.unresolvable(str(exc)))
        cpu = cpu_request(
            milli_cpu=resources.get("cpu", 0),
            labels=pod.labels,
            priority=pod.pod.spec.priority,
            spec=spec,
            numa_spec=numa_spec,
            default_bind_policy=self.args.default_cpu_bind_policy,
        )
        if isinstance(cpu, str):
            return PreFilterResult(Status.unresolvable(cpu))
        state.write(_CYCLE, _Cycle(resources, cpu, spec, numa_spec))
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        cycle = state.get(_CYCLE)
        if cycle is None:
            return FilterResult.all_feasible(rows.size)
        feasible = np.ones(rows.size, dtype=np.bool_)
        unresolvable = np.zeros(rows.size, dtype=np.bool_)
        reasons: dict[str, BoolArray] = {}
        affinity = state.get(NUMA_AFFINITY) or {}
        names = snapshot.table.names
        interesting = self._interesting(cycle, snapshot, rows)
        # Pods a preemption is weighing count as gone (their CPUs free) in its what-if.
        withdrawn = frozenset(uid for uid in snapshot.withdrawn() if uid in self.store.records)
        for i in np.flatnonzero(interesting).tolist():
            node = names[int(rows[i])]
            info = snapshot.node(node)
            labels = info.labels if info is not None else {}
            got = self._amplified_misfit(cycle, snapshot, int(rows[i]), node, labels) or self._place(
                state, pod, cycle, node, labels, withdrawn
            )
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

    def _amplified_misfit(
        self, cycle: _Cycle, snapshot: Snapshot, row: int, node: str, labels: dict[str, str]
    ) -> Status | None:
        """``Insufficient amplified cpu`` when the pod's cpu does not fit the node once its cpuset
        CPUs count amplified (algorithms 11.3 step 4); None when it fits."""
        ratio = self._cpu_ratio(snapshot, node)
        if ratio <= 1 or not cycle.cpu.milli_cpu:
            return None
        resolved = self._resolve(cycle, node, labels)
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

    def _options(self, node: str, snapshot: Snapshot) -> TopologyOptions | None:
        """The node's topology options, amplified by its amplification ratios."""
        options = self.store.options.get(node)
        return None if options is None else options.amplified(self._ratios(snapshot, node))

    def _cpu_ratio(self, snapshot: Snapshot, node: str) -> float:
        """The node's cpu amplification ratio (1 when none)."""
        return self._ratios(snapshot, node).get("cpu", 1.0)

    def _ratios(self, snapshot: Snapshot, node: str) -> dict[str, float]:
        """The node's amplification ratios by resource; a malformed annotation counts as none, with
        one warning (log line and event on the Node) per problem."""
        info = snapshot.node(node)
        obj = info.node if info is not None else None
        if obj is None:
            return {}
        ratios, problem = safe_amplification_ratios(obj.metadata.annotations)
        if problem is None:
            self._reported_nodes.pop(node, None)
        elif self._reported_nodes.get(node) != problem:
            self._reported_nodes[node] = problem
            message = f"cpu amplification ignored: {problem}"
            log.warning("node %s: %s", node, message)
            self._event(ObjectRef(api_version="v1", kind="Node", name=node, uid=obj.metadata.uid), message)
        return ratios

    def _interesting(self, cycle: _Cycle, snapshot: Snapshot, rows: IntArray) -> BoolArray:
        """The rows the plugin has something to say about; the others pass untouched."""
        if cycle.cpu.bind or cycle.numa_spec.numa_topology_policy:
            return np.ones(rows.size, dtype=np.bool_)
        with_nrt = snapshot.rows_named(rows, frozenset(self.store.options))
        labelled = snapshot.label_mask(LABEL_NUMA_TOPOLOGY_POLICY) | snapshot.label_mask(
            LABEL_NODE_CPU_BIND_POLICY
        )
        mask: BoolArray = with_nrt | labelled[rows]
        return mask

    def _place(
        self,
        state: CycleState,
        pod: PodInfo,
        cycle: _Cycle,
        node: str,
        labels: dict[str, str],
        withdrawn: frozenset[str] = frozenset(),
        scratch: NodeCPUAllocation | None = None,
    ) -> _Placed | Status:
        """The pod on one node (``withdrawn``: pods counted as gone; ``scratch``: the ledger to
        place on instead of the node's, reservations left out), or why it cannot run there."""
        resolved = self._resolve(cycle, node, labels)
        if isinstance(resolved, Status):
            return resolved
        merged, bind = resolved
        if not merged and not bind.bind:
            return _Placed(merged, bind, None)
        options = self._options(node, self.handle.snapshot())
        if options is None:
            return Status.unresolvable(ERR_MISSING_NUMA if merged else ERR_INVALID_CPU_TOPOLOGY)
        # An owner's reservations on this node give it their CPUs back (taken first).
        reserved = self._reserved_for(state, node) if scratch is None else frozenset()
        gone = withdrawn | reserved
        if scratch is not None:
            ledger = scratch
        else:
            ledger = self.store.ledger_without(node, gone) if gone else self.store.ledger(node)
        request = self._request(cycle, bind, labels, self._cpus_of(reserved))
        if not merged:
            got = allocate(options, ledger, request, None)
            return Status.unschedulable(got) if isinstance(got, str) else _Placed(merged, bind, got)
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
        return _Placed(merged, bind, got, admission.mask, kept)

    def _resolve(self, cycle: _Cycle, node: str, labels: dict[str, str]) -> tuple[str, NodeCPUBind] | Status:
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

    def _reserved_for(self, state: CycleState, node: str) -> frozenset[str]:
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

    def _cpus_of(self, uids: frozenset[str]) -> frozenset[int]:
        return frozenset().union(*(self.store.records[uid].cpus for uid in uids)) if uids else frozenset()

    def _request(
        self,
        cycle: _Cycle,
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

    # ---- room for gangs and preemption ----

    def member_room(self, pod: PodInfo, snapshot: Snapshot, nodes: Sequence[str], limit: int) -> Room | None:
        """``extensions.MemberRoom``: how many pods like ``pod`` each node holds by NUMA node and
        CPU (``room``); None when no node's NUMA policy or cpuset limits the pod."""
        state = CycleState()
        if not self.pre_filter(state, pod, snapshot).status.ok:
            return None
        cycle = state.get(_CYCLE)
        if cycle is None:
            return None
        # A preemption's victims, and the reservations restored for a gang's plan, are gone.
        gone = frozenset(
            uid
            for uid, record in self.store.records.items()
            if snapshot.is_withdrawn(uid) or (record.reservation and snapshot.is_lifted_reserved(uid))
        )
        per_node: dict[str, int] = {}
        for node in nodes:
            count = self._room_on(state, pod, cycle, snapshot, node, gone, limit)
            if count is not None:
                per_node[node] = count
        return Room(describe_shape(pod.requests, cycle.cpu), per_node) if per_node else None

    def _room_on(
        self,
        state: CycleState,
        pod: PodInfo,
        cycle: _Cycle,
        snapshot: Snapshot,
        node: str,
        gone: frozenset[str],
        limit: int,
    ) -> int | None:
        info = snapshot.node(node)
        labels = info.labels if info is not None else {}
        resolved = self._resolve(cycle, node, labels)
        if isinstance(resolved, Status):
            return 0
        merged, bind = resolved
        if not merged and not bind.bind:
            return None
        options = self._options(node, snapshot)
        if options is None:
            return 0
        ledger = self.store.ledger_without(node, gone) if gone else self.store.ledger(node)
        request = self._request(cycle, bind, labels)
        exclusive_required = cycle.cpu.exclusive == "Required"
        count = greedy_room(options, ledger, request, merged, exclusive_required, limit)
        if count is not None:
            return count

        def trial(scratch: NodeCPUAllocation) -> bool:
            got = self._place(state, pod, cycle, node, labels, scratch=scratch)
            if isinstance(got, Status) or got.allocation is None:
                return False
            held = got.allocation
            uid = f"{_TRIAL_UID}{len(scratch.pods())}"
            scratch.add(uid, held.cpus, held.numa_resources, cycle.cpu.exclusive_policy)
            return True

        return trial_room(trial, self.store.ledger_copy(node, gone), limit)

    # ---- Score ----

    def score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> IntArray:
        scores = np.zeros(rows.size, dtype=np.int64)
        cycle = state.get(_CYCLE)
        if cycle is None:
            return scores
        # Only nodes where Filter placed CPUs or NUMA resources are rated: visit those, not every
        # row (a plain pod on nodes without a NUMA policy has none, and scores 0 everywhere).
        allocated = {node for node, placed in cycle.placed.items() if placed.allocation is not None}
        if not allocated:
            return scores
        names = snapshot.table.names
        strategy = self.args.scoring_strategy
        weights = strategy.weights()
        for i, row in enumerate(rows.tolist()):
            node = names[row]
            if node not in allocated:
                continue
            placed = cycle.placed[node]
            assert placed.allocation is not None
            policy, bind, allocation = placed.policy, placed.bind, placed.allocation
            options = self._options(node, snapshot)
            if options is None:
                continue
            ledger = self.store.ledger(node)
            if not policy:
                # No NUMA policy: only a cpuset pod is rated, by the node's CPUs held by cpusets.
                column = snapshot.table.column.get("cpu")
                cap = int(snapshot.table.allocatable[row, column]) if column is not None else 0
                # A cpuset CPU cannot be shared: it counts amplified against the amplified allocatable.
                held = amplify(
                    1000 * len(allocation.cpus | ledger.allocated_cpus()), self._cpu_ratio(snapshot, node)
                )
                scores[i] = resource_score(
                    strategy.scoring_type, {"cpu": weights.get("cpu", 1)}, {"cpu": cap}, {"cpu": held}, {}
                )
                continue
            numa = sorted(allocation.numa_resources)
            allocatable: dict[str, int] = {}
            requested: dict[str, int] = dict(cycle.resources)
            for n in numa:
                for name, amount in options.numa_allocatable.get(n, {}).items():
                    allocatable[name] = allocatable.get(name, 0) + amount
                for name, amount in numa_used(options, ledger, n).items():
                    requested[name] = requested.get(name, 0) + amount
            if bind.bind:
                on_numa = options.cpu_topology.cpus_in_nodes(numa) & ledger.allocated_cpus()
                requested["cpu"] = amplify(1000 * len(allocation.cpus | on_numa), options.cpu_ratio)
            score = resource_score(strategy.scoring_type, weights, allocatable, requested, {})
            # singleNUMANodeExclusive: Preferred ranks nodes where the pod keeps it first.
            scores[i] = score if placed.kept else score // 2
        return scores

    # ---- Reserve / PreBind ----

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        cycle = state.get(_CYCLE)
        if cycle is None:
            return Status.success()
        placed = cycle.placed.get(node)
        info = self.handle.snapshot().node(node)
        labels = info.labels if info is not None else {}
        if placed is None:
            got = self._place(state, pod, cycle, node, labels)
            if isinstance(got, Status):
                return got
            placed = got
        options = self._options(node, self.handle.snapshot())
        if placed.allocation is None or options is None:
            return Status.success()
        bind = placed.bind
        reserved = self._reserved_for(state, node)
        ledger = self.store.ledger_without(node, reserved) if reserved else self.store.ledger(node)
        # The ledger may have changed since Filter (a pod bound meanwhile): allocate again.
        request = self._request(cycle, bind, labels, self._cpus_of(reserved))
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
        state.write(_RESERVED, (node, fresh, bind))
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if state.get(_RESERVED) is not None:
            self.store.release(pod.uid)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        reserved = state.get(_RESERVED)
        cycle = state.get(_CYCLE)
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
        annotations = state.get(BIND_ANNOTATIONS) or {}
        annotations[ANNOTATION_RESOURCE_STATUS] = resource_status_annotation(allocation)
        if bind.bind and (cycle.cpu.implicit_spec or bind.node_forced):
            spec = cycle.spec.model_copy()
            if bind.node_forced:
                spec.required_cpu_bind_policy = bind.policy  # type: ignore[assignment]
            else:
                spec.preferred_cpu_bind_policy = bind.policy  # type: ignore[assignment]
            annotations[ANNOTATION_RESOURCE_SPEC] = spec.model_dump_json(by_alias=True, exclude_none=True)
        state.write(BIND_ANNOTATIONS, annotations)
        return Status.success()


def _held(annotations: dict[str, str]) -> tuple[frozenset[int], dict[int, dict[str, int]]]:
    """The cpuset and per-NUMA amounts of a ``resource-status``; raises on a malformed one."""
    status = get_resource_status(annotations)
    cpus = CPUSet.parse(status.cpuset or "")
    numa: dict[int, dict[str, int]] = {}
    for entry in status.numa_node_resources or ():
        numa[entry.node] = {name: to_int_units(name, q) for name, q in (entry.resources or {}).items()}
    return cpus, numa


def resource_status_annotation(allocation: Allocation) -> str:
    """Koordinator's ``resource-status`` JSON: the cpuset (omitted when empty) and the per-NUMA
    amounts sorted by NUMA id, as Kubernetes quantities."""
    value: dict[str, object] = {}
    if allocation.cpus:
        value["cpuset"] = CPUSet(allocation.cpus).format()
    if allocation.numa_resources:
        value["numaNodeResources"] = [
            {
                "node": numa,
                "resources": {
                    name: str(from_int_units(name, amount))
                    for name, amount in sorted(resources.items())
                    if amount
                },
            }
            for numa, resources in sorted(allocation.numa_resources.items())
        ]
    return json.dumps(value, separators=(",", ":"))


def new(args: NodeNUMAResourceArgs | None, handle: Handle) -> NodeNUMAResource:
    return NodeNUMAResource(args or NodeNUMAResourceArgs(), handle)
