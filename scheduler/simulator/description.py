"""The declarative cluster description: node pools that expand into KWOK fake nodes and Devices.

A few lines describe a cluster::

    name: topology
    nodePools:
    - name: gpu
      count: 64
      cpu: "96"
      memory: 1Ti
      gpus: {count: 8, model: NVIDIA-H100, memory: 80Gi}
      topology:                      # outermost layer first; nodes are split evenly
      - {labelKey: network.topology.nvidia.com/spine, domains: 2, prefix: s}
      - {labelKey: network.topology.nvidia.com/block, domains: 4, prefix: b}   # per spine

gives 64 nodes ``gpu-0`` ... ``gpu-63`` labelled with spines ``s0``/``s1`` and blocks ``b0`` ...
``b7`` (8 nodes per block), each with 8 GPUs in its allocatable and a Device object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from apis.extension import device as device_ext
from apis.quantity import Quantity
from apis.yamltext import load_yaml

__all__ = ["MAX_NODES", "ClusterDescription", "GPUSpec", "NodeImage", "NodePool", "TopologyLayer", "load"]

MAX_NODES = 100_000
"""The most nodes a description may expand to (ten times the largest clusters Koordinator reports):
a count typed with three zeros too many is an error naming the pools, not an hour of building nodes."""

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class TaintSpec(_Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class GPUSpec(_Model):
    count: int = Field(ge=1)
    """GPUs per node."""
    vendor: str = "nvidia"
    model: str = "NVIDIA-H100"
    memory: Quantity = Field(default_factory=lambda: Quantity.parse("80Gi"))
    """Memory of one GPU."""


class NodeImage(_Model):
    """A container image the node reports as present (``status.images``; ImageLocality reads it)."""

    names: list[str] = Field(min_length=1)
    size_bytes: int = Field(ge=0)


class TopologyLayer(_Model):
    label_key: str
    domains: int = Field(ge=1)
    """Domains of this layer inside each domain of the layer above (or in the pool)."""
    prefix: str


class NodePool(_Model):
    name: str
    count: int = Field(ge=0)
    cpu: Quantity = Field(default_factory=lambda: Quantity.parse("32"))
    memory: Quantity = Field(default_factory=lambda: Quantity.parse("128Gi"))
    pods: int = Field(default=110, ge=1)
    ephemeral_storage: Quantity = Field(default_factory=lambda: Quantity.parse("1Ti"))
    arch: str = "amd64"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    taints: list[TaintSpec] = Field(default_factory=list)
    extended_resources: dict[str, Quantity] = Field(default_factory=dict)
    gpus: GPUSpec | None = None
    topology: list[TopologyLayer] = Field(default_factory=list)
    unschedulable: bool = False
    images: list[NodeImage] = Field(default_factory=list)

    @model_validator(mode="after")
    def _topology_divides_count(self) -> NodePool:
        leaves = 1
        for layer in self.topology:
            leaves *= layer.domains
        if self.topology and self.count % leaves:
            raise ValueError(
                f"pool {self.name}: {self.count} nodes cannot be split evenly over {leaves} topology domains"
            )
        return self


class ClusterDescription(_Model):
    name: str = "koord-py"
    node_pools: list[NodePool] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_pool_names(self) -> ClusterDescription:
        names = [p.name for p in self.node_pools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"node pool names must be unique, repeated: {', '.join(duplicates)}")
        total = sum(p.count for p in self.node_pools)
        if total > MAX_NODES:
            raise ValueError(
                f"nodePools: {total} nodes in all, more than the {MAX_NODES} a simulation builds"
            )
        return self

    def nodes(self) -> list[dict[str, Any]]:
        return [node for pool in self.node_pools for node in _pool_nodes(pool)]

    def devices(self) -> list[dict[str, Any]]:
        return [
            _device(f"{pool.name}-{i}", pool.gpus)
            for pool in self.node_pools
            if pool.gpus is not None
            for i in range(pool.count)
        ]


def load(path: str | Path) -> ClusterDescription:
    """The description in ``path``; ValueError (pydantic's ValidationError is one) when it is none."""
    return ClusterDescription.model_validate(
        load_yaml(Path(path).read_text(encoding="utf-8"), str(path)) or {}
    )


def _topology_labels(pool: NodePool, index: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    group_size = pool.count
    domain_base = 0
    position = index
    for layer in pool.topology:
        group_size //= layer.domains
        local = position // group_size
        domain = domain_base * layer.domains + local
        labels[layer.label_key] = f"{layer.prefix}{domain}"
        domain_base = domain
        position %= group_size
    return labels


def _pool_nodes(pool: NodePool) -> list[dict[str, Any]]:
    return [_node(pool, i) for i in range(pool.count)]


def _node(pool: NodePool, index: int) -> dict[str, Any]:
    name = f"{pool.name}-{index}"
    capacity: dict[str, str] = {
        "cpu": str(pool.cpu),
        "memory": str(pool.memory),
        "pods": str(pool.pods),
        "ephemeral-storage": str(pool.ephemeral_storage),
    }
    labels = {
        "type": "kwok",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": pool.arch,
        "koordinator-py/node-pool": pool.name,
        **_topology_labels(pool, index),
        **pool.labels,
    }
    if pool.gpus is not None:
        gpus = pool.gpus
        capacity.update(_gpu_capacity(gpus))
        labels[device_ext.LABEL_GPU_VENDOR] = gpus.vendor
        labels[device_ext.LABEL_GPU_MODEL] = gpus.model
    capacity.update({k: str(v) for k, v in pool.extended_resources.items()})
    spec: dict[str, Any] = {}
    if pool.taints:
        spec["taints"] = [t.model_dump(exclude_defaults=False) for t in pool.taints]
    if pool.unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {
        "capacity": capacity,
        "allocatable": dict(capacity),
        "nodeInfo": {"architecture": pool.arch, "operatingSystem": "linux", "kubeletVersion": "fake"},
    }
    if pool.images:
        status["images"] = [{"names": list(i.names), "sizeBytes": i.size_bytes} for i in pool.images]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", **pool.annotations},
        },
        "spec": spec,
        "status": status,
    }


