"""Huawei Ascend NPU requests (Koordinator v1.7): whole NPUs and vNPUs (algorithms 6.2).

Koordinator accepts two NPU combinations besides the generic GPU ones:

- ``huawei.com/npu-core`` with ``koordinator.sh/gpu-memory-ratio``: a ratio of 100 per card (a
  multiple of 100 for several) is whole NPUs; below 100, a share of one.
- ``koordinator.sh/gpu.shared: 1`` with ``huawei.com/npu-core``, ``huawei.com/npu-cpu``,
  ``koordinator.sh/gpu-memory`` and optionally ``huawei.com/npu-dvpp`` (at most 100): one vNPU.
  Several shared NPUs are refused ("multiple npu share is not supported on device side").
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.extension.device import (
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_GPU_SHARED,
    RESOURCE_HUAWEI_NPU_CORE,
    RESOURCE_HUAWEI_NPU_CPU,
    RESOURCE_HUAWEI_NPU_DVPP,
)
from apis.quantity import Quantity

__all__ = ["NPU_RESOURCES", "NPUAmounts", "npu_capacity", "npu_request_parts", "npu_resources"]

NPU_RESOURCES: frozenset[str] = frozenset(
    (RESOURCE_HUAWEI_NPU_CORE, RESOURCE_HUAWEI_NPU_CPU, RESOURCE_HUAWEI_NPU_DVPP)
)

_WHOLE = frozenset((RESOURCE_HUAWEI_NPU_CORE, RESOURCE_GPU_MEMORY_RATIO))
_VNPU = frozenset(
    (RESOURCE_GPU_SHARED, RESOURCE_HUAWEI_NPU_CORE, RESOURCE_HUAWEI_NPU_CPU, RESOURCE_GPU_MEMORY)
)

NPUAmounts = tuple[int, int, int]
"""Per card: (npu-core, npu-cpu, npu-dvpp)."""


def npu_request_parts(asked: Mapping[str, int]) -> tuple[int, NPUAmounts, int | None, int | None] | str:
    """``(count, per-card NPU amounts, per-card ratio, per-card memory bytes)`` of an NPU request, or
    the reason Koordinator refuses it."""
    names = frozenset(asked)
    if names == _WHOLE:
        ratio = asked[RESOURCE_GPU_MEMORY_RATIO]
        if ratio > 100 and ratio % 100:
            return f"{RESOURCE_GPU_MEMORY_RATIO} {ratio} above 100 must be a multiple of 100"
        count = ratio // 100 if ratio > 100 else 1
        return count, (asked[RESOURCE_HUAWEI_NPU_CORE] // count, 0, 0), ratio // count, None
    if names in (_VNPU, _VNPU | {RESOURCE_HUAWEI_NPU_DVPP}):
        if asked[RESOURCE_GPU_SHARED] > 1:
            return "multiple npu share is not supported on device side"
        dvpp = asked.get(RESOURCE_HUAWEI_NPU_DVPP, 0)
        if dvpp > 100:
            return f"{RESOURCE_HUAWEI_NPU_DVPP} {dvpp} is above 100"
        amounts = (asked[RESOURCE_HUAWEI_NPU_CORE], asked[RESOURCE_HUAWEI_NPU_CPU], dvpp)
        return 1, amounts, None, asked[RESOURCE_GPU_MEMORY]
    return f"{sorted(names)} is not a combination of NPU resources Koordinator accepts"


def npu_capacity(resources: Mapping[str, Quantity]) -> NPUAmounts:
    """npu-core, npu-cpu and npu-dvpp of a Device entry or a ``device-allocated`` entry."""

    def value(name: str) -> int:
        quantity = resources.get(name)
        return quantity.value() if quantity is not None else 0

    return value(RESOURCE_HUAWEI_NPU_CORE), value(RESOURCE_HUAWEI_NPU_CPU), value(RESOURCE_HUAWEI_NPU_DVPP)


def npu_resources(npu: NPUAmounts) -> dict[str, str]:
    """The npu-* entries of a ``device-allocated`` entry (the zero ones left out)."""
    names = (RESOURCE_HUAWEI_NPU_CORE, RESOURCE_HUAWEI_NPU_CPU, RESOURCE_HUAWEI_NPU_DVPP)
    return {name: str(value) for name, value in zip(names, npu, strict=True) if value}
