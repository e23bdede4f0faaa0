"""Device share: resource names, labels and annotations (api-reference 2.5).

Koordinator defines no ``cambricon.com/*`` resource names: Cambricon and MetaX GPUs are requested
with the generic ``koordinator.sh/gpu-*`` resources, and the vendor adapter (scheduler feature gate
``DevicePluginAdaption``) writes the vendor annotations listed at the end of this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BeforeValidator, Field, TypeAdapter

from apis.base import KoordModel
from apis.extension._annotation import EmptyAsNone, NonNegativeResourceList, lookup, parse_json
from apis.meta import CheckedLabelSelector
from apis.quantity import Quantity
from apis.types import Int32, NonNegativeInt32

__all__ = [
    "ANNOTATION_BIND_TIMESTAMP",
    "ANNOTATION_CAMBRICON_DSMLU_ASSIGNED",
    "ANNOTATION_CAMBRICON_DSMLU_LOCK",
    "ANNOTATION_CAMBRICON_DSMLU_PROFILE",
    "ANNOTATION_DEVICE_ALLOCATED",
    "ANNOTATION_DEVICE_ALLOCATE_HINT",
    "ANNOTATION_DEVICE_JOINT_ALLOCATE",
    "ANNOTATION_GPU_MINORS",
    "ANNOTATION_GPU_PARTITIONS",
    "ANNOTATION_GPU_PARTITION_SPEC",
    "ANNOTATION_HAMI_LOCK",
    "ANNOTATION_HUAWEI_ASCEND_310P",
    "ANNOTATION_HUAWEI_NPU_CORE",
    "ANNOTATION_HYGON_DCU_DEVICES_ALLOCATED",
    "ANNOTATION_METAX_GPU_DEVICES_ALLOCATED",
    "ANNOTATION_PREDICATE_TIME",
    "DEPRECATED_DEVICE_RESOURCE_ALIASES",
    "DEPRECATED_LABEL_GPU_DRIVER",
    "DEPRECATED_LABEL_GPU_MODEL",
    "DEPRECATED_RESOURCE_FPGA",
    "DEPRECATED_RESOURCE_GPU",
    "DEPRECATED_RESOURCE_GPU_CORE",
    "DEPRECATED_RESOURCE_GPU_MEMORY",
    "DEPRECATED_RESOURCE_GPU_MEMORY_RATIO",
    "DEPRECATED_RESOURCE_RDMA",
    "DEVICE_TOPOLOGY_SCOPE_LEVEL",
    "GPU_ISOLATION_PROVIDER_HAMI_CORE",
    "GPU_PARTITION_POLICY_HONOR",
    "GPU_PARTITION_POLICY_PREFER",
    "GPU_VENDORS",
    "GPU_VENDOR_BAIDU",
    "GPU_VENDOR_CAMBRICON",
    "GPU_VENDOR_HUAWEI",
    "GPU_VENDOR_HYGON",
    "GPU_VENDOR_METAX",
    "GPU_VENDOR_NVIDIA",
    "LABEL_GPU_DRIVER_VERSION",
    "LABEL_GPU_ISOLATION_PROVIDER",
    "LABEL_GPU_MODEL",
    "LABEL_GPU_PARTITION_POLICY",
    "LABEL_GPU_VENDOR",
    "LABEL_HAMI_VGPU_NODE",
    "LABEL_SECONDARY_DEVICE_WELL_PLANNED",
    "RESOURCE_AMD_GPU",
    "RESOURCE_FPGA",
    "RESOURCE_GPU",
    "RESOURCE_GPU_CORE",
    "RESOURCE_GPU_MEMORY",
    "RESOURCE_GPU_MEMORY_RATIO",
    "RESOURCE_GPU_SHARED",
    "RESOURCE_HUAWEI_NPU_CORE",
    "RESOURCE_HUAWEI_NPU_CPU",
    "RESOURCE_HUAWEI_NPU_DVPP",
    "RESOURCE_HYGON_DCU",
    "RESOURCE_NVIDIA_GPU",
    "RESOURCE_RDMA",
    "DeviceAllocateHints",
    "DeviceAllocateStrategy",
    "DeviceAllocation",
    "DeviceAllocationExtension",
    "DeviceAllocations",
    "DeviceExclusivePolicy",
    "DeviceHint",
    "DeviceJointAllocate",
    "DeviceTopologyScope",
    "GPUPartition",
    "GPUPartitionAllocatePolicy",
    "GPUPartitionPolicy",
    "GPUPartitionSpec",
    "GPUPartitionTable",
    "VirtualFunction",
    "canonical_device_resource",
    "get_device_allocate_hints",
    "get_device_allocations",
    "get_device_joint_allocate",
    "get_gpu_partition_spec",
    "get_gpu_partition_table",
    "gpu_partition_policy",
    "is_secondary_device_well_planned",
    "parse_device_allocate_hints",
    "parse_device_allocations",
    "parse_device_joint_allocate",
    "parse_gpu_partition_spec",
    "parse_gpu_partition_table",
    "transform_deprecated_device_resources",
]

_V = TypeVar("_V")
_SCHED = "scheduling.koordinator.sh"
_NODE = "node.koordinator.sh"

# --- resource names -------------------------------------------------------------------------------

RESOURCE_GPU = "koordinator.sh/gpu"
"""Percent of whole GPUs (100 = one card); converts to gpu-core and gpu-memory-ratio."""
RESOURCE_GPU_CORE = "koordinator.sh/gpu-core"
RESOURCE_GPU_MEMORY = "koordinator.sh/gpu-memory"
"""GPU memory in bytes."""
RESOURCE_GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
RESOURCE_GPU_SHARED = "koordinator.sh/gpu.shared"
"""Number of GPUs a shared request spreads over. Note the dot (compat note 2)."""
RESOURCE_RDMA = "koordinator.sh/rdma"
RESOURCE_FPGA = "koordinator.sh/fpga"
RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_AMD_GPU = "amd.com/gpu"
RESOURCE_HYGON_DCU = "dcu.com/gpu"
RESOURCE_HUAWEI_NPU_CORE = "huawei.com/npu-core"
RESOURCE_HUAWEI_NPU_CPU = "huawei.com/npu-cpu"
RESOURCE_HUAWEI_NPU_DVPP = "huawei.com/npu-dvpp"

DEPRECATED_RESOURCE_GPU = "kubernetes.io/gpu"
DEPRECATED_RESOURCE_GPU_CORE = "kubernetes.io/gpu-core"
DEPRECATED_RESOURCE_GPU_MEMORY = "kubernetes.io/gpu-memory"
DEPRECATED_RESOURCE_GPU_MEMORY_RATIO = "kubernetes.io/gpu-memory-ratio"
DEPRECATED_RESOURCE_RDMA = "kubernetes.io/rdma"
DEPRECATED_RESOURCE_FPGA = "kubernetes.io/fpga"

DEPRECATED_DEVICE_RESOURCE_ALIASES: Mapping[str, str] = {
    DEPRECATED_RESOURCE_RDMA: RESOURCE_RDMA,
    DEPRECATED_RESOURCE_FPGA: RESOURCE_FPGA,
    DEPRECATED_RESOURCE_GPU: RESOURCE_GPU,
    DEPRECATED_RESOURCE_GPU_CORE: RESOURCE_GPU_CORE,
    DEPRECATED_RESOURCE_GPU_MEMORY: RESOURCE_GPU_MEMORY,
    DEPRECATED_RESOURCE_GPU_MEMORY_RATIO: RESOURCE_GPU_MEMORY_RATIO,
}
"""Deprecated ``kubernetes.io/`` device resource name -> canonical ``koordinator.sh/`` name."""


def canonical_device_resource(name: str) -> str:
    """The canonical name of a device resource (deprecated aliases mapped, others unchanged)."""
    return DEPRECATED_DEVICE_RESOURCE_ALIASES.get(name, name)


def transform_deprecated_device_resources(resources: Mapping[str, _V]) -> dict[str, _V]:
    """A container's (or the overhead's) resource list with the deprecated ``kubernetes.io/`` device
    names renamed, as koord-scheduler's pod informer transformer rewrites every pod it sees; a
    deprecated name whose canonical name is also in the list stays as it is."""
    out = dict(resources)
    for old, new in DEPRECATED_DEVICE_RESOURCE_ALIASES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


# --- labels ----------------------------------------------------------------------------------------

LABEL_GPU_PARTITION_POLICY = _NODE + "/gpu-partition-policy"
LABEL_GPU_VENDOR = _NODE + "/gpu-vendor"
LABEL_GPU_MODEL = _NODE + "/gpu-model"
LABEL_GPU_DRIVER_VERSION = _NODE + "/gpu-driver-version"
LABEL_SECONDARY_DEVICE_WELL_PLANNED = _NODE + "/secondary-device-well-planned"
LABEL_GPU_ISOLATION_PROVIDER = "koordinator.sh/gpu-isolation-provider"
DEPRECATED_LABEL_GPU_DRIVER = "kubernetes.io/gpu-driver"
DEPRECATED_LABEL_GPU_MODEL = "kubernetes.io/gpu-model"
LABEL_HAMI_VGPU_NODE = "hami.io/vgpu-node"
"""Pod label written by the adapter for HAMi-core pods: the node name."""

GPU_ISOLATION_PROVIDER_HAMI_CORE = "HAMi-core"

GPU_VENDOR_NVIDIA = "nvidia"
GPU_VENDOR_HUAWEI = "huawei"
GPU_VENDOR_CAMBRICON = "cambricon"
GPU_VENDOR_METAX = "metax"
GPU_VENDOR_BAIDU = "baidu"
GPU_VENDOR_HYGON = "hygon"
GPU_VENDORS: tuple[str, ...] = (
    GPU_VENDOR_NVIDIA,
    GPU_VENDOR_HUAWEI,
    GPU_VENDOR_CAMBRICON,
    GPU_VENDOR_METAX,
    GPU_VENDOR_BAIDU,
    GPU_VENDOR_HYGON,
)

GPUPartitionPolicy = Literal["Honor", "Prefer"]
GPU_PARTITION_POLICY_HONOR: GPUPartitionPolicy = "Honor"
GPU_PARTITION_POLICY_PREFER: GPUPartitionPolicy = "Prefer"


def gpu_partition_policy(labels: Mapping[str, str] | None) -> GPUPartitionPolicy:
    """``Honor`` only for the exact label value ``Honor``; anything else (or nothing) means ``Prefer``."""
    if lookup(labels, LABEL_GPU_PARTITION_POLICY) == GPU_PARTITION_POLICY_HONOR:
        return GPU_PARTITION_POLICY_HONOR
    return GPU_PARTITION_POLICY_PREFER


def is_secondary_device_well_planned(labels: Mapping[str, str] | None) -> bool:
    return lookup(labels, LABEL_SECONDARY_DEVICE_WELL_PLANNED) == "true"


# --- annotations -----------------------------------------------------------------------------------

ANNOTATION_DEVICE_ALLOCATED = _SCHED + "/device-allocated"
ANNOTATION_DEVICE_ALLOCATE_HINT = _SCHED + "/device-allocate-hint"
ANNOTATION_DEVICE_JOINT_ALLOCATE = _SCHED + "/device-joint-allocate"
ANNOTATION_GPU_PARTITION_SPEC = _SCHED + "/gpu-partition-spec"
ANNOTATION_GPU_PARTITIONS = _SCHED + "/gpu-partitions"

# Adapter-written outputs (only with the scheduler feature gate DevicePluginAdaption).
ANNOTATION_BIND_TIMESTAMP = _SCHED + "/bind-timestamp"
"""Unix nanoseconds of the bind, for device plugins."""
ANNOTATION_GPU_MINORS = _SCHED + "/gpu-minors"
"""Comma-separated GPU minors, e.g. ``"0,1"``."""
ANNOTATION_PREDICATE_TIME = "predicate-time"
"""Huawei: unix nanoseconds."""
ANNOTATION_HUAWEI_NPU_CORE = "huawei.com/npu-core"
"""Huawei: ``"<minor>-<template>"`` for a vNPU or the comma-joined minors for whole NPUs."""
ANNOTATION_HUAWEI_ASCEND_310P = "huawei.com/Ascend310P"
"""Huawei model Ascend-310P3-300I-DUO: ``Ascend310P-<minor>,...``."""
ANNOTATION_CAMBRICON_DSMLU_ASSIGNED = "CAMBRICON_DSMLU_ASSIGHED"
"""Cambricon, always ``"false"`` when written. The misspelling is Koordinator's and is kept verbatim."""
ANNOTATION_CAMBRICON_DSMLU_PROFILE = "CAMBRICON_DSMLU_PROFILE"
"""Cambricon: ``"<minor>_<vcore>_<vmemory in 256MiB units>"``."""
ANNOTATION_CAMBRICON_DSMLU_LOCK = "cambricon.com/dsmlu.lock"
"""Node lock ``"<RFC3339 time>,<podNamespace>,<podName>"``; stale after 5 minutes."""
ANNOTATION_HAMI_LOCK = "hami.io/mutex.lock"
"""Node lock used for MetaX, same format as the Cambricon lock."""
ANNOTATION_METAX_GPU_DEVICES_ALLOCATED = "metax-tech.com/gpu-devices-allocated"
ANNOTATION_HYGON_DCU_DEVICES_ALLOCATED = "hami.io/dcu-devices-allocated"

