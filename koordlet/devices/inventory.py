"""What koordlet found on a node, before it becomes a Device object.

Every backend (NVML, sysfs, the accelerator config, the simulation file) produces these models, and
:mod:`koordlet.devices.device_object` turns them into the Device's JSON shape. Keys are camelCase in
files (``busID``, ``numaNode``); unknown keys are errors, so that a misspelt file fails at start.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from apis.extension.device import GPUPartitionTable
from apis.quantity import Quantity

__all__ = ["GPU", "RDMA", "VF", "Accelerator", "NodeDevices", "Placement"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class Placement(_Model):
    """Where a PCI device sits: its address, NUMA node, CPU socket and PCIe root."""

    bus_id: str = Field(alias="busID")
    """``domain:bus:device.function``, lower case (``0000:0e:00.0``)."""
    numa_node: int = 0
    socket: int = 0
    pcie_root: str = Field(alias="pcieRoot")
    """The PCIe root the device hangs under (``pci0000:0b``): devices under one root share a switch."""


class GPU(_Model):
    minor: int = Field(ge=0)
    uuid: str
    model: str
    """The name NVML gives, e.g. ``NVIDIA H100 80GB HBM3``."""
    memory: Quantity
    """Total memory in bytes."""
    healthy: bool = True
    placement: Placement
    nvlink_peers: list[int] = Field(default_factory=list, alias="nvlinkPeers")
    """Minors of the GPUs an NVLink leads to directly."""
    nvswitch: bool = False
    """Whether the GPU's NVLinks go to NVSwitches (an HGX board: every GPU reaches every other)."""


class VF(_Model):
    minor: int = Field(ge=0)
    bus_id: str = Field(alias="busID")


class RDMA(_Model):
    minor: int = Field(ge=0)
    name: str
    """The InfiniBand device name (``mlx5_0``)."""
    healthy: bool = True
    placement: Placement
    vfs: list[VF] = Field(default_factory=list)
    """SR-IOV virtual functions of this physical function."""


class Accelerator(_Model):
    """An Ascend NPU or a Cambricon MLU, described by koord-device-daemon's file."""

    vendor: Literal["huawei", "cambricon"]
    model: str
    """E.g. ``Ascend-910B3``, ``MLU370-X8``."""
    minor: int = Field(ge=0)
    uuid: str
    memory: Quantity
    healthy: bool = True
    placement: Placement
    ai_core: int | None = Field(default=None, ge=0, alias="aiCore")
    """Huawei: AI cores of the card (``huawei.com/npu-core``)."""
    ai_cpu: int | None = Field(default=None, ge=0, alias="aiCPU")
    """Huawei: AI CPUs of the card (``huawei.com/npu-cpu``)."""


class NodeDevices(_Model):
    gpus: list[GPU] = Field(default_factory=list)
    rdma: list[RDMA] = Field(default_factory=list)
    accelerators: list[Accelerator] = Field(default_factory=list)
    driver_version: str | None = None
    gpu_partitions: GPUPartitionTable | None = None
    """The partitions the config gives (koord-device-daemon's, e.g. an Ascend board's HCCS groups);
    None: koordlet's built-in table for the NVIDIA boards it knows, if any."""