def _gpu_capacity(gpus: GPUSpec) -> dict[str, str]:
    """The allocatable koord-manager derives from a Device: whole cards and the percent resources."""
    total_memory = Quantity.from_int(gpus.memory.value() * gpus.count, gpus.memory.format)
    return {
        "nvidia.com/gpu": str(gpus.count),
        device_ext.RESOURCE_GPU_CORE: str(100 * gpus.count),
        device_ext.RESOURCE_GPU_MEMORY_RATIO: str(100 * gpus.count),
        device_ext.RESOURCE_GPU_MEMORY: str(total_memory),
    }


def _device(node_name: str, gpus: GPUSpec) -> dict[str, Any]:
    per_numa = max(1, gpus.count // 2)
    devices = []
    for minor in range(gpus.count):
        numa = minor // per_numa
        devices.append(
            {
                "type": "gpu",
                "id": f"GPU-{node_name}-{minor:02d}",
                "minor": minor,
                "health": True,
                "resources": {
                    device_ext.RESOURCE_GPU_CORE: "100",
                    device_ext.RESOURCE_GPU_MEMORY: str(gpus.memory),
                    device_ext.RESOURCE_GPU_MEMORY_RATIO: "100",
                },
                "topology": {
                    "socketID": numa,
                    "nodeID": numa,
                    "pcieID": f"pci{numa}-{minor // 2}",
                    "busID": f"0000:{0x10 + minor:02x}:00.0",
                },
            }
        )
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {
            "name": node_name,
            "labels": {device_ext.LABEL_GPU_VENDOR: gpus.vendor, device_ext.LABEL_GPU_MODEL: gpus.model},
        },
        "spec": {"devices": devices},
    }
