"""A node's device resources from its Device object, as Koordinator's device resource plugins sync them.

koord-manager puts the sums over the node's *healthy* devices into ``node.status.allocatable`` and
``capacity``: ``koordinator.sh/gpu-core``, ``gpu-memory`` and ``gpu-memory-ratio`` over the GPUs
(NVIDIA, Cambricon MLUs, and the memory of Ascend NPUs), ``huawei.com/npu-core``, ``npu-cpu`` and
``npu-dvpp`` over the NPUs, and ``koordinator.sh/rdma`` over the RDMA NICs. A resource no healthy
device offers any more, or a node whose Device is gone, loses the name (a null in the merge
patch). Other resources, ``nvidia.com/gpu`` included (a device plugin's), are left alone. The
Device's vendor, model and driver labels are copied onto the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.extension import device as ext
from apis.quantity import Format, Quantity
from apis.scheduling.device import Device

__all__ = ["DEVICE_RESOURCES", "NODE_LABELS", "device_resources", "label_patch", "status_patch"]

_GPU_RESOURCES = (
    ext.RESOURCE_GPU_CORE,
    ext.RESOURCE_GPU_MEMORY,
    ext.RESOURCE_GPU_MEMORY_RATIO,
    ext.RESOURCE_HUAWEI_NPU_CORE,
    ext.RESOURCE_HUAWEI_NPU_CPU,
    ext.RESOURCE_HUAWEI_NPU_DVPP,
)
_BY_TYPE: Mapping[str, tuple[str, ...]] = {"gpu": _GPU_RESOURCES, "rdma": (ext.RESOURCE_RDMA,)}
DEVICE_RESOURCES: tuple[str, ...] = (
    ext.RESOURCE_GPU,
    ext.RESOURCE_GPU_SHARED,
    *_GPU_RESOURCES,
    ext.RESOURCE_RDMA,
)
"""The node resources koord-manager owns."""
NODE_LABELS: tuple[str, ...] = (ext.LABEL_GPU_VENDOR, ext.LABEL_GPU_MODEL, ext.LABEL_GPU_DRIVER_VERSION)


def device_resources(device: Device | None) -> dict[str, Quantity]:
    """Sums over the healthy devices; empty for no Device."""
    totals: dict[str, Quantity] = {}
    koord_gpu, healthy_gpus = 0, 0
    for info in (device.spec.devices or []) if device and device.spec else []:
        if not info.health:
            continue
        if info.type == "gpu":
            healthy_gpus += 1
            core = (info.resources or {}).get(ext.RESOURCE_GPU_CORE)
            koord_gpu += core.value() if core is not None else 0
        for name in _BY_TYPE.get(info.type or "", ()):
            quantity = (info.resources or {}).get(name)
            if quantity is None:
                continue
            totals[name] = totals[name] + quantity if name in totals else quantity
    if ext.RESOURCE_GPU_MEMORY in totals:
        totals[ext.RESOURCE_GPU_MEMORY] = Quantity.from_int(
            totals[ext.RESOURCE_GPU_MEMORY].value(), Format.BINARY_SI
        )
    if healthy_gpus:
        totals[ext.RESOURCE_GPU] = Quantity.from_int(koord_gpu, Format.DECIMAL_SI)
        totals[ext.RESOURCE_GPU_SHARED] = Quantity.from_int(healthy_gpus * 100, Format.DECIMAL_SI)
    return totals


def _field_patch(wanted: Mapping[str, Quantity], current: Mapping[str, Any]) -> dict[str, str | None]:
    patch: dict[str, str | None] = {}
    for name in DEVICE_RESOURCES:
        have = current.get(name)
        if name in wanted:
            if have is None or Quantity.parse(str(have)) != wanted[name]:
                patch[name] = str(wanted[name])
        elif have is not None:
            patch[name] = None
    return patch


def status_patch(
    device: Device | None, capacity: Mapping[str, Any] | None, allocatable: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """A merge patch of the node's status subresource; None when it is already right."""
    wanted = device_resources(device)
    patch: dict[str, Any] = {}
    for field, current in (("capacity", capacity), ("allocatable", allocatable)):
        changes = _field_patch(wanted, current or {})
        if changes:
            patch[field] = changes
    return {"status": patch} if patch else None


def label_patch(device: Device | None, labels: Mapping[str, str] | None) -> dict[str, Any] | None:
    """A merge patch of the node's labels with the Device's vendor, model and driver; None when the
    node has them (a node keeps them when its Device goes: a scheduler's selector may name them)."""
    wanted = {k: v for k, v in ((device.metadata.labels or {}) if device else {}).items() if k in NODE_LABELS}
    changes = {k: v for k, v in wanted.items() if (labels or {}).get(k) != v}
    return {"metadata": {"labels": changes}} if changes else None
