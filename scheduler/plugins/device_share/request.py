"""A pod's GPU request, validated and converted as Koordinator's DeviceShare does (algorithms 6.2).

Koordinator accepts a fixed set of combinations of GPU resource names and turns each into a
per-card request and a card count; any other combination is rejected for every node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from apis.extension.device import (
    RESOURCE_AMD_GPU,
    RESOURCE_GPU,
    RESOURCE_GPU_CORE,
    RESOURCE_GPU_MEMORY,
    RESOURCE_GPU_MEMORY_RATIO,
    RESOURCE_GPU_SHARED,
    RESOURCE_HYGON_DCU,
    RESOURCE_NVIDIA_GPU,
    canonical_device_resource,
)
from scheduler.plugins.device_share.npu import NPU_RESOURCES, NPUAmounts, npu_request_parts

__all__ = ["GPU_RESOURCES", "GPURequest", "InvalidGPURequest", "gpu_request"]

_WHOLE_CARD = (RESOURCE_NVIDIA_GPU, RESOURCE_AMD_GPU, RESOURCE_HYGON_DCU)
GPU_RESOURCES: frozenset[str] = frozenset(
    (
        *_WHOLE_CARD,
        RESOURCE_GPU,
        RESOURCE_GPU_CORE,
        RESOURCE_GPU_MEMORY,
        RESOURCE_GPU_MEMORY_RATIO,
        RESOURCE_GPU_SHARED,
        *NPU_RESOURCES,
    )
)
"""Canonical names of the GPU resources DeviceShare allocates (NPUs are ``type: gpu`` devices)."""


class InvalidGPURequest(ValueError):
    """The pod's GPU resources are not a combination Koordinator accepts."""


