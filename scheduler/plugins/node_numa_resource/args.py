"""NodeNUMAResourceArgs: Koordinator's arguments of the NodeNUMAResource plugin (api-reference 3).

Defaults as ``pkg/scheduler/apis/config/v1/defaults.go``: ``defaultCPUBindPolicy: FullPCPUs``,
``scoringStrategy`` and ``numaScoringStrategy`` LeastAllocated over cpu:1, memory:1. Koordinator's
API accepts ``BalancedAllocation`` as a type but its plugin fails to start with it; here the
configuration is refused at start-up with the field named.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from apis.base import KoordModel
from scheduler.plugins.helper.resources import ResourceSpec, default_resources

__all__ = ["NUMAScoringStrategy", "NodeNUMAResourceArgs", "ScoringType"]

ScoringType = Literal["LeastAllocated", "MostAllocated"]


class NUMAScoringStrategy(KoordModel):
    """A scoring strategy: the type and the weighted resources it rates."""

    model_config = ConfigDict(extra="forbid")

    type: str = "LeastAllocated"
    """``LeastAllocated`` or ``MostAllocated`` (``BalancedAllocation`` is refused, as Koordinator's
    plugin refuses it at start-up)."""
    resources: list[ResourceSpec] = Field(default_factory=default_resources)
    """Scored resources and weights in (0, 100]; empty means cpu:1, memory:1."""

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        if value == "BalancedAllocation":
            raise ValueError("type BalancedAllocation is not supported by NodeNUMAResource")
        if value not in ("LeastAllocated", "MostAllocated"):
            raise ValueError(f"type must be LeastAllocated or MostAllocated (got {value!r})")
        return value

    @field_validator("resources")
    @classmethod
    def _weights(cls, resources: list[ResourceSpec]) -> list[ResourceSpec]:
        for spec in resources:
            if not 0 < spec.weight <= 100:
                raise ValueError(f"resource weight of {spec.name} not in valid range (0, 100]")
        return resources or default_resources()

    @property
    def scoring_type(self) -> ScoringType:
        return "MostAllocated" if self.type == "MostAllocated" else "LeastAllocated"

    def weights(self) -> dict[str, int]:
        return {spec.name: spec.weight for spec in self.resources}


class NodeNUMAResourceArgs(KoordModel):
    model_config = ConfigDict(extra="forbid")

    default_cpu_bind_policy: Literal["", "FullPCPUs", "SpreadByPCPUs"] = Field(
        default="FullPCPUs", alias="defaultCPUBindPolicy"
    )
    """The bind policy of a cpuset pod whose resource-spec says ``Default`` or nothing."""
    scoring_strategy: NUMAScoringStrategy = Field(default_factory=NUMAScoringStrategy)
    """How nodes are scored (over the NUMA nodes the pod is given, or the whole node)."""
    numa_scoring_strategy: NUMAScoringStrategy = Field(default_factory=NUMAScoringStrategy)
    """How a node's NUMA-node sets are rated against each other, with its own weights (Koordinator
    takes the weights from ``scoringStrategy``); its type also gives the default cpuset NUMA
    allocate strategy (MostAllocated -> MostAllocated, else LeastAllocated)."""
