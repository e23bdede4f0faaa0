"""The scheduler's topology manager: merge the NUMA hints of every provider and apply a policy.

The kubelet's topology manager as Koordinator moved it into the scheduler (algorithms 11.3,
``pkg/scheduler/frameworkext/topologymanager/``). Each provider (NodeNUMAResource for cpu, memory and
batch resources, DeviceShare for GPUs and NICs) answers per resource with a list of hints: NUMA
masks that could hold the request, ``preferred`` when the mask is as narrow as it can be. Masks are
ints, bit i = NUMA node i.

1. Flatten the providers' maps into one list per resource: a provider with no map, or a resource
   with None, has no preference (one preferred any-NUMA hint); an empty list cannot be satisfied
   anywhere (one unpreferred any-NUMA hint, and the reason ``Unsatisfied NUMA <res>``).
2. Every combination of one hint per resource is AND-ed into a mask (empty: dropped); it is
   preferred when all its hints are and their masks agree, and the exclusive check does not
   clear it; its score is the sum of the scores of the hints whose mask equals it.
3. The best: preferred over not; then narrower (fewer NUMA nodes, then the smaller mask); at
   equal width a higher score.
4. The policy decides (None admits with no mask, BestEffort always admits, Restricted admits a
   preferred best with no reasons, SingleNUMANode only single-NUMA preferred hints).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from scheduler.framework.extensions import NUMAHint

__all__ = [
    "Admission",
    "NUMAHint",
    "NUMAStatus",
    "ProviderHints",
    "admit",
    "bits",
    "mask_of",
    "numa_ids_of",
]

NUMAStatus = Literal["idle", "single", "shared"]
"""A NUMA node's cpuset holders (11.3): none, only single-NUMA pods, or some multi-NUMA pod."""


ProviderHints = Mapping[str, Sequence[NUMAHint] | None] | None
"""One provider's hints per resource; None or {}: no preference for any resource."""


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    mask: int | None
    """The NUMA nodes the pod gets on this node; None: no NUMA affinity (all of them)."""
    preferred: bool
    reasons: tuple[str, ...] = ()
    score: int = 0


def mask_of(numa_ids: Sequence[int] | frozenset[int]) -> int:
    mask = 0
    for numa in numa_ids:
        mask |= 1 << numa
    return mask


def numa_ids_of(mask: int) -> tuple[int, ...]:
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


def bits(mask: int) -> int:
    return mask.bit_count()


def _narrower(a: int, b: int) -> bool:
    """The kubelet's ``IsNarrowerThan``: fewer NUMA nodes, or as many and a smaller mask."""
    return bits(a) < bits(b) or (bits(a) == bits(b) and a < b)


def _flatten(providers: Sequence[ProviderHints]) -> list[tuple[str, list[NUMAHint]]]:
    """(resource, its hints) per resource of every provider; an empty list: unsatisfiable."""
    lists: list[tuple[str, list[NUMAHint]]] = []
    for hints in providers:
        if not hints:
            lists.append(("", [NUMAHint(None, True)]))
            continue
        for resource in sorted(hints):
            listed = hints[resource]
            lists.append((resource, [NUMAHint(None, True)] if listed is None else list(listed)))
    return lists


def exclusive_ok(mask: int, status: Mapping[int, NUMAStatus]) -> bool:
    """``singleNUMANodeExclusive: Required``: a multi-NUMA mask touches no NUMA node that holds
    single-NUMA pods, a single-NUMA mask no NUMA node that holds a multi-NUMA pod."""
    ids = numa_ids_of(mask)
    if len(ids) > 1:
        return all(status.get(i, "idle") != "single" for i in ids)
    return all(status.get(i, "idle") != "shared" for i in ids)


def _merge(
    all_mask: int,
    lists: Sequence[Sequence[NUMAHint]],
    status: Mapping[int, NUMAStatus] | None,
) -> tuple[int, bool, int]:
    """The best (mask, preferred, score) over every combination of one hint per list."""
    best_mask, best_preferred, best_score = all_mask, False, 0
    for permutation in itertools.product(*lists):
        merged = all_mask
        preferred = True
        masks: set[int] = set()
        for hint in permutation:
            if hint.mask is not None:
                merged &= hint.mask
                masks.add(hint.mask)
            preferred = preferred and hint.preferred
        if merged == 0:
            continue
        preferred = preferred and len(masks) <= 1
        if preferred and status is not None and not exclusive_ok(merged, status):
            preferred = False
        score = sum(h.score for h in permutation if h.mask == merged)
        if preferred != best_preferred:
            if preferred:
                best_mask, best_preferred, best_score = merged, preferred, score
            continue
        if _narrower(merged, best_mask) or (
            bits(merged) == bits(best_mask) and merged != best_mask and score > best_score
        ):
            best_mask, best_score = merged, score
        elif merged == best_mask and score > best_score:
            best_score = score
    return best_mask, best_preferred, best_score


def admit(
    policy: str,
    numa_ids: Sequence[int],
    providers: Sequence[ProviderHints],
    *,
    exclusive_status: Mapping[int, NUMAStatus] | None = None,
) -> Admission:
    """Whether a node under ``policy`` admits the pod, and with which NUMA mask.

    ``exclusive_status``: the NUMA nodes' statuses when the pod's ``singleNUMANodeExclusive`` is
    Required (None: no exclusive check).
    """
    if policy in ("", "None"):
        return Admission(True, None, True)
    all_mask = mask_of(numa_ids)
    named = _flatten(providers)
    if policy == "SingleNUMANode":
        named = [
            (name, [h for h in hints if h.preferred and (h.mask is None or bits(h.mask) == 1)])
            for name, hints in named
        ]
    reasons = [f"Unsatisfied NUMA {name}" for name, hints in named if not hints]
    lists = [hints or [NUMAHint(None, False)] for _, hints in named]
    mask, preferred, score = _merge(all_mask, lists, exclusive_status)
    if policy == "BestEffort":
        # Reasons are ignored; an unpreferred best falls back to all NUMA nodes as the kubelet does.
        return Admission(True, mask if preferred else all_mask, preferred, (), score)
    result: int | None = mask
    if policy == "SingleNUMANode" and mask == all_mask:
        result = None  # a 1-NUMA machine: no NUMA affinity, as Koordinator
    return Admission(not reasons and preferred, result, preferred, tuple(reasons), score)
