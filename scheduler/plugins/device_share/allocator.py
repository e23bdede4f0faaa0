"""Which GPUs of one node a pod gets: pure logic over the node's cards and what is in use.

Koordinator's order (algorithms 6.3): a request for several cards, or one with a required
topology scope, searches the scopes PCIe switch < NUMA node < node for the smallest one that holds
it (a scope coarser than ``requiredTopologyScope`` may not hold it), preferring scopes already
partly used (bin-packing the topology); inside the scope, and for a single card otherwise, cards
are taken by device score (the scoring strategy), then by minor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from apis.extension.device import DEVICE_TOPOLOGY_SCOPE_LEVEL, DeviceTopologyScope
from scheduler.plugins.device_share.npu import NPUAmounts
from scheduler.plugins.device_share.request import GPURequest

__all__ = [
    "GPU",
    "Allocation",
    "GPUUsage",
    "ScoringType",
    "Weights",
    "allocate",
    "device_score",
    "fits",
    "node_score",
    "percent",
    "take",
]

ScoringType = Literal["LeastAllocated", "MostAllocated"]


@dataclass(frozen=True, slots=True)
class GPU:
    """One healthy card as the Device object reports it."""

    minor: int
    memory: int
    """Total memory in bytes."""
    core: int = 100
    ratio: int = 100
    numa: int | None = None
    pcie: str | None = None
    uuid: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    npu: NPUAmounts = (0, 0, 0)
    """An Ascend NPU's npu-core, npu-cpu and npu-dvpp (zero on other cards)."""


@dataclass(frozen=True, slots=True)
class GPUUsage:
    """What is allocated on one card."""

    core: int = 0
    memory: int = 0
    ratio: int = 0
    npu: NPUAmounts = (0, 0, 0)

    def __add__(self, other: GPUUsage) -> GPUUsage:
        npu = (self.npu[0] + other.npu[0], self.npu[1] + other.npu[1], self.npu[2] + other.npu[2])
        return GPUUsage(self.core + other.core, self.memory + other.memory, self.ratio + other.ratio, npu)

    def __sub__(self, other: GPUUsage) -> GPUUsage:
        npu = (self.npu[0] - other.npu[0], self.npu[1] - other.npu[1], self.npu[2] - other.npu[2])
        return GPUUsage(self.core - other.core, self.memory - other.memory, self.ratio - other.ratio, npu)

    @property
    def idle(self) -> bool:
        return self.core <= 0 and self.memory <= 0 and self.ratio <= 0 and max(self.npu) <= 0


@dataclass(frozen=True, slots=True)
class Allocation:
    """What one card gives the pod."""

    minor: int
    usage: GPUUsage


def take(gpu: GPU, request: GPURequest) -> GPUUsage:
    """What ``request`` takes on ``gpu``: a whole-card request takes all of it."""
    if request.whole:
        return GPUUsage(gpu.core, gpu.memory, gpu.ratio, gpu.npu)
    return GPUUsage(request.core, request.memory_on(gpu.memory), request.ratio_on(gpu.memory), request.npu)


def fits(gpu: GPU, used: GPUUsage, request: GPURequest) -> bool:
    """Whether ``gpu`` with ``used`` allocated can still give ``request`` its per-card share."""
    if request.whole:
        # An NPU request needs an NPU (its npu-core); any other whole card needs gpu-core.
        kind_fits = request.npu[0] <= gpu.npu[0] if any(request.npu) else gpu.core > 0
        return used.idle and kind_fits
    want = take(gpu, request)
    return (
        used.core + want.core <= gpu.core
        and used.memory + want.memory <= gpu.memory
        and used.ratio + want.ratio <= gpu.ratio
        and all(u + w <= cap for u, w, cap in zip(used.npu, want.npu, gpu.npu, strict=True))
    )


def percent(requested: int, total: int, strategy: ScoringType) -> int:
    if strategy == "MostAllocated":
        return min(requested, total) * 100 // total
    return (total - requested) * 100 // total if requested <= total else 0


Weights = tuple[int, int]
"""Score weights of (gpu-memory-ratio, gpu-memory), from the args' ``scoringStrategy.resources``
(0: the resource is not scored)."""


def _weighted(parts: list[tuple[int, int]]) -> int:
    total = sum(w for _, w in parts)
    return sum(p * w for p, w in parts) // total if total else 0


