"""Device (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped): a node's GPUs, RDMA NICs, FPGAs.

By convention the object is named after its node; koordlet creates it with a controller
ownerReference to the Node. ``DeviceInfo`` is also embedded in NodeMetric's ResourceMap.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import ConfigDict, Field
from pydantic.config import JsonDict

from apis.base import CRDInfo, KoordModel, PrinterColumn
from apis.meta import Condition, KoordResource
from apis.quantity import Quantity
from apis.types import Int32

__all__ = [
    "Device",
    "DeviceAllocation",
    "DeviceAllocationItem",
    "DeviceInfo",
    "DeviceSpec",
    "DeviceStatus",
    "DeviceTopology",
    "VirtualFunction",
    "VirtualFunctionGroup",
]


def _health_required(schema: JsonDict, cls: type[Any]) -> None:
    """Koordinator's schema both defaults ``health`` to false and lists it as required."""
    required = schema.setdefault("required", [])
    assert isinstance(required, list)
    if "health" not in required:
        required.append("health")


class DeviceTopology(KoordModel):
    """Where the device sits in the machine."""

    socket_id: Int32 = Field(alias="socketID")
    """CPU socket the device belongs to."""
    node_id: Int32 = Field(alias="nodeID")
    """NUMA node the device belongs to, unique across sockets."""
    pcie_id: str = Field(alias="pcieID")
    """PCIe switch the device is connected to, unique across NUMA nodes."""
    bus_id: str | None = Field(default=None, alias="busID")
    """PCI bus address, formatted domain:bus:device.function."""


class VirtualFunction(KoordModel):
    """One SR-IOV virtual function."""

    minor: Int32
    """Minor number of the virtual function, counted from 0."""
    bus_id: str | None = Field(default=None, alias="busID")
    """PCI bus address of the virtual function, formatted domain:bus:device.function."""


class VirtualFunctionGroup(KoordModel):
    """A group of SR-IOV virtual functions sharing properties."""

    labels: dict[str, str] | None = None
    """Free-form properties of the virtual functions."""
    vfs: list[VirtualFunction] | None = None
    """The virtual functions in the group."""


class DeviceInfo(KoordModel):
    """One physical device."""

    model_config = ConfigDict(json_schema_extra=_health_required)

    type: str | None = None
    """Device type (not enforced by the schema): gpu, fpga or rdma."""
    labels: dict[str, str] | None = None
    """Free-form device properties."""
    uuid: str | None = Field(default=None, alias="id")
    """Device UUID (the JSON key is id)."""
    minor: Int32 | None = None
    """Device minor number, counted from 0."""
    module_id: Int32 | None = Field(default=None, alias="moduleID")
    """Physical module id."""
    health: bool = False
    """Whether the device is healthy; required by the schema, which also defaults it to false."""
    resources: dict[str, Quantity] | None = None
    """Resources the device offers; a GPU reports koordinator.sh/gpu-core: 100,
    koordinator.sh/gpu-memory (bytes) and koordinator.sh/gpu-memory-ratio: 100; an RDMA NIC
    reports koordinator.sh/rdma: 100."""
    topology: DeviceTopology | None = None
    """Socket, NUMA node and PCIe placement."""
    vf_groups: list[VirtualFunctionGroup] | None = None
    """SR-IOV virtual functions of the device."""
    conditions: list[Condition] | None = None
    """Current conditions of the device; the known type is Healthy."""


class DeviceSpec(KoordModel):
    """The devices of one node."""

    devices: list[DeviceInfo] | None = None
    """Every device koordlet discovered on the node."""


class DeviceAllocationItem(KoordModel):
    """One pod's share of a device type."""

    name: str | None = None
    """Pod name."""
    namespace: str | None = None
    """Pod namespace."""
    uuid: str | None = None
    """Device UUID (the same value the spec stores under id)."""
    minors: list[Int32] | None = None
    """Minor numbers of the devices allocated to the pod."""


class DeviceAllocation(KoordModel):
    """Allocations of one device type."""

    type: str | None = None
    """Device type: gpu, fpga or rdma."""
    entries: list[DeviceAllocationItem] | None = None
    """Per-pod allocations."""


class DeviceStatus(KoordModel):
    """What has been allocated from the node's devices."""

    allocations: list[DeviceAllocation] | None = None
    """Allocations grouped by device type."""


class Device(KoordResource):
    """Device lists the devices of one node (named after the node) and their allocations."""

    crd: ClassVar[CRDInfo] = CRDInfo(
        group="scheduling.koordinator.sh",
        version="v1alpha1",
        kind="Device",
        plural="devices",
        singular="device",
        scope="Cluster",
        status_subresource=False,
        # Product-owner additions; Koordinator's CRD has no printer columns.
        printer_columns=(
            PrinterColumn(
                name="VENDOR",
                type="string",
                json_path=r".metadata.labels.node\.koordinator\.sh/gpu-vendor",
            ),
            PrinterColumn(
                name="MODEL",
                type="string",
                json_path=r".metadata.labels.node\.koordinator\.sh/gpu-model",
            ),
            PrinterColumn(name="AGE", type="date", json_path=".metadata.creationTimestamp"),
        ),
    )

    spec: DeviceSpec | None = None
    """The node's devices."""
    status: DeviceStatus | None = None
    """Device allocations (no status subresource)."""
