"""The affinity terms of assigned pods, grouped by distinct term, with per-row carrier counts.

Symmetry makes every cycle ask about the terms of pods already placed: does an existing pod's
required anti-affinity select the incoming pod (then its domain is forbidden), do its affinity
terms attract it (Score)? Pods of one Deployment carry the same term, so the index keeps one
entry per distinct (kind, term, weight), where the term is already resolved against its owner
(namespace, ``matchLabelKeys``), with how many pods carrying it run on each node row (sparse). A cycle
then matches each distinct term against the incoming pod once, and a matching term's domains
are one ``np.bincount`` of its counts. The cache keeps the index up to date (``PodObserver``),
simulated removals included, so preemption sees a victim's terms go away.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
    """A ``PodObserver``: per distinct carried term, how many assigned pods carry it per row.

    Counts are kept sparse (row -> carriers) and made into a row-length array only for the terms
    that select the pod being scheduled: a term of its own on each of 12,500 pods (anti-affinity to
    the pod's own label) would otherwise hold 12,500 arrays of every node."""

    def __init__(self) -> None:
        self._rows: dict[Kind, dict[CarriedTerm, dict[int, int]]] = {kind: {} for kind in Kind}

    def pod_added(self, pod: PodInfo, row: int) -> None:
        for carried in carried_terms(pod):
            self._change(carried, row, 1)

    def pod_removed(self, pod: PodInfo, row: int) -> None:
        for carried in carried_terms(pod):
            self._change(carried, row, -1)

    def _change(self, carried: CarriedTerm, row: int, delta: int) -> None:
        by_term = self._rows[carried.kind]
        rows = by_term.setdefault(carried, {})
        count = rows.get(row, 0) + delta
        if count > 0:
            rows[row] = count
        else:
            rows.pop(row, None)
            if not rows:  # nobody carries it any more: the cycle stops looking at it
                del by_term[carried]

    def carries(self, kind: Kind) -> bool:
        """Whether some assigned pod carries a term of ``kind``."""
        return bool(self._rows[kind])

    def matching(
        self, kind: Kind, selects: Callable[[CarriedTerm], bool], size: int
    ) -> Iterator[tuple[CarriedTerm, IntArray]]:
        """The distinct terms of ``kind`` that ``selects`` accepts, with their carriers per row
        (``size`` long)."""
        for carried, rows in self._rows[kind].items():
            if selects(carried):
                yield carried, _dense(rows, size)

    def terms(self, kind: Kind, size: int) -> Iterator[tuple[CarriedTerm, IntArray]]:
        """Every distinct term of ``kind`` carried by some assigned pod, with its carriers per row."""
        return self.matching(kind, lambda _: True, size)

    def __len__(self) -> int:
        return sum(len(by_term) for by_term in self._rows.values())


def _dense(rows: dict[int, int], size: int) -> IntArray:
    counts: IntArray = np.zeros(size, dtype=np.int64)
    inside = [(row, count) for row, count in rows.items() if row < size]
    if inside:
        index, values = zip(*inside, strict=True)
        counts[np.asarray(index, dtype=np.int64)] = np.asarray(values, dtype=np.int64)
    return counts
