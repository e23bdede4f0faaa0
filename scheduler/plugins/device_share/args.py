"""DeviceShareArgs: Koordinator's arguments of the DeviceShare plugin (api-reference)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from apis.base import KoordModel
from apis.extension.device import RESOURCE_FPGA, RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO, RESOURCE_RDMA
from scheduler.plugins.helper.resources import ResourceSpec

__all__ = [
    "DeviceShareArgs",
    "DeviceShareScoringStrategy",
    "FragmentationArgs",
    "GPUShareUnsupportedModel",
    "GPUSharedResourceTemplatesConfig",
]


def _default_resources() -> list[ResourceSpec]:
    return [
        ResourceSpec(name=name, weight=1)
        for name in (RESOURCE_GPU_MEMORY_RATIO, RESOURCE_GPU_MEMORY, RESOURCE_RDMA, RESOURCE_FPGA)
    ]


class FragmentationArgs(KoordModel):
    """Ours: how the ``Fragmentation`` strategy tracks the recent request mix."""

    model_config = ConfigDict(extra="forbid")

    mix: Literal["Cluster", "Recent"] = "Cluster"
    """Where the request mix comes from: ``Cluster``, the pods in the cluster that ask for GPUs
    (bound or pending, each once while it is there); ``Recent``, the pods that asked DeviceShare
    for GPUs lately, weights halving every ``halfLifePods``."""
    half_life_pods: int = Field(default=500, gt=0)
    """With ``mix: Recent``: a shape's weight in the mix halves every this many pods."""
    max_shapes: int = Field(default=32, gt=0)
    """Distinct request shapes kept in the mix (the least common or lightest are dropped)."""

    @model_validator(mode="after")
    def _half_life_only_with_recent(self) -> FragmentationArgs:
        if "half_life_pods" in self.model_fields_set and self.mix != "Recent":
            raise ValueError(f"fragmentation.halfLifePods is set but mix is {self.mix}, not Recent")
        return self


class DeviceShareScoringStrategy(KoordModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["LeastAllocated", "MostAllocated", "Fragmentation"] = "MostAllocated"
    """Koordinator's Go default is LeastAllocated; since v1.6 GPUs are bin-packed by default (the
    v1.6 notes: "GPU Binpack capability is enabled by default"), which is what this default keeps.
    ``Fragmentation`` is ours (docs/devices.md): the placement that fragments GPUs least for the
    recent request mix."""
    resources: list[ResourceSpec] = Field(default_factory=_default_resources)
    fragmentation: FragmentationArgs | None = None
    """Only with type ``Fragmentation`` (its defaults when unset)."""

    @model_validator(mode="after")
    def _fragmentation_only_with_its_type(self) -> DeviceShareScoringStrategy:
        if self.fragmentation is not None and self.type != "Fragmentation":
            raise ValueError(
                f"scoringStrategy.fragmentation is set but type is {self.type}, not Fragmentation"
            )
        return self

    @field_validator("resources")
    @classmethod
    def _weights(cls, resources: list[ResourceSpec]) -> list[ResourceSpec]:
        for spec in resources:
            if not 0 < spec.weight <= 100:
                raise ValueError(f"resource weight of {spec.name} not in valid range (0, 100]")
        return resources or _default_resources()


class GPUSharedResourceTemplatesConfig(KoordModel):
    config_map_namespace: str = "koordinator-system"
    config_map_name: str = "gpu-shared-resource-templates"
    matched_resources: list[str] = Field(default_factory=lambda: ["huawei.com/npu-core"])


class GPUShareUnsupportedModel(KoordModel):
    vendor: str
    model: str


class DeviceShareArgs(KoordModel):
    model_config = ConfigDict(extra="forbid")

    allocator: str | None = None
    """Deprecated and ignored, as in Koordinator."""
    scoring_strategy: DeviceShareScoringStrategy = Field(default_factory=DeviceShareScoringStrategy)
    disable_device_numa_topology_alignment: bool = Field(
        default=False, alias="disableDeviceNUMATopologyAlignment"
    )
    gpu_shared_resource_templates_config: GPUSharedResourceTemplatesConfig = Field(
        default_factory=GPUSharedResourceTemplatesConfig, alias="gpuSharedResourceTemplatesConfig"
    )
    gpu_share_unsupported_models: list[GPUShareUnsupportedModel] = Field(
        default_factory=list, alias="gpuShareUnsupportedModels"
    )
    """Nodes of these models reject pods asking for koordinator.sh/gpu.shared."""