def device_score(
    gpu: GPU, used: GPUUsage, request: GPURequest, strategy: ScoringType, weights: Weights = (1, 1)
) -> int:
    """Koordinator's device score over gpu-memory-ratio and gpu-memory (weight 1 each): how full
    (MostAllocated) or how empty (LeastAllocated) the card is once the request is on it."""
    want = take(gpu, request)
    parts: list[tuple[int, int]] = []
    if gpu.ratio and weights[0]:
        parts.append((percent(used.ratio + want.ratio, gpu.ratio, strategy), weights[0]))
    if gpu.memory and weights[1]:
        parts.append((percent(used.memory + want.memory, gpu.memory, strategy), weights[1]))
    return _weighted(parts)


def node_score(
    gpus: Sequence[GPU],
    usage: Mapping[int, GPUUsage],
    request: GPURequest,
    strategy: ScoringType,
    weights: Weights = (1, 1),
) -> int:
    """Koordinator's node score: the device formula over the node's summed totals and free amounts,
    with the per-card request (0..100 before normalization)."""
    total_ratio = sum(g.ratio for g in gpus)
    total_memory = sum(g.memory for g in gpus)
    used_ratio = sum(usage.get(g.minor, GPUUsage()).ratio for g in gpus)
    used_memory = sum(usage.get(g.minor, GPUUsage()).memory for g in gpus)
    parts: list[tuple[int, int]] = []
    if total_ratio and weights[0]:
        want = 100 if request.whole else request.ratio_on(gpus[0].memory)
        parts.append((percent(used_ratio + want, total_ratio, strategy), weights[0]))
    if total_memory and weights[1]:
        want = gpus[0].memory if request.whole else request.memory_on(gpus[0].memory)
        parts.append((percent(used_memory + want, total_memory, strategy), weights[1]))
    return _weighted(parts)


_SCOPES: tuple[DeviceTopologyScope, ...] = ("PCIe", "NUMANode", "Node")
"""Finest to coarsest."""


def _scope_key(gpu: GPU, scope: DeviceTopologyScope) -> object | None:
    """The scope ``gpu`` belongs to at this level (None: its topology is unknown at this level)."""
    if scope == "Node":
        return ""
    if scope == "NUMANode":
        return gpu.numa
    return (gpu.numa, gpu.pcie) if gpu.pcie is not None else None


def _order(
    gpus: Iterable[GPU],
    usage: Mapping[int, GPUUsage],
    request: GPURequest,
    strategy: ScoringType,
    weights: Weights,
) -> list[GPU]:
    def key(g: GPU) -> tuple[int, int]:
        return -device_score(g, usage.get(g.minor, GPUUsage()), request, strategy, weights), g.minor

    return sorted(gpus, key=key)


def allocate(
    gpus: Sequence[GPU],
    usage: Mapping[int, GPUUsage],
    request: GPURequest,
    strategy: ScoringType = "MostAllocated",
    required_scope: DeviceTopologyScope | None = None,
    weights: Weights = (1, 1),
) -> list[Allocation] | None:
    """The cards ``request`` gets on a node with ``gpus`` and ``usage`` (minor -> allocated), or
    None when the node cannot hold it."""
    free = [g for g in gpus if fits(g, usage.get(g.minor, GPUUsage()), request)]
    if len(free) < request.count:
        return None
    if request.count == 1 and required_scope in (None, "Device", "Node"):
        chosen = _order(free, usage, request, strategy, weights)[:1]
    else:
        chosen_or_none = _by_scope(gpus, free, usage, request, strategy, weights, required_scope)
        if chosen_or_none is None:
            return None
        chosen = chosen_or_none
    return [Allocation(g.minor, take(g, request)) for g in chosen]


def _by_scope(
    gpus: Sequence[GPU],
    free: Sequence[GPU],
    usage: Mapping[int, GPUUsage],
    request: GPURequest,
    strategy: ScoringType,
    weights: Weights,
    required_scope: DeviceTopologyScope | None,
) -> list[GPU] | None:
    limit = DEVICE_TOPOLOGY_SCOPE_LEVEL[required_scope] if required_scope not in (None, "Device") else 1
    for scope in _SCOPES:
        if DEVICE_TOPOLOGY_SCOPE_LEVEL[scope] < limit:
            break
        groups: dict[object, list[GPU]] = {}
        for gpu in free:
            key = _scope_key(gpu, scope)
            if key is not None:
                groups.setdefault(key, []).append(gpu)
        fitting = [members for members in groups.values() if len(members) >= request.count]
        if not fitting:
            continue

        def partly_used(members: list[GPU], scope: DeviceTopologyScope = scope) -> int:
            key = _scope_key(members[0], scope)
            return sum(
                1 for g in gpus if _scope_key(g, scope) == key and not usage.get(g.minor, GPUUsage()).idle
            )

        best = min(fitting, key=lambda m: (-partly_used(m), min(g.minor for g in m)))
        return _order(best, usage, request, strategy, weights)[: request.count]
    return None
