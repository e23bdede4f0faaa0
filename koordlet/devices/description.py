"""The file backend: a YAML description of a node's devices (KWOK nodes, tests, NPU/MLU config).

A description lists each kind either device by device (the :mod:`~koordlet.devices.inventory`
models) or as a group that koordlet lays out like a real board: ``count`` devices spread evenly
over ``numaNodes`` NUMA nodes and ``pcieRootsPerNumaNode`` PCIe roots in each, GPU ``i``, NIC ``i``
and accelerator ``i`` of a root sharing it (so that GPU+RDMA joint allocation finds pairs). The
simulation file (``koordlet --simulate-devices FILE``) holds one description per node or group of
nodes; ``--device-config FILE`` on a real node holds one description (NPUs and MLUs as
koord-device-daemon describes them).
"""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from apis.extension.device import GPUPartitionTable
from apis.quantity import Quantity
from apis.yamltext import load_yaml
from koordlet.devices.inventory import GPU, RDMA, VF, Accelerator, NodeDevices, Placement

__all__ = [
    "AcceleratorGroup",
    "DeviceDescription",
    "DevicesFile",
    "GPUGroup",
    "NodeDescription",
    "RDMAGroup",
    "load_description",
    "load_devices_file",
]

_MAX_ROOTS = 15


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class _Layout(_Model):
    count: int = Field(ge=0)
    numa_nodes: int = Field(default=2, ge=1, alias="numaNodes")
    pcie_roots_per_numa_node: int = Field(default=2, ge=1, alias="pcieRootsPerNumaNode")
    unhealthy: list[int] = Field(default_factory=list)
    """Minors reported with health false."""

    @model_validator(mode="after")
    def _fits(self) -> _Layout:
        if self.numa_nodes * self.pcie_roots_per_numa_node > _MAX_ROOTS:
            raise ValueError(f"at most {_MAX_ROOTS} PCIe roots (numaNodes x pcieRootsPerNumaNode)")
        if self.count > 8 * self.numa_nodes * self.pcie_roots_per_numa_node:
            raise ValueError("at most 8 devices of a kind under one PCIe root")
        return self

    def placement(self, index: int, first_device: int) -> Placement:
        per_numa = math.ceil(self.count / self.numa_nodes) or 1
        numa = min(index // per_numa, self.numa_nodes - 1)
        per_root = math.ceil(per_numa / self.pcie_roots_per_numa_node) or 1
        local = index - numa * per_numa
        roots = self.pcie_roots_per_numa_node
        root = numa * roots + min(local // per_root, roots - 1)
        root_bus = 0x10 * (root + 1)
        bus = root_bus + first_device + local % per_root
        return Placement(
            bus_id=f"0000:{bus:02x}:00.0", numa_node=numa, socket=numa, pcie_root=f"pci0000:{root_bus:02x}"
        )


class GPUGroup(_Layout):
    count: int = Field(default=8, ge=0)
    model: str = "NVIDIA H100 80GB HBM3"
    memory: Quantity
    nvswitch: bool = True
    """NVLinks to NVSwitches (an HGX board); false: no NVLink."""

    def expand(self, node: str) -> list[GPU]:
        return [
            GPU(
                minor=i,
                uuid=f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{node}/gpu/{i}')}",
                model=self.model,
                memory=self.memory,
                healthy=i not in self.unhealthy,
                placement=self.placement(i, 1),
                nvswitch=self.nvswitch,
            )
            for i in range(self.count)
        ]


def _vf(bus: str, index: int) -> VF:
    return VF(minor=index, bus_id=f"0000:{bus}:{(index + 1) // 8:02x}.{(index + 1) % 8}")


class RDMAGroup(_Layout):
    vfs: int = Field(default=0, ge=0, le=63)
    """SR-IOV VFs enabled on each NIC."""

    def expand(self, node: str) -> list[RDMA]:
        nics = []
        for i in range(self.count):
            placement = self.placement(i, 9)
            bus = placement.bus_id[5:7]
            vfs = [_vf(bus, k) for k in range(self.vfs)]
            nics.append(
                RDMA(minor=i, name=f"mlx5_{i}", healthy=i not in self.unhealthy, placement=placement, vfs=vfs)
            )
        return nics


class AcceleratorGroup(_Layout):
    vendor: Literal["huawei", "cambricon"]
    model: str
    memory: Quantity
    ai_core: int | None = Field(default=None, ge=0, alias="aiCore")
    ai_cpu: int | None = Field(default=None, ge=0, alias="aiCPU")

    def expand(self, node: str) -> list[Accelerator]:
        return [
            Accelerator(
                vendor=self.vendor,
                model=self.model,
                minor=i,
                uuid=f"{self.vendor}-{uuid.uuid5(uuid.NAMESPACE_URL, f'{node}/acc/{i}')}",
                memory=self.memory,
                healthy=i not in self.unhealthy,
                placement=self.placement(i, 1),
                ai_core=self.ai_core,
                ai_cpu=self.ai_cpu,
            )
            for i in range(self.count)
        ]


class DeviceDescription(_Model):
    driver_version: str | None = None
    gpus: GPUGroup | list[GPU] | None = None
    rdma: RDMAGroup | list[RDMA] | None = None
    accelerators: AcceleratorGroup | list[Accelerator] | None = None
    gpu_partitions: GPUPartitionTable | None = None
    """``gpuPartitions``: the Device's ``gpu-partitions`` table as given (``{4: [{minors: [0, 1, 2, 3],
    gpuLinkType: HCCS, allocationScore: 1}]}``), for boards whose groups only the vendor knows."""

    def inventory(self, node: str) -> NodeDevices:
        def expand(value: _Layout | list[GPU] | list[RDMA] | list[Accelerator] | None) -> list[object]:
            if value is None:
                return []
            if isinstance(value, list):
                return list(value)
            return list(value.expand(node))  # type: ignore[attr-defined]

        return NodeDevices.model_validate(
            {
                "gpus": expand(self.gpus),
                "rdma": expand(self.rdma),
                "accelerators": expand(self.accelerators),
                "driver_version": self.driver_version,
                "gpu_partitions": self.gpu_partitions,
            }
        )


class NodeDescription(DeviceDescription):
    name: str | None = None
    names: list[str] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> NodeDescription:
        if (self.name is None) == (self.names is None):
            raise ValueError("give exactly one of name and names")
        return self

    def node_names(self) -> list[str]:
        return [self.name] if self.name is not None else list(self.names or [])


class DevicesFile(_Model):
    report_interval_seconds: float | None = Field(default=None, gt=0)
    nodes: list[NodeDescription] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> DevicesFile:
        names = [name for node in self.nodes for name in node.node_names()]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"nodes described more than once: {', '.join(repeated)}")
        return self

    def inventories(self) -> dict[str, NodeDevices]:
        return {name: node.inventory(name) for node in self.nodes for name in node.node_names()}


def load_devices_file(path: Path) -> DevicesFile:
    """Raises OSError when the file cannot be read, ValueError when it is no devices file."""
    return DevicesFile.model_validate(load_yaml(path.read_text(), str(path)) or {})


def load_description(path: Path) -> DeviceDescription:
    """Raises OSError when the file cannot be read, ValueError when it is no description."""
    return DeviceDescription.model_validate(load_yaml(path.read_text(), str(path)) or {})
