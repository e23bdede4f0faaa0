"""The affinity terms of assigned pods, grouped by distinct term, with per-row carrier counts.

Symmetry makes every cycle ask about the terms of pods already placed: does an existing pod's
required anti-affinity select the incoming pod (then its domain is forbidden), do its affinity
terms attract it (Score)? Pods of one Deployment carry the same term, so the index keeps one
entry per distinct (kind, term, weight), where the term is already resolved against its owner
(namespace, ``matchLabelKeys``), with how many pods carrying it run on each node row. A cycle
then matches each distinct term against the incoming pod once, and a matching term's domains
are one ``np.bincount`` of its counts. The cache keeps the index up to date (``PodObserver``),
simulated removals included, so preemption sees a victim's terms go away.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

import numpy as np

from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.helper.pod_affinity import AffinityTerm, required_terms, weighted_terms

__all__ = ["CarriedTerm", "ExistingTerms", "Kind", "carried_terms"]


class Kind(Enum):
    REQUIRED_AFFINITY = "requiredAffinity"
    REQUIRED_ANTI_AFFINITY = "requiredAntiAffinity"
    PREFERRED_AFFINITY = "preferredAffinity"
    PREFERRED_ANTI_AFFINITY = "preferredAntiAffinity"


@dataclass(frozen=True, slots=True)
class CarriedTerm:
    kind: Kind
    term: AffinityTerm
    weight: int = 0
    """A preferred term's weight (0 for required terms)."""


def carried_terms(pod: PodInfo) -> list[CarriedTerm]:
    affinity = pod.pod.spec.affinity
    if affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None):
        return []
    affine, anti = affinity.pod_affinity, affinity.pod_anti_affinity
    out = [CarriedTerm(Kind.REQUIRED_AFFINITY, t) for t in required_terms(affine, pod)]
    out += [CarriedTerm(Kind.REQUIRED_ANTI_AFFINITY, t) for t in required_terms(anti, pod)]
    out += [CarriedTerm(Kind.PREFERRED_AFFINITY, w.term, w.weight) for w in weighted_terms(affine, pod)]
    out += [CarriedTerm(Kind.PREFERRED_ANTI_AFFINITY, w.term, w.weight) for w in weighted_terms(anti, pod)]
    return out


class ExistingTerms:
    """A ``PodObserver``: per distinct carried term, how many assigned pods carry it per row."""

    def __init__(self) -> None:
        self._counts: dict[Kind, dict[CarriedTerm, IntArray]] = {kind: {} for kind in Kind}
        self._totals: dict[CarriedTerm, int] = {}

    def pod_added(self, pod: PodInfo, row: int) -> None:
        for carried in carried_terms(pod):
            self._change(carried, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        for carried in carried_terms(pod):
            self._change(carried, row, -1)

    def _change(self, carried: CarriedTerm, row: int, delta: int) -> None:
        by_term = self._counts[carried.kind]
        counts = by_term.get(carried)
        if counts is None:
            counts = np.zeros(max(row + 1, 64), dtype=np.int64)
        elif counts.size <= row:
            grown = np.zeros(max(row + 1, counts.size * 2), dtype=np.int64)
            grown[: counts.size] = counts
            counts = grown
        counts[row] += delta
        total = self._totals.get(carried, 0) + delta
        if total <= 0:  # nobody carries it any more: the cycle stops looking at it
            by_term.pop(carried, None)
            self._totals.pop(carried, None)
        else:
            by_term[carried] = counts
            self._totals[carried] = total

    def terms(self, kind: Kind, size: int) -> Iterator[tuple[CarriedTerm, IntArray]]:
        """Every distinct term of ``kind`` carried by some assigned pod, with its carriers per
        row (``size`` long; read, do not keep)."""
        for carried, counts in self._counts[kind].items():
            if counts.size < size:
                grown = np.zeros(size, dtype=np.int64)
                grown[: counts.size] = counts
                counts = grown
                self._counts[kind][carried] = counts
            yield carried, counts[:size]

    def __len__(self) -> int:
        return len(self._totals)
