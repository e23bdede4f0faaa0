"""Koordinator's ``device-allocated`` annotation, as PreBind writes it on the pod or Reservation."""

from __future__ import annotations

import json
from collections.abc import Sequence

from apis.extension.device import RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO
from apis.quantity import Format, Quantity
from scheduler.plugins.device_share.allocator import Allocation
from scheduler.plugins.device_share.npu import npu_resources
from scheduler.plugins.device_share.rdma import RDMAAllocation, rdma_entries

__all__ = ["allocated_annotation"]


def allocated_annotation(
    allocations: Sequence[Allocation], rdma: Sequence[RDMAAllocation] = (), template: str | None = None
) -> str:
    """Koordinator's ``device-allocated`` JSON: GPU entries carry gpu-core, gpu-memory and ratio (an
    NPU's carry its npu-* amounts instead of gpu-core) and the shared-resource template if any; rdma
    entries their amount and VF (rdma.rdma_entries)."""
    gpu: list[dict[str, object]] = []
    for a in allocations:
        memory = {
            RESOURCE_GPU_MEMORY: str(Quantity.from_int(a.usage.memory, Format.BINARY_SI)),
            RESOURCE_GPU_MEMORY_RATIO: str(a.usage.ratio),
        }
        entry: dict[str, object] = {
            "minor": a.minor,
            "resources": {**npu_resources(a.usage.npu), **memory}
            if any(a.usage.npu)
            else {RESOURCE_GPU_CORE: str(a.usage.core), **memory},
        }
        if template:
            entry["extension"] = {"gpuSharedResourceTemplate": template}
        gpu.append(entry)
    value: dict[str, object] = {"gpu": gpu} if gpu else {}
    if rdma:
        value["rdma"] = rdma_entries(rdma)
    return json.dumps(value, separators=(",", ":"))
