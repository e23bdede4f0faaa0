"""NodeNUMAResource's own NUMA hints (algorithms 11.3, ``nnr/resource_manager.go`` GetTopologyHints).

Every non-empty set of the node's NUMA nodes, by size and then in lexicographic order, gets a full
trial allocation (``allocation.allocate``); each set that holds the pod becomes a hint for every
requested zone resource that no NUMA node of the set lacks. A hint is preferred when no smaller set
holds that resource (under Restricted every set that holds it is). Its score rates the set with
``numaScoringStrategy`` (type and weights), breaking ties between sets of one size.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from scheduler.framework.extensions import NUMAHint
from scheduler.plugins.node_numa_resource.allocation import (
    PodNUMARequest,
    allocate,
    numa_free,
    numa_used,
    zone_request,
)
from scheduler.plugins.node_numa_resource.amplification import amplify
from scheduler.plugins.node_numa_resource.args import NUMAScoringStrategy
from scheduler.plugins.node_numa_resource.ledger import NodeCPUAllocation
from scheduler.plugins.node_numa_resource.scoring import resource_score
from scheduler.plugins.node_numa_resource.topology_manager import mask_of
from scheduler.plugins.node_numa_resource.topology_options import TopologyOptions

__all__ = ["resource_hints"]


def resource_hints(
    options: TopologyOptions,
    ledger: NodeCPUAllocation,
    request: PodNUMARequest,
    policy: str,
    scoring: NUMAScoringStrategy,
) -> Mapping[str, Sequence[NUMAHint]]:
    wanted = zone_request(options, request.resources)
    if request.bind.bind and "cpu" not in wanted and request.num_cpus:
        wanted["cpu"] = request.num_cpus * 1000
    if request.bind.bind and "cpu" in wanted:
        # A cpuset pod's CPUs are rated amplified (the trial allocation splits its plain CPUs).
        wanted["cpu"] = amplify(wanted["cpu"], options.cpu_ratio)
    ids = options.numa_ids
    free = numa_free(options, ledger, request.bind)
    lacking = {name: {i for i in ids if free[i].get(name, 0) <= 0} for name in wanted}
    weights = scoring.weights()
    found: dict[str, list[tuple[int, int, int]]] = {name: [] for name in wanted}
    for size in range(1, len(ids) + 1):
        for subset in itertools.combinations(ids, size):
            mask = mask_of(subset)
            if isinstance(allocate(options, ledger, request, mask), str):
                continue
            allocatable: dict[str, int] = {}
            used: dict[str, int] = {}
            for i in subset:
                for name, amount in options.numa_allocatable[i].items():
                    allocatable[name] = allocatable.get(name, 0) + amount
                for name, amount in numa_used(options, ledger, i).items():
                    used[name] = used.get(name, 0) + amount
            score = resource_score(scoring.scoring_type, weights, allocatable, used, wanted)
            for name in wanted:
                if not lacking[name] & set(subset):
                    found[name].append((mask, size, score))
    hints: dict[str, list[NUMAHint]] = {}
    for name, masks in found.items():
        smallest = min((size for _, size, _ in masks), default=0)
        hints[name] = [
            NUMAHint(mask, size == smallest or policy == "Restricted", score) for mask, size, score in masks
        ]
    return hints
