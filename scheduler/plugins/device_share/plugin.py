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
from datetime import UTC, datetime

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
from scheduler.backend.base import DEVICES, NODES, PODS, BackendError, WatchEvent
from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import MAX_NODE_SCORE, ClusterEvent, FilterResult, PreFilterResult
from scheduler.framework.rbac import PolicyRule
from scheduler.framework.status import Status
from scheduler.plugins.device_share.adapter import BindContext, adapt
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
from scheduler.plugins.device_share.npu import npu_resources
from scheduler.plugins.device_share.partition import choose_partition
from scheduler.plugins.device_share.request import GPURequest, InvalidGPURequest, gpu_request
from scheduler.plugins.device_share.store import DeviceStore, allocations_of
from scheduler.plugins.device_share.templates import (
    CONFIGMAPS,
    ERR_NO_MATCHED_TEMPLATE,
    TemplateCache,
    per_card_resources,
    template_key,
)

__all__ = ["ERR_INSUFFICIENT_GPU", "ERR_ISOLATION_PROVIDER", "NAME", "RBAC", "DeviceShare", "new"]

log = logging.getLogger(__name__)

NAME = "DeviceShare"
RBAC: tuple[PolicyRule, ...] = (
    PolicyRule.watching(DEVICES, why="each node's GPUs, from its Device object."),
    PolicyRule.watching(CONFIGMAPS, why="GPU shared-resource templates (vNPU shapes) from their ConfigMap."),
    PolicyRule.on(NODES, "patch", why="the Cambricon dynamic-sMLU node lock (DevicePluginAdaption)."),
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
    templates: dict[str, list[str]] | None = None
    """``<vendor>-<model>`` -> the shared-resource templates the request equals (None: not enforced)."""
    no_template: frozenset[str] = frozenset()
    """Nodes with a Device whose model has no matching template."""


_CYCLE = StateKey[_Cycle]("DeviceShare/cycle")
_ALLOCATED = StateKey[tuple[str, tuple[Allocation, ...]]]("DeviceShare/allocated")
_TEMPLATE = StateKey[str]("DeviceShare/template")


class DeviceShare:
    def __init__(self, args: DeviceShareArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.store = DeviceStore()
        weight = {spec.name: spec.weight for spec in args.scoring_strategy.resources}
        self.weights: Weights = (weight.get(RESOURCE_GPU_MEMORY_RATIO, 0), weight.get(RESOURCE_GPU_MEMORY, 0))
        self.templates = TemplateCache(args.gpu_shared_resource_templates_config)
        handle.subscribe(DEVICES, self._on_device)
        handle.subscribe(CONFIGMAPS, self.templates.on_event)
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
        per_card = per_card_resources(request)
        if self.templates.enforced(per_card, not request.whole):
            cycle.templates = self.templates.matched(per_card)
            if not cycle.templates:
                return PreFilterResult(Status.unresolvable(ERR_NO_MATCHED_TEMPLATE))
            cycle.no_template = frozenset(
                node for node in self.store.has_device if self._template_key(node) not in cycle.templates
            )
        cycle.fitting = frozenset(
            node for node in self.store.has_device if self._allocate(node, cycle) is not None
        )
        state.write(_CYCLE, cycle)
        return PreFilterResult()

    def _template_key(self, node: str) -> str:
        return template_key(*self.store.vendor_model(node))

    def _allocate(
        self, node: str, cycle: _Cycle, usage: Mapping[int, GPUUsage] | None = None
    ) -> list[Allocation] | None:
        if node in cycle.no_template:
            return None
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
        insufficient = ~snapshot.rows_named(rows, self._fitting(cycle, snapshot)) & ~without_device
        no_template = snapshot.rows_named(rows, cycle.no_template)
        insufficient &= ~no_template
        rejections = [(ERR_INSUFFICIENT_GPU, insufficient), (ERR_NO_MATCHED_TEMPLATE, no_template)]
        unresolvable = no_template.copy()
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
        strategy = self.args.scoring_strategy.type
        names = snapshot.table.names
        for i, row in enumerate(rows.tolist()):
            node = names[row]
            gpus = self.store.gpus(node)
            if gpus:
                scores[i] = node_score(gpus, self.store.usage(node), cycle.request, strategy, self.weights)
        return scores

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
        allocations = self._allocate(node, cycle)
        if allocations is None:
            return Status.unschedulable(ERR_INSUFFICIENT_GPU)
        self.store.hold(pod.uid, node, allocations, assumed=True)
        state.write(_ALLOCATED, (node, tuple(allocations)))
        names = (cycle.templates or {}).get(self._template_key(node), [])
        if len(names) == 1:
            # Several matching templates: Koordinator leaves the choice to the device plugin (no tag).
            state.write(_TEMPLATE, names[0])
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if state.get(_ALLOCATED) is not None:
            self.store.release(pod.uid)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        allocated = state.get(_ALLOCATED)
        if allocated is None:
            return Status.success()
        template = state.get(_TEMPLATE)
        metadata: dict[str, dict[str, str]] = {
            "annotations": {ANNOTATION_DEVICE_ALLOCATED: allocated_annotation(allocated[1], template)}
        }
        if self.handle.features.device_plugin_adaption:
            refused = await self._adapt(pod, node, allocated[1], template, metadata)
            if refused is not None:
                return refused
        try:
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


def allocated_annotation(allocations: Sequence[Allocation], template: str | None = None) -> str:
    """Koordinator's ``device-allocated`` JSON: GPU entries carry gpu-core, gpu-memory and ratio (an
    NPU's carry its npu-* amounts instead of gpu-core), and the shared-resource template if any."""
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
    return json.dumps({"gpu": gpu}, separators=(",", ":"))


def new(args: DeviceShareArgs | None, handle: Handle) -> DeviceShare:
    return DeviceShare(args or DeviceShareArgs(), handle)