# --- device-allocated ------------------------------------------------------------------------------


class VirtualFunction(KoordModel):
    minor: Int32 | None = None
    """As the Device's VF minor: Koordinator's koordlet reports -1 for every VF, and its scheduler
    copies that here."""
    bus_id: str | None = Field(default=None, alias="busID")


class DeviceAllocationExtension(KoordModel):
    vfs: list[VirtualFunction] | None = None
    gpu_shared_resource_template: str | None = None
    """The vendor template name of a shared allocation (e.g. a Huawei vNPU template)."""


class DeviceAllocation(KoordModel):
    minor: NonNegativeInt32
    resources: NonNegativeResourceList
    id: str | None = None
    """A stable identifier such as a PCI bus id (used for RDMA, where the minor is meaningless)."""
    extension: DeviceAllocationExtension | None = None


DeviceAllocations = dict[str, list[DeviceAllocation]]
"""Device type (``gpu``, ``rdma``, ``fpga``) -> allocated devices."""

DEVICE_TYPES: tuple[str, ...] = ("gpu", "fpga", "rdma")
"""Koordinator's ``DeviceType`` values. Koordinator accepts any other key in ``device-allocated`` and
ignores it; so does this package, and :func:`unknown_device_types` names them for a warning."""


def unknown_device_types(allocations: DeviceAllocations) -> list[str]:
    """The keys of ``allocations`` that are not one of :data:`DEVICE_TYPES`, sorted."""
    return sorted(t for t in allocations if t not in DEVICE_TYPES)


