"""A node's inventory as its Device object, in Koordinator's JSON shape (api-reference 1.4).

GPUs, NPUs and MLUs are ``type: gpu`` (the NPU and MLU with their vendor's resources), RDMA NICs are
``type: rdma`` with their SR-IOV VFs in one VF group. The object is named after the node and owned
by it (controller reference), so that it goes with the node. The node's vendor, model and driver go
into the Device's labels, the partition table of a known board into its annotation.
"""

from __future__ import annotations

import json

from apis.extension import device as ext
from apis.meta import ObjectMeta, OwnerReference
from apis.quantity import Format, Quantity
from apis.scheduling.device import (
    Device,
    DeviceInfo,
    DeviceSpec,
    DeviceTopology,
    VirtualFunction,
    VirtualFunctionGroup,
)
from koordlet.devices.inventory import GPU, RDMA, Accelerator, NodeDevices, Placement
from koordlet.devices.partitions import partition_table

__all__ = [
    "LABEL_NVLINK_PEERS",
    "LABEL_NVSWITCH",
    "build_device",
    "gpu_model_label",
    "partitions_annotation",
    "updated_device",
]

LABEL_NVLINK_PEERS = "nvlink-peers"
"""Device label: the minors an NVLink of this GPU leads to, comma-joined."""
LABEL_NVSWITCH = "nvswitch"
"""Device label ``"true"`` when the GPU's NVLinks go to NVSwitches."""

_HUNDRED = Quantity.from_int(100)


def gpu_model_label(name: str) -> str:
    """NVML's name as a label value: ``NVIDIA H20`` -> ``NVIDIA-H20``."""
    return "-".join(name.split())[:63].strip("-_.")


def _bytes(quantity: Quantity) -> Quantity:
    return Quantity.from_int(quantity.value(), Format.BINARY_SI)


def _topology(placement: Placement) -> DeviceTopology:
    return DeviceTopology(
        socket_id=placement.socket,
        node_id=placement.numa_node,
        pcie_id=placement.pcie_root,
        bus_id=placement.bus_id,
    )


def _gpu(gpu: GPU) -> DeviceInfo:
    labels: dict[str, str] = {}
    if gpu.nvlink_peers:
        labels[LABEL_NVLINK_PEERS] = ",".join(str(minor) for minor in sorted(gpu.nvlink_peers))
    if gpu.nvswitch:
        labels[LABEL_NVSWITCH] = "true"
    return DeviceInfo(
        type="gpu",
        uuid=gpu.uuid,
        minor=gpu.minor,
        health=gpu.healthy,
        labels=labels or None,
        resources={
            ext.RESOURCE_GPU_CORE: _HUNDRED,
            ext.RESOURCE_GPU_MEMORY: _bytes(gpu.memory),
            ext.RESOURCE_GPU_MEMORY_RATIO: _HUNDRED,
        },
        topology=_topology(gpu.placement),
    )


def _accelerator(card: Accelerator) -> DeviceInfo:
    resources = {
        ext.RESOURCE_GPU_MEMORY: _bytes(card.memory),
        ext.RESOURCE_GPU_MEMORY_RATIO: _HUNDRED,
    }
    if card.vendor == ext.GPU_VENDOR_HUAWEI:
        resources[ext.RESOURCE_HUAWEI_NPU_CORE] = Quantity.from_int(card.ai_core or 0)
        resources[ext.RESOURCE_HUAWEI_NPU_CPU] = Quantity.from_int(card.ai_cpu or 0)
        resources[ext.RESOURCE_HUAWEI_NPU_DVPP] = _HUNDRED
    else:
        resources[ext.RESOURCE_GPU_CORE] = _HUNDRED
    return DeviceInfo(
        type="gpu",
        uuid=card.uuid,
        minor=card.minor,
        health=card.healthy,
        resources=resources,
        topology=_topology(card.placement),
    )


def _rdma(nic: RDMA) -> DeviceInfo:
    groups = None
    if nic.vfs:
        vfs = [VirtualFunction(minor=vf.minor, bus_id=vf.bus_id) for vf in nic.vfs]
        groups = [VirtualFunctionGroup(vfs=vfs)]
    return DeviceInfo(
        type="rdma",
        uuid=nic.placement.bus_id,
        minor=nic.minor,
        health=nic.healthy,
        labels={"name": nic.name},
        resources={ext.RESOURCE_RDMA: _HUNDRED},
        topology=_topology(nic.placement),
        vf_groups=groups,
    )


def _node_labels(devices: NodeDevices) -> dict[str, str]:
    labels: dict[str, str] = {}
    if devices.gpus:
        labels[ext.LABEL_GPU_VENDOR] = ext.GPU_VENDOR_NVIDIA
        labels[ext.LABEL_GPU_MODEL] = gpu_model_label(devices.gpus[0].model)
    elif devices.accelerators:
        labels[ext.LABEL_GPU_VENDOR] = devices.accelerators[0].vendor
        labels[ext.LABEL_GPU_MODEL] = gpu_model_label(devices.accelerators[0].model)
    if devices.driver_version and (devices.gpus or devices.accelerators):
        labels[ext.LABEL_GPU_DRIVER_VERSION] = devices.driver_version
    return labels


def partitions_annotation(devices: NodeDevices) -> str | None:
    table = devices.gpu_partitions
    if table is None and devices.gpus:
        table = partition_table(
            devices.gpus[0].model,
            [gpu.minor for gpu in devices.gpus],
            all(gpu.nvswitch for gpu in devices.gpus),
        )
    if not table:
        return None
    wire = {str(size): [p.to_wire() for p in parts] for size, parts in sorted(table.items())}
    return json.dumps(wire, separators=(",", ":"))


def build_device(node_name: str, node_uid: str, devices: NodeDevices) -> Device:
    infos = (
        [_gpu(gpu) for gpu in sorted(devices.gpus, key=lambda g: g.minor)]
        + [_accelerator(card) for card in sorted(devices.accelerators, key=lambda c: c.minor)]
        + [_rdma(nic) for nic in sorted(devices.rdma, key=lambda n: n.minor)]
    )
    annotation = partitions_annotation(devices)
    return Device(
        api_version=Device.crd.api_version,
        kind=Device.crd.kind,
        metadata=ObjectMeta(
            name=node_name,
            labels=_node_labels(devices) or None,
            annotations={ext.ANNOTATION_GPU_PARTITIONS: annotation} if annotation else None,
            owner_references=[
                OwnerReference(
                    api_version="v1",
                    kind="Node",
                    name=node_name,
                    uid=node_uid,
                    controller=True,
                    block_owner_deletion=True,
                )
            ],
        ),
        spec=DeviceSpec(devices=infos),
    )


def updated_device(existing: Device, desired: Device) -> Device | None:
    """``existing`` with koordlet's part replaced by ``desired``'s; None when nothing changes.

    koordlet owns the spec, the owner reference, its labels and the partition annotation; other
    labels and annotations (someone's ``gpu-partition-policy``) and the status are kept.
    """
    labels = {**(existing.metadata.labels or {}), **(desired.metadata.labels or {})}
    annotations = dict(existing.metadata.annotations or {})
    annotations.pop(ext.ANNOTATION_GPU_PARTITIONS, None)
    annotations.update(desired.metadata.annotations or {})
    metadata = existing.metadata.model_copy(
        update={
            "labels": labels or None,
            "annotations": annotations or None,
            "owner_references": desired.metadata.owner_references,
        }
    )
    updated = existing.model_copy(update={"metadata": metadata, "spec": desired.spec})
    return None if updated.to_wire() == existing.to_wire() else updated
