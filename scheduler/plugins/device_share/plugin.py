"""DeviceShare: GPUs allocated by card (whole or shared), written to the pod as ``device-allocated``.

PreFilter parses the pod's GPU request (a pod asking for none skips the plugin) and runs the
allocator on every node that has a Device, so that Filter only masks rows by name; Score rates
nodes with the scoring strategy; Reserve picks the cards and holds them in the store, Unreserve
gives them back, and PreBind writes Koordinator's annotation ``{"gpu": [{"minor": 0, "resources":
{...}}]}``. The store is beside the cache: it also reads bound pods' annotations on the pod watch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
    DeviceHint,
    GPUPartitionSpec,
    get_device_allocate_hints,
    get_device_allocations,
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
    ScoringType,
    Weights,
    allocate,
    fits,
    node_score,
    take,
)
from scheduler.plugins.device_share.args import DeviceShareArgs, FragmentationArgs
from scheduler.plugins.device_share.fragmentation_strategy import FragmentationStrategy
from scheduler.plugins.device_share.partition import choose_partition
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
    request: GPURequest
    hint: DeviceHint | None
    partition_spec: GPUPartitionSpec | None
    honor_partitions: frozenset[str]
    """Nodes labelled ``gpu-partition-policy: Honor`` (their Device may carry the label instead)."""
    fitting: frozenset[str]
    """Nodes whose cards can hold the request now."""
    with_device: frozenset[str]


_CYCLE = StateKey[_Cycle]("DeviceShare/cycle")
_ALLOCATED = StateKey[tuple[str, tuple[Allocation, ...]]]("DeviceShare/allocated")


class DeviceShare:
    def __init__(self, args: DeviceShareArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.store = DeviceStore()
        weight = {spec.name: spec.weight for spec in args.scoring_strategy.resources}
        self.weights: Weights = (weight.get(RESOURCE_GPU_MEMORY_RATIO, 0), weight.get(RESOURCE_GPU_MEMORY, 0))
        strategy = args.scoring_strategy
        self.fragmentation: FragmentationStrategy | None = None
        self.card_order: ScoringType = "MostAllocated"
        """How the allocator ranks cards (Fragmentation bin-packs those it does not pick itself)."""
        if strategy.type == "Fragmentation":
            self.fragmentation = FragmentationStrategy(strategy.fragmentation or FragmentationArgs())
        else:
            self.card_order = strategy.type
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
        self.store.hold(uid, node, allocations_of(allocated), assumed=False)

    # ---- PreFilter / Filter ----

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        try:
            request = gpu_request(pod.requests)
        except InvalidGPURequest as exc:
            return PreFilterResult(Status.unresolvable(f"invalid GPU request: {exc}"))
        if request is None or is_reserve_pod(pod.annotations):
            # A reservation's reserve pod holds GPU counts (NodeResourcesFit) but no specific cards
            # yet: its owners are given cards when they are scheduled.
            return PreFilterResult(Status.skip())
        try:
            hints = get_device_allocate_hints(pod.annotations)
            partition_spec = get_gpu_partition_spec(pod.annotations)
        except InvalidAnnotation as exc:
            return PreFilterResult(Status.unresolvable(str(exc)))
        honor_rows = snapshot.label_values(LABEL_GPU_PARTITION_POLICY).get(GPU_PARTITION_POLICY_HONOR, set())
        names = snapshot.table.names
        cycle = _Cycle(
            request,
            (hints or {}).get("gpu"),
            partition_spec,
            frozenset(names[row] for row in honor_rows),
            frozenset(),
            frozenset(self.store.has_device),
        )
        cycle.fitting = frozenset(
            node for node in self.store.has_device if self._allocate(node, cycle) is not None
        )
        state.write(_CYCLE, cycle)
        if self.fragmentation is not None:
            self.fragmentation.observe(pod.uid, request)
        return PreFilterResult()

    def _allocate(
        self, node: str, cycle: _Cycle, usage: Mapping[int, GPUUsage] | None = None, *, choosing: bool = False
    ) -> list[Allocation] | None:
        """The cards the pod would get on ``node``; ``choosing``: Reserve's final choice (the
        Fragmentation strategy's card then, any fitting card is as good for Filter)."""
        gpus: list[GPU] = self.store.gpus(node)
        hint, request = cycle.hint, cycle.request
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
        insufficient = ~snapshot.rows_named(rows, self._fitting(cycle, snapshot)) & ~without_device
        rejections = [(ERR_INSUFFICIENT_GPU, insufficient)]
        unresolvable = np.zeros(rows.size, dtype=np.bool_)
        if not cycle.request.whole:
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
            and self._allocate(node, cycle, self.store.usage_without(node, uids)) is not None
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
        names = snapshot.table.names
        if self.fragmentation is not None:
            nodes = [names[row] for row in rows.tolist()]
            any_card = [self._any_card(n, cycle) for n in nodes]
            return self.fragmentation.scores(
                cycle.request,
                [(self._gpus(n, cycle), self.store.usage(n)) for n in nodes],
                [None if free else self._allocate(n, cycle) for n, free in zip(nodes, any_card, strict=True)],
                any_card,
            )
        strategy = self.card_order
        for i, row in enumerate(rows.tolist()):
            node = names[row]
            gpus = self.store.gpus(node)
            if gpus:
                scores[i] = node_score(gpus, self.store.usage(node), cycle.request, strategy, self.weights)
        return scores

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
            cycle.request.whole
            and bool(self.store.partitions(node))
            and (honor or cycle.partition_spec is not None)
        )

    def _any_card(self, node: str, cycle: _Cycle) -> bool:
        """Whether the scoring strategy picks the card: one card, no scope to keep, no partition."""
        scope = cycle.hint.required_topology_scope if cycle.hint else None
        return (
            cycle.request.count == 1
            and scope in (None, "Device", "Node")
            and not self._partitioned(node, cycle)
        )

    def normalize_scores(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        if self.fragmentation is not None:
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
        allocations = self._allocate(node, cycle, choosing=True)
        if allocations is None:
            return Status.unschedulable(ERR_INSUFFICIENT_GPU)
        self.store.hold(pod.uid, node, allocations, assumed=True)
        state.write(_ALLOCATED, (node, tuple(allocations)))
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if state.get(_ALLOCATED) is not None:
            self.store.release(pod.uid)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        allocated = state.get(_ALLOCATED)
        if allocated is None:
            return Status.success()
        value = allocated_annotation(allocated[1])
        try:
            await self.handle.backend.patch_pod(
                pod.pod, {"metadata": {"annotations": {ANNOTATION_DEVICE_ALLOCATED: value}}}
            )
        except BackendError as exc:
            return Status.error(f"writing {ANNOTATION_DEVICE_ALLOCATED} on {pod.key}: {exc}")
        return Status.success()


def allocated_annotation(allocations: Sequence[Allocation]) -> str:
    """Koordinator's ``device-allocated`` JSON: GPU entries carry gpu-core, gpu-memory and ratio."""
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
    return json.dumps({"gpu": gpu}, separators=(",", ":"))


def new(args: DeviceShareArgs | None, handle: Handle) -> DeviceShare:
    return DeviceShare(args or DeviceShareArgs(), handle)
