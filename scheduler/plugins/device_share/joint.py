"""Joint GPU + RDMA allocation (``device-joint-allocate``, algorithms 6.3 step 3): pure logic.

The annotation's first device type is the primary one. When it is ``gpu``, the pod's NICs are
sought on the PCIe switches of the GPUs it got first (round-robin over those switches, one NIC per
switch at least when ``requiredScope: SamePCIe``, and at most one per switch beyond the request
otherwise); with ``SamePCIe`` the NICs' switches must then be exactly the GPUs' ones. As in
Koordinator, types a pod does not request, or requests with ``allocateStrategy: ApplyForAll``,
take no part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apis.extension.device import DeviceHint, DeviceJointAllocate
from scheduler.plugins.device_share.allocator import GPU, Allocation, ScoringType
from scheduler.plugins.device_share.rdma import (
    RDMA,
    RDMAAllocation,
    RDMAUsage,
    Refusal,
    allocate_rdma,
    wanted,
)

__all__ = ["ERR_JOINT_ALLOCATE", "allocate_rdma_jointly", "joint_types"]

ERR_JOINT_ALLOCATE = "node(s) Device Joint-Allocate rules violation"
_GPU, _RDMA = "gpu", "rdma"


def joint_types(
    joint: DeviceJointAllocate | None, requested: frozenset[str], hints: Mapping[str, DeviceHint]
) -> tuple[str, ...]:
    """The annotation's device types that take part for this pod, primary first."""
    if joint is None:
        return ()
    return tuple(
        t
        for t in joint.device_types or ()
        if t in requested and not (t in hints and hints[t].allocate_strategy == "ApplyForAll")
    )


def _pcies(minors: Sequence[int], pcie_of: Mapping[int, str | None]) -> frozenset[str]:
    return frozenset(p for m in minors if (p := pcie_of.get(m)) is not None)


def allocate_rdma_jointly(
    gpus: Sequence[GPU],
    gpu_allocations: Sequence[Allocation],
    nics: Sequence[RDMA],
    usage: RDMAUsage,
    quantity: int,
    hint: DeviceHint | None,
    types: tuple[str, ...],
    same_pcie: bool,
    strategy: ScoringType = "MostAllocated",
    weight: int = 1,
) -> list[RDMAAllocation] | Refusal:
    """The NICs for ``quantity`` of ``koordinator.sh/rdma`` next to ``gpu_allocations`` (the GPUs
    the pod got on this node, already chosen)."""
    per_nic = wanted(quantity, hint, nics)
    if isinstance(per_nic, Refusal):
        return per_nic
    amount, count = per_nic
    joint = _GPU in types and _RDMA in types
    gpu_pcies = _pcies([a.minor for a in gpu_allocations], {g.minor: g.pcie for g in gpus})
    preferred = gpu_pcies if joint and types[0] == _GPU else frozenset()
    if joint and same_pcie:
        count = max(count, len(preferred))
    got = allocate_rdma(
        nics, usage, amount, count, hint, strategy, weight, preferred, at_most=max(count, len(preferred))
    )
    if isinstance(got, Refusal):
        return got
    if joint and same_pcie:
        nic_pcies = _pcies([a.minor for a in got], {n.minor: n.pcie for n in nics})
        if nic_pcies != gpu_pcies:
            return Refusal(ERR_JOINT_ALLOCATE)
    return got
