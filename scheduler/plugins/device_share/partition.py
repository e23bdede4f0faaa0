"""GPU partitions: whole cards taken as one of the groupings the node declares (algorithms 6.3 b).

The Device annotation ``scheduling.koordinator.sh/gpu-partitions`` lists, per card count, the
sets of minors that work well together (NVLink rings) with an ``allocationScore``. Partitions are
walked in ascending ``allocationScore`` groups; the first group with a partition entirely free
(and fast enough for the pod's ``ringBusBandwidth``) is used; ``Restricted`` pods look only at
the first group. Among the usable partitions, the one that leaves the most (score-weighted) 8-,
4- and 2-card partitions entirely free wins: bin-packing over the partition table.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from itertools import groupby

from apis.extension.device import GPUPartition, GPUPartitionSpec, GPUPartitionTable

__all__ = ["choose_partition"]

_SIZE_WEIGHTS = ((8, 10000), (4, 100), (2, 1))


def _score(p: GPUPartition) -> int:
    return p.allocation_score or 0


def _fast_enough(p: GPUPartition, spec: GPUPartitionSpec | None) -> bool:
    wanted = spec.ring_bus_bandwidth if spec else None
    if wanted is None:
        return True
    return p.ring_bus_bandwidth is not None and p.ring_bus_bandwidth >= wanted


def _left_free(table: GPUPartitionTable, free: set[int], taken: Collection[int], count: int) -> int:
    after = free - set(taken)
    total = 0
    for size, weight in _SIZE_WEIGHTS:
        if size < count or size not in table:
            continue
        partitions = sorted(table[size], key=_score)
        first = [p for p in partitions if _score(p) == _score(partitions[0])] if partitions else []
        total += weight * sum(_score(p) or 1 for p in first if set(p.minors) <= after)
    return total


def choose_partition(
    table: GPUPartitionTable, free: Collection[int], count: int, spec: GPUPartitionSpec | None
) -> Sequence[int] | None:
    """The minors of the partition to take for ``count`` whole cards, or None when none is usable."""
    free_set = set(free)
    restricted = spec is not None and spec.allocate_policy == "Restricted"
    for _, group in groupby(sorted(table.get(count, ()), key=_score), key=_score):
        usable = [p for p in group if set(p.minors) <= free_set and _fast_enough(p, spec)]
        if usable:
            best = max(usable, key=lambda p: (_left_free(table, free_set, p.minors, count), -min(p.minors)))
            return sorted(best.minors)
        if restricted:
            return None
    return None
