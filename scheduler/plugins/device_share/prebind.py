"""PreBind's writes: the ``device-allocated`` annotation on the pod (on the Reservation for a
reserve pod), with what vendors' device plugins read (adapter.py) and their node lock.

A pod's annotations travel on its Binding (``BIND_ANNOTATIONS``, which DefaultBinder sends and the
API server copies onto the pod), as NodeNUMAResource's and Coscheduling's do: one write per GPU
pod instead of two, one watch event fewer for every informer of pods, and no pod bound without
its cards' record (nor a record left on a pod whose binding failed). Koordinator's DefaultPreBind
patches them just before the Binding. Labels a vendor's device plugin reads cannot ride on a
Binding: with those the pod is patched first, as before."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from apis.client.backend import NODES, RESERVATIONS, BackendError
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from apis.extension.reservation import is_reserve_pod
from scheduler.cache.pod_info import PodInfo
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.extensions import carry_on_binding
from scheduler.framework.handle import Handle
from scheduler.framework.status import Status
from scheduler.plugins.device_share.adapter import BindContext, adapt
from scheduler.plugins.device_share.allocator import Allocation
from scheduler.plugins.device_share.annotation import allocated_annotation
from scheduler.plugins.device_share.rdma import RDMAAllocation
from scheduler.plugins.device_share.store import DeviceStore

__all__ = ["write_allocation"]


async def write_allocation(
    handle: Handle,
    store: DeviceStore,
    state: CycleState,
    pod: PodInfo,
    node: str,
    allocations: Sequence[Allocation],
    nics: Sequence[RDMAAllocation],
    template: str | None,
) -> Status:
    value = allocated_annotation(allocations, nics, template)
    metadata: dict[str, dict[str, str]] = {"annotations": {ANNOTATION_DEVICE_ALLOCATED: value}}
    reserve_pod = is_reserve_pod(pod.annotations)
    if handle.features.device_plugin_adaption and not reserve_pod:
        refused = await _adapt(handle, store, pod, node, allocations, template, metadata)
        if refused is not None:
            return refused
    if not reserve_pod and "labels" not in metadata:
        carry_on_binding(state, metadata["annotations"])
        return Status.success()
    try:
        if reserve_pod:
            # Koordinator records a reservation's cards on the Reservation object.
            await handle.backend.patch_custom(RESERVATIONS, None, pod.name, {"metadata": metadata})
        else:
            await handle.backend.patch_pod(pod.pod, {"metadata": metadata})
    except BackendError as exc:
        return Status.error(f"writing {ANNOTATION_DEVICE_ALLOCATED} on {pod.key}: {exc}")
    return Status.success()


async def _adapt(
    handle: Handle,
    store: DeviceStore,
    pod: PodInfo,
    node: str,
    allocations: Sequence[Allocation],
    template: str | None,
    metadata: dict[str, dict[str, str]],
) -> Status | None:
    """Adds what vendors' device plugins read to ``metadata`` (and locks the node when the
    vendor needs it); a Status when the bind must fail."""
    info = handle.snapshot().node(node)
    node_obj = info.node if info is not None else None
    vendor, model = store.vendor_model(node)
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
            await handle.backend.patch_custom(NODES, None, node, patch)
        except BackendError as exc:
            return Status.error(f"locking node {node}: {exc}")
    return None