_ALLOCATIONS: TypeAdapter[DeviceAllocations] = TypeAdapter(DeviceAllocations)


def parse_device_allocations(raw: str) -> DeviceAllocations:
    return parse_json(ANNOTATION_DEVICE_ALLOCATED, raw, _ALLOCATIONS)


def get_device_allocations(annotations: Mapping[str, str] | None) -> DeviceAllocations | None:
    """None only when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_DEVICE_ALLOCATED)
    return None if raw is None else parse_device_allocations(raw)


# --- device-allocate-hint --------------------------------------------------------------------------

DeviceAllocateStrategy = Literal["ApplyForAll", "RequestsAsCount"]
DeviceTopologyScope = Literal["Device", "PCIe", "NUMANode", "Node"]
DeviceExclusivePolicy = Literal["DeviceLevel", "PCIeLevel"]

DEVICE_TOPOLOGY_SCOPE_LEVEL: Mapping[DeviceTopologyScope, int] = {
    "Device": 4,
    "PCIe": 3,
    "NUMANode": 2,
    "Node": 1,
}
"""From the finest scope (Device, 4) to the coarsest (Node, 1)."""


class DeviceHint(KoordModel):
    selector: CheckedLabelSelector | None = None
    """Matches device labels; an unknown operator is refused, as Koordinator's
    ``LabelSelectorAsSelector`` refuses it."""
    vf_selector: CheckedLabelSelector | None = Field(default=None, alias="vfSelector")
    """Matches VF group labels; when set, VFs are allocated from matching PFs."""
    allocate_strategy: Annotated[DeviceAllocateStrategy | None, EmptyAsNone] = None
    required_topology_scope: Annotated[DeviceTopologyScope | None, EmptyAsNone] = None
    exclusive_policy: Annotated[DeviceExclusivePolicy | None, EmptyAsNone] = None


DeviceAllocateHints = dict[str, DeviceHint]
"""Device type -> hint."""

_HINTS: TypeAdapter[DeviceAllocateHints] = TypeAdapter(DeviceAllocateHints)


def parse_device_allocate_hints(raw: str) -> DeviceAllocateHints:
    return parse_json(ANNOTATION_DEVICE_ALLOCATE_HINT, raw, _HINTS)


def get_device_allocate_hints(annotations: Mapping[str, str] | None) -> DeviceAllocateHints | None:
    """None only when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_DEVICE_ALLOCATE_HINT)
    return None if raw is None else parse_device_allocate_hints(raw)


