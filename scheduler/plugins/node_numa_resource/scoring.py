"""NodeNUMAResource's resource scorers (algorithms 11.5, ``nnr/least_allocated.go``, ``most_allocated.go``).

For each weighted resource r with allocatable ``cap_r != 0`` that the pod requests (cpu and memory
are always scored): ``req_r = already_r + pod_r``; LeastAllocated ``floor((cap_r - req_r) * 100 /
cap_r)`` (0 when over), MostAllocated ``floor(min(req_r, cap_r) * 100 / cap_r)``; the result is the
weighted mean, floored, 0..100. The same function rates a node (``scoringStrategy``) and a set of
NUMA nodes for a hint (``numaScoringStrategy``, with its own weights).
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.plugins.node_numa_resource.args import ScoringType

__all__ = ["resource_score"]

_ALWAYS = frozenset({"cpu", "memory"})


def resource_score(
    scoring: ScoringType,
    weights: Mapping[str, int],
    allocatable: Mapping[str, int],
    requested: Mapping[str, int],
    pod: Mapping[str, int],
) -> int:
    total = 0
    weight_sum = 0
    for name, weight in weights.items():
        cap = allocatable.get(name, 0)
        if cap == 0 or (name not in _ALWAYS and not pod.get(name)):
            continue
        req = requested.get(name, 0) + pod.get(name, 0)
        if scoring == "MostAllocated":
            part = min(req, cap) * 100 // cap
        else:
            part = (cap - req) * 100 // cap if req <= cap else 0
        total += part * weight
        weight_sum += weight
    return total // weight_sum if weight_sum else 0
