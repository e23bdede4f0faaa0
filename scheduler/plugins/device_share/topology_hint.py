"""The NUMA node sets whose cards (and NICs) hold a pod's devices (Koordinator's
``deviceshare/topology_hint.go``), for NodeNUMAResource to merge with its own hints."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from scheduler.framework.extensions import NUMAHint
from scheduler.plugins.device_share.cycle import Cycle
from scheduler.plugins.device_share.cycle_allocator import CycleAllocator
from scheduler.plugins.device_share.rdma import Refusal

__all__ = ["SAME_CARDS_SCORE", "numa_hints"]

SAME_CARDS_SCORE = 500
"""A set that gives the same cards as the whole node: above any CPU score, so the cards the node
would pick anyway win ties."""


def numa_hints(
    allocator: CycleAllocator, node: str, cycle: Cycle, numa_ids: Sequence[int]
) -> Mapping[str, Sequence[NUMAHint] | None]:
    """Per resource the pod asks (gpu, rdma), every NUMA node set that holds it, the smallest
    preferred."""
    resources = [name for name, asked in (("gpu", cycle.request), ("rdma", cycle.rdma)) if asked is not None]
    whole = allocator.allocate_all(node, cycle)
    best = None if isinstance(whole, Refusal) else sorted(a.minor for a in whole[0])
    found: list[tuple[int, int, int]] = []
    for size in range(1, len(numa_ids) + 1):
        for subset in itertools.combinations(numa_ids, size):
            got = allocator.allocate_all(node, cycle, numa=frozenset(subset))
            if isinstance(got, Refusal):
                continue
            score = SAME_CARDS_SCORE if best is not None and sorted(a.minor for a in got[0]) == best else 0
            found.append((sum(1 << i for i in subset), size, score))
    smallest = min((size for _, size, _ in found), default=0)
    hints = [NUMAHint(mask, size == smallest, score) for mask, size, score in found]
    return {name: hints for name in resources}