# --- device-joint-allocate -------------------------------------------------------------------------


class DeviceJointAllocate(KoordModel):
    device_types: list[str] | None = None
    """Device types allocated together according to topology, e.g. ``["gpu", "rdma"]``."""
    required_scope: Annotated[Literal["SamePCIe"] | None, EmptyAsNone] = None


def parse_device_joint_allocate(raw: str) -> DeviceJointAllocate:
    return parse_json(ANNOTATION_DEVICE_JOINT_ALLOCATE, raw, DeviceJointAllocate)


def get_device_joint_allocate(annotations: Mapping[str, str] | None) -> DeviceJointAllocate | None:
    """None only when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_DEVICE_JOINT_ALLOCATE)
    return None if raw is None else parse_device_joint_allocate(raw)


# --- gpu-partition-spec / gpu-partitions -----------------------------------------------------------

GPUPartitionAllocatePolicy = Literal["Restricted", "BestEffort"]


def _best_effort_if_empty(value: Any) -> Any:
    return "BestEffort" if value in ("", None) else value


class GPUPartitionSpec(KoordModel):
    allocate_policy: Annotated[GPUPartitionAllocatePolicy, BeforeValidator(_best_effort_if_empty)] = (
        "BestEffort"
    )
    """Restricted: only the partitions with the best allocationScore. Empty means BestEffort."""
    ring_bus_bandwidth: Quantity | None = None


def parse_gpu_partition_spec(raw: str) -> GPUPartitionSpec:
    return parse_json(ANNOTATION_GPU_PARTITION_SPEC, raw, GPUPartitionSpec)


def get_gpu_partition_spec(annotations: Mapping[str, str] | None) -> GPUPartitionSpec | None:
    """None only when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_GPU_PARTITION_SPEC)
    return None if raw is None else parse_gpu_partition_spec(raw)


