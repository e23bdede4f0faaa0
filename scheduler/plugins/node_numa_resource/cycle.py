"""What one scheduling cycle knows of the pod's NUMA and CPU needs (PreFilter writes it) and of
where Filter placed it, kept in the CycleState for Score, Reserve and PreBind."""

from __future__ import annotations

from dataclasses import dataclass, field

from apis.extension.numa import NUMATopologySpec, ResourceSpec
from scheduler.framework.cycle_state import StateKey
from scheduler.plugins.node_numa_resource.allocation import Allocation
from scheduler.plugins.node_numa_resource.policy import CPURequest, NodeCPUBind

__all__ = ["CYCLE", "RESERVED", "Cycle", "Placed"]


@dataclass(slots=True)
class Cycle:
    resources: dict[str, int]
    cpu: CPURequest
    spec: ResourceSpec
    numa_spec: NUMATopologySpec
    placed: dict[str, Placed] = field(default_factory=dict)
    """The nodes Filter passed."""


@dataclass(frozen=True, slots=True)
class Placed:
    """The pod on one node, as Filter found it."""

    policy: str
    """The NUMA policy the pod gets there ("" for None)."""
    bind: NodeCPUBind
    allocation: Allocation | None
    """The trial allocation; None: nothing to allocate."""
    mask: int | None = None
    """The NUMA nodes the topology manager admitted the pod with (None: any)."""
    kept: bool = True
    """The placement keeps a Preferred ``singleNUMANodeExclusive``."""


CYCLE = StateKey[Cycle]("NodeNUMAResource/cycle")
RESERVED = StateKey[tuple[str, Allocation, NodeCPUBind]]("NodeNUMAResource/reserved")