@dataclass(frozen=True, slots=True)
class GPURequest:
    """What the pod needs from each of ``count`` distinct cards."""

    count: int
    core: int
    """gpu-core per card (percent of its compute)."""
    ratio: int | None
    """gpu-memory-ratio per card; None when the pod asked for memory in bytes."""
    memory: int | None
    """gpu-memory bytes per card; None when the pod asked for a ratio."""
    npu: NPUAmounts = (0, 0, 0)
    """Huawei npu-core, npu-cpu and npu-dvpp per card (an Ascend request)."""
    asked: tuple[tuple[str, int], ...] = ()
    """The per-card NPU resources as Koordinator names them (NPU requests only; templates.py derives
    the same for other requests)."""
    _hash: int = field(init=False, repr=False, compare=False)
    """The fields' hash, taken once: requests key the mixes, the kept shapes and the kept one-card
    parts, looked up many times per pod (the mix's shapes one by one), and a dataclass would hash
    its fields each time."""

    whole: bool = field(init=False, repr=False, compare=False)
    """Every card is taken whole: it must be entirely free (of the fields above, taken once: read
    per card and per shape)."""

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_hash", hash((self.count, self.core, self.ratio, self.memory, self.npu, self.asked))
        )
        object.__setattr__(self, "whole", self.core >= 100 and self.ratio is not None and self.ratio >= 100)

    def __hash__(self) -> int:
        return self._hash

    def memory_on(self, total_memory: int) -> int:
        """Bytes this request takes on a card with ``total_memory`` (ratio converted)."""
        if self.memory is not None:
            return self.memory
        return (self.ratio or 0) * total_memory // 100

    def ratio_on(self, total_memory: int) -> int:
        """Memory ratio this request takes on a card with ``total_memory`` (bytes converted, rounded up
        so that ratios never add up to more memory than the card has)."""
        if self.ratio is not None:
            return self.ratio
        if total_memory <= 0:
            return 100
        return -(-(self.memory or 0) * 100 // total_memory)


def _per_card(total: int, count: int, name: str) -> int:
    if total % count:
        raise InvalidGPURequest(f"{name} {total} is not a multiple of {count}")
    return total // count


def _percent_count(value: int, name: str) -> int:
    """Cards a percent request spans: values above 100 must be whole multiples of 100."""
    if value <= 0:
        raise InvalidGPURequest(f"{name} must be positive")
    if value > 100:
        if value % 100:
            raise InvalidGPURequest(f"{name} {value} above 100 must be a multiple of 100")
        return value // 100
    return 1


_READ_KEPT = 4096
_read: dict[tuple[tuple[str, int], ...], GPURequest | str | None] = {}
"""What pods' requests read as (the reason where they are refused), up to ``_READ_KEPT`` distinct
ones (then forgotten all at once): every cycle and every pod event of a GPU pod asks, while a
cluster's pods come in a few shapes."""


def gpu_request(requests: Mapping[str, int]) -> GPURequest | None:
    """The pod's GPU request (None: it asks for no GPU), from its summed container requests."""
    key = tuple(requests.items())
    if key in _read:
        read = _read[key]
    else:
        try:
            read = _gpu_request(requests)
        except InvalidGPURequest as exc:
            read = str(exc)
        if len(_read) >= _READ_KEPT:
            _read.clear()
        _read[key] = read
    if isinstance(read, str):
        raise InvalidGPURequest(read)
    return read


def _gpu_request(requests: Mapping[str, int]) -> GPURequest | None:
    asked: dict[str, int] = {}
    for name, value in requests.items():
        canonical = canonical_device_resource(name)
        if canonical in GPU_RESOURCES and value > 0:
            asked[canonical] = asked.get(canonical, 0) + value
    if not asked:
        return None
    names = frozenset(asked)
    if names & NPU_RESOURCES:
        return _npu_request(asked)
    whole = names & frozenset(_WHOLE_CARD)
    if whole:
        if len(names) != 1:
            raise InvalidGPURequest(f"{sorted(whole)[0]} cannot be combined with other GPU resources")
        return GPURequest(count=asked[next(iter(whole))], core=100, ratio=100, memory=None)
    core = asked.get(RESOURCE_GPU_CORE)
    ratio = asked.get(RESOURCE_GPU_MEMORY_RATIO)
    memory = asked.get(RESOURCE_GPU_MEMORY)
    if RESOURCE_GPU in names:
        if len(names) != 1:
            raise InvalidGPURequest(f"{RESOURCE_GPU} cannot be combined with other GPU resources")
        value = asked[RESOURCE_GPU]
        count = _percent_count(value, RESOURCE_GPU)
        return GPURequest(count=count, core=min(value, 100), ratio=min(value, 100), memory=None)
    if ratio is not None and memory is not None:
        raise InvalidGPURequest(f"{RESOURCE_GPU_MEMORY} and {RESOURCE_GPU_MEMORY_RATIO} cannot be combined")
    if RESOURCE_GPU_SHARED in names:
        count = asked[RESOURCE_GPU_SHARED]
        if core is None and ratio is None and memory is None:
            raise InvalidGPURequest(f"{RESOURCE_GPU_SHARED} needs gpu-core, gpu-memory or gpu-memory-ratio")
        per_core = _per_card(core, count, RESOURCE_GPU_CORE) if core is not None else 0
        per_ratio = _per_card(ratio, count, RESOURCE_GPU_MEMORY_RATIO) if ratio is not None else None
        per_memory = _per_card(memory, count, RESOURCE_GPU_MEMORY) if memory is not None else None
        if per_core > 100 or (per_ratio or 0) > 100:
            raise InvalidGPURequest(f"a {RESOURCE_GPU_SHARED} request asks more than 100 per card")
        if per_ratio is None and per_memory is None:
            per_ratio = 0
        return GPURequest(count=count, core=per_core, ratio=per_ratio, memory=per_memory)
    if memory is not None:
        if core is not None and core > 100:
            raise InvalidGPURequest(f"{RESOURCE_GPU_CORE} above 100 needs {RESOURCE_GPU_MEMORY_RATIO}")
        return GPURequest(count=1, core=core or 0, ratio=None, memory=memory)
    if ratio is None:
        raise InvalidGPURequest(
            f"{RESOURCE_GPU_CORE} needs {RESOURCE_GPU_MEMORY_RATIO} or {RESOURCE_GPU_MEMORY}"
        )
    count = _percent_count(ratio, RESOURCE_GPU_MEMORY_RATIO)
    if core is not None and _percent_count(core, RESOURCE_GPU_CORE) != count and core > 100:
        raise InvalidGPURequest(
            f"{RESOURCE_GPU_CORE} and {RESOURCE_GPU_MEMORY_RATIO} span different card counts"
        )
    per_core = (core // count if core > 100 else core) if core is not None else 0
    return GPURequest(count=count, core=per_core, ratio=ratio // count, memory=None)


def _npu_request(asked: Mapping[str, int]) -> GPURequest:
    parts = npu_request_parts(asked)
    if isinstance(parts, str):
        raise InvalidGPURequest(parts)
    count, npu, ratio, memory = parts
    whole = ratio is not None and ratio >= 100
    per_card = {name: value // count for name, value in asked.items() if name != RESOURCE_GPU_SHARED}
    return GPURequest(
        count=count,
        core=100 if whole else 0,
        ratio=ratio,
        memory=memory,
        npu=npu,
        asked=tuple(sorted(per_card.items())),
    )