_DECIMAL = re.compile(r"[+-]?[0-9]+")


def _int_or_numeric_string(value: Any) -> Any:
    # Koordinator's Go type is int, but the v1.7 release notes publish "allocationScore": "1":
    # accept a decimal string as well (a non-numeric string still fails the int check).
    if isinstance(value, str) and _DECIMAL.fullmatch(value):
        return int(value)
    return value


class GPUPartition(KoordModel):
    minors: list[NonNegativeInt32]
    gpu_link_type: str | None = None
    """E.g. ``NVLink`` (the only Koordinator constant) or ``HCCS`` (Huawei)."""
    ring_bus_bandwidth: Quantity | None = None
    allocation_score: Annotated[int | None, BeforeValidator(_int_or_numeric_string)] = None


GPUPartitionTable = dict[int, list[GPUPartition]]
"""Number of GPUs (written as a JSON object key, e.g. ``"4"``) -> the valid groupings of that size."""

_PARTITIONS: TypeAdapter[GPUPartitionTable] = TypeAdapter(GPUPartitionTable)


def parse_gpu_partition_table(raw: str) -> GPUPartitionTable:
    return parse_json(ANNOTATION_GPU_PARTITIONS, raw, _PARTITIONS)


def get_gpu_partition_table(annotations: Mapping[str, str] | None) -> GPUPartitionTable | None:
    """None when the Device annotation is absent or empty."""
    raw = lookup(annotations, ANNOTATION_GPU_PARTITIONS)
    return parse_gpu_partition_table(raw) if raw else None
