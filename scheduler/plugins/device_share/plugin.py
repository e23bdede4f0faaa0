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

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.device import (
    ANNOTATION_DEVICE_ALLOCATED,
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
)
from apis.extension.reservation import is_reserve_pod
from apis.quantity import Format, Quantity
from apis.scheduling.device import Device
from scheduler.backend.base import DEVICES, PODS, BackendError, WatchEvent
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEvent, FilterResult, PreFilterResult
from scheduler.framework.rbac import PolicyRule
from scheduler.framework.status import Status
from scheduler.plugins.device_share.allocator import (
    GPU,
    Allocation,
    GPUUsage,
    Weights,
    allocate,
    fits,
    node_score,
    take,
)
from scheduler.plugins.device_share.args import DeviceShareArgs
from scheduler.plugins.device_share.joint import allocate_rdma_jointly, joint_types
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
from scheduler.plugins.device_share.store import DeviceStore, allocations_of

__all__ = ["ERR_INSUFFICIENT_GPU", "ERR_ISOLATION_PROVIDER", "NAME", "RBAC", "DeviceShare", "new"]

log = logging.getLogger(__name__)

NAME = "DeviceShare"
RBAC: tuple[PolicyRule, ...] = (
    PolicyRule.watching(DEVICES, why="each node's GPUs, from its Device object."),
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
    rdma: _RDMAAsk | None = None
    refusals: dict[str, Refusal] = field(default_factory=dict)
    """Why each node outside ``fitting`` cannot hold the pod's devices."""


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
_ALLOCATED = StateKey[tuple[str, tuple[Allocation, ...]]]("DeviceShare/allocated")
_RDMA_ALLOCATED = StateKey[tuple[RDMAAllocation, ...]]("DeviceShare/rdma-allocated")


class DeviceShare:
    def __init__(self, args: DeviceShareArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.store = DeviceStore()
        weight = {spec.name: spec.weight for spec in args.scoring_strategy.resources}
        self.weights: Weights = (weight.get(RESOURCE_GPU_MEMORY_RATIO, 0), weight.get(RESOURCE_GPU_MEMORY, 0))
        self.rdma_weight = weight.get(RESOURCE_RDMA, 0)
        handle.subscribe(DEVICES, self._on_device)
        handle.subscribe(PODS, self._on_pod)

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
        event.dispatch(
            self._replace_pods, self._upsert_pod, lambda p: self.store.release(p.metadata.uid or "")
        )

    def _replace_pods(self, pods: Sequence[Pod]) -> None:
        present = set()
        for pod in pods:
            present.add(pod.metadata.uid or "")
            self._upsert_pod(pod)
        for uid in self.store.holders():
            if uid not in present and not self.store.is_assumed(uid):
                self.store.release(uid)

    def _upsert_pod(self, pod: Pod) -> None:
        uid = pod.metadata.uid or ""
        if pod.status.phase in ("Succeeded", "Failed") or pod.metadata.deletion_timestamp:
            self.store.release(uid)
            return
        node = pod.spec.node_name
        if not node:
            return  # not bound: only Reserve (an assumed pod) holds cards for it
        try:
            allocated = get_device_allocations(pod.metadata.annotations)
        except InvalidAnnotation:
            log.warning(
                "pod %s/%s: malformed %s",
                pod.metadata.namespace,
                pod.metadata.name,
                ANNOTATION_DEVICE_ALLOCATED,
            )
            return
        if allocated is None:
            return
        self.store.hold(
            uid, node, allocations_of(allocated), assumed=False, rdma=rdma_allocations_of(allocated)
        )

    # ---- PreFilter / Filter ----

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        try:
            request = gpu_request(pod.requests)
        except InvalidGPURequest as exc:
            return PreFilterResult(Status.unresolvable(f"invalid GPU request: {exc}"))
        try:
            rdma = rdma_quantity(pod.requests)
        except InvalidRDMARequest as exc:
            return PreFilterResult(Status.unresolvable(str(exc)))
        if (request is None and rdma is None) or is_reserve_pod(pod.annotations):
            # A reservation's reserve pod holds GPU counts (NodeResourcesFit) but no specific cards
            # yet: its owners are given cards when they are scheduled.
            return PreFilterResult(Status.skip())
        try:
            hints = get_device_allocate_hints(pod.annotations) or {}
            partition_spec = get_gpu_partition_spec(pod.annotations)
            joint = get_device_joint_allocate(pod.annotations)
        except InvalidAnnotation as exc:
            return PreFilterResult(Status.unresolvable(str(exc)))
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
        for node in self.store.has_device:
            got = self._allocate_all(node, cycle)
            if isinstance(got, Refusal):
                cycle.refusals[node] = got
        cycle.fitting = frozenset(self.store.has_device - cycle.refusals.keys())
        state.write(_CYCLE, cycle)
        return PreFilterResult()

    def _allocate_all(
        self,
        node: str,
        cycle: _Cycle,
        usage: Mapping[int, GPUUsage] | None = None,
        rdma_usage: RDMAUsage | None = None,
        *,
        reserve: bool = False,
    ) -> tuple[list[Allocation], list[RDMAAllocation]] | Refusal:
        """The GPUs and NICs the pod gets on ``node``, or why it cannot have them."""
        gpus: list[Allocation] = []
        if cycle.request is not None:
            got = self._allocate(node, cycle, usage)
            if got is None:
                return Refusal(ERR_INSUFFICIENT_GPU)
            gpus = got
        ask = cycle.rdma
        if ask is None or (ask.secondary and not reserve and self.store.secondary_well_planned(node)):
            return gpus, []
        nics = allocate_rdma_jointly(
            self.store.gpus(node),
            gpus,
            self.store.rdmas(node),
            rdma_usage if rdma_usage is not None else self.store.rdma_usage(node),
            ask.quantity,
            ask.hint,
            ask.joint,
            ask.same_pcie,
            self.args.scoring_strategy.type,
            self.rdma_weight,
        )
        if isinstance(nics, Refusal):
            return nics
        return gpus, nics

    def _allocate(
        self, node: str, cycle: _Cycle, usage: Mapping[int, GPUUsage] | None = None
    ) -> list[Allocation] | None:
        gpus: list[GPU] = self.store.gpus(node)
        hint, request = cycle.hint, cycle.request
        assert request is not None
        if hint is not None and hint.selector is not None:
            selector = hint.selector
            gpus = [g for g in gpus if selector.matches(g.labels)]
        if usage is None:
            usage = self.store.usage(node)
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
        return allocate(
            gpus,
            usage,
            request,
            self.args.scoring_strategy.type,
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
        insufficient = ~snapshot.rows_named(rows, fitting) & ~without_device
        by_refusal: dict[Refusal, set[str]] = {}
        for node, refusal in cycle.refusals.items():
            if node not in fitting:
                by_refusal.setdefault(refusal, set()).add(node)
        rejections: list[tuple[str, BoolArray]] = []
        unresolvable = np.zeros(rows.size, dtype=np.bool_)
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
        victims: dict[str, set[str]] = {}
        for uid in self.store.holders():
            if snapshot.is_withdrawn(uid):
                held = self.store.held(uid)
                if held is not None:
                    victims.setdefault(held[0], set()).add(uid)
        if not victims:
            return cycle.fitting
        freed = {
            node
            for node, uids in victims.items()
            if node in cycle.with_device
            and not isinstance(
                self._allocate_all(
                    node,
                    cycle,
                    self.store.usage_without(node, uids),
                    self.store.rdma_usage_without(node, uids),
                ),
                Refusal,
            )
        }
        return cycle.fitting | freed

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
        if cycle is None:
            return scores
        strategy = self.args.scoring_strategy.type
        names = snapshot.table.names
        for i, row in enumerate(rows.tolist()):
            node = names[row]
            gpus = self.store.gpus(node)
            if gpus and cycle.request is not None:
                scores[i] = node_score(gpus, self.store.usage(node), cycle.request, strategy, self.weights)
            scores[i] += self._rdma_score(node, cycle)
        return scores

    def _rdma_score(self, node: str, cycle: _Cycle) -> int:
        """Koordinator adds each device type's node score."""
        ask = cycle.rdma
        if ask is None or (ask.secondary and self.store.secondary_well_planned(node)):
            return 0
        nics = self.store.rdmas(node)
        per_nic = wanted(ask.quantity, ask.hint, nics)
        if isinstance(per_nic, Refusal):
            return 0
        strategy = self.args.scoring_strategy.type
        return rdma_node_score(nics, self.store.rdma_usage(node), per_nic[0], strategy, self.rdma_weight)

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
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
        got = self._allocate_all(node, cycle, reserve=True)
        if isinstance(got, Refusal):
            return Status.unschedulable(got.reason)
        allocations, nics = got
        self.store.hold(pod.uid, node, allocations, assumed=True, rdma=nics)
        state.write(_ALLOCATED, (node, tuple(allocations)))
        state.write(_RDMA_ALLOCATED, tuple(nics))
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if state.get(_ALLOCATED) is not None:
            self.store.release(pod.uid)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        allocated = state.get(_ALLOCATED)
        if allocated is None:
            return Status.success()
        nics = state.get(_RDMA_ALLOCATED)
        value = allocated_annotation(allocated[1], nics or ())
        try:
            await self.handle.backend.patch_pod(
                pod.pod, {"metadata": {"annotations": {ANNOTATION_DEVICE_ALLOCATED: value}}}
            )
        except BackendError as exc:
            return Status.error(f"writing {ANNOTATION_DEVICE_ALLOCATED} on {pod.key}: {exc}")
        return Status.success()


def allocated_annotation(allocations: Sequence[Allocation], rdma: Sequence[RDMAAllocation] = ()) -> str:
    """Koordinator's ``device-allocated`` JSON: GPU entries carry gpu-core, gpu-memory and ratio;
    rdma entries their amount and VF (rdma.rdma_entries)."""
    gpu = [
        {
            "minor": a.minor,
            "resources": {
                RESOURCE_GPU_CORE: str(a.usage.core),
                RESOURCE_GPU_MEMORY: str(Quantity.from_int(a.usage.memory, Format.BINARY_SI)),
                RESOURCE_GPU_MEMORY_RATIO: str(a.usage.ratio),
            },
        }
        for a in allocations
    ]
    value: dict[str, object] = {"gpu": gpu} if gpu else {}
    if rdma:
        value["rdma"] = rdma_entries(rdma)
    return json.dumps(value, separators=(",", ":"))


def new(args: DeviceShareArgs | None, handle: Handle) -> DeviceShare:
    return DeviceShare(args or DeviceShareArgs(), handle)
