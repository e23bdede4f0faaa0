"""Counting bounds and a counting plan for the score term of a gang placement.

Once the number of domains used at the nearest PreferGather layer is decided (``k``, the
counting lower bound that a plan in hand reaches), what is left is the node-score sum. CP-SAT's
linear relaxation of "k domains used" is weak (a fraction of every high-score domain), so it
cannot prove a plan optimal and burns its time limit. Two counting arguments close the gap:

* **Upper bound** (Lagrangian): for any price ``lam`` per member, a plan's score is
  ``lam * N + sum over its domains of sum over members (score - lam)``, and a domain holds at
  most its slots, so it is at most ``lam * N + (sum of the k largest h_d(lam))`` with
  ``h_d(lam) = sum of slots * (score - lam)+`` over the domain's node classes. When the layer
  above is decided at one domain, the k domains also share one parent. The bound is convex
  piecewise linear in ``lam`` with breaks at the node scores, so its minimum is at one of them.
* **Plan** (one pod class, no podCountMultiple, apart or spread rules: the counts are the whole
  answer): choose k domains by ``h_d(lam)`` for each ``lam`` (and by capacity), improve the
  choice by swapping one domain at a time, and fill the best-scored slots of the chosen domains.

Slots are members per node class (``multiplicity * max_pods_per_node``), a relaxation of the
packing when several pod classes share a node, so the bound stays valid for every problem.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence

from scheduler.solver.aggregate import NodeClass

__all__ = ["DomainSlots", "best_choice", "score_upper_bound"]

Domain = tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class DomainSlots:
    """Member slots of one domain of the nearest PreferGather layer, by node score."""

    domain: Domain
    slots: tuple[tuple[int, int], ...]
    """(score, slots), best score first."""

    @property
    def capacity(self) -> int:
        return sum(n for _, n in self.slots)

    def value(self, lam: int) -> int:
        return sum(n * (s - lam) for s, n in self.slots if s > lam)

    @staticmethod
    def of(classes: Iterable[NodeClass], depth: int, slots_of: dict[int, int]) -> list[DomainSlots]:
        """Group ``classes`` by their domain at ``depth`` (path length); ``slots_of[c.index]``
        members fit on class c."""
        by_domain: dict[Domain, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        for c in classes:
            n = slots_of.get(c.index, 0)
            if n > 0:
                by_domain[c.path[:depth]][c.score] += n
        return [
            DomainSlots(d, tuple(sorted(hist.items(), reverse=True))) for d, hist in sorted(by_domain.items())
        ]


def _groups(domains: Sequence[DomainSlots], one_parent: bool) -> list[list[DomainSlots]]:
    """The sets of domains a plan may choose from: all, or those under one parent each."""
    if not one_parent:
        return [list(domains)]
    by_parent: dict[Domain, list[DomainSlots]] = defaultdict(list)
    for d in domains:
        by_parent[d.domain[:-1]].append(d)
    return list(by_parent.values())


def score_upper_bound(
    domains: Sequence[DomainSlots], members: int, k: int | None, *, one_parent: bool = False
) -> int:
    """The most any plan of ``members`` members using at most ``k`` of ``domains`` (all of
    them when None; under one parent when ``one_parent``) can score."""
    lams = sorted({0} | {s for d in domains for s, _ in d.slots})
    best: int | None = None
    for lam in lams:
        top = 0
        for group in _groups(domains, one_parent):
            values = sorted((d.value(lam) for d in group), reverse=True)
            top = max(top, sum(values if k is None else values[:k]))
        bound = lam * members + top
        best = bound if best is None else min(best, bound)
    return best if best is not None else 0


def _fill(chosen: Sequence[DomainSlots], members: int) -> int | None:
    """Score of the best ``members`` slots of ``chosen`` (None: they do not hold them)."""
    merged: dict[int, int] = defaultdict(int)
    for d in chosen:
        for s, n in d.slots:
            merged[s] += n
    left, total = members, 0
    for s in sorted(merged, reverse=True):
        take = min(left, merged[s])
        total += take * s
        left -= take
        if left == 0:
            return total
    return None


def best_choice(
    domains: Sequence[DomainSlots], members: int, k: int, *, one_parent: bool = False
) -> tuple[tuple[Domain, ...], int] | None:
    """k domains (under one parent when ``one_parent``) that hold ``members`` with the best score
    found, and that score; None when no such choice was found (no k domains hold them)."""
    lams = sorted({0} | {s for d in domains for s, _ in d.slots})
    best: tuple[list[DomainSlots], int] | None = None
    for group in _groups(domains, one_parent):
        if len(group) < k:
            continue
        starts = {_by(group, None)[:k], *(_by(group, lam)[:k] for lam in lams)}
        for start in sorted(starts, key=lambda ds: [d.domain for d in ds]):
            chosen = list(start)
            score = _fill(chosen, members)
            if score is None:
                continue
            chosen, score = _improve(group, chosen, members, score)
            if best is None or score > best[1]:
                best = (chosen, score)
    if best is None:
        return None
    return tuple(d.domain for d in best[0]), best[1]


def _by(group: Sequence[DomainSlots], lam: int | None) -> tuple[DomainSlots, ...]:
    """The group by capacity (``lam`` None) or by ``h_d(lam)``, best first."""
    if lam is None:
        return tuple(sorted(group, key=lambda d: (-d.capacity, d.domain)))
    return tuple(sorted(group, key=lambda d: (-d.value(lam), -d.capacity, d.domain)))


def _improve(
    group: Sequence[DomainSlots], chosen: list[DomainSlots], members: int, score: int
) -> tuple[list[DomainSlots], int]:
    """Swap one chosen domain for an unchosen one while that raises the score."""
    improved = True
    while improved:
        improved = False
        outside = [d for d in group if d not in chosen]
        for i in range(len(chosen)):
            for d in outside:
                trial = [*chosen[:i], d, *chosen[i + 1 :]]
                got = _fill(trial, members)
                if got is not None and got > score:
                    chosen, score, improved = trial, got, True
                    break
            if improved:
                break
    return chosen, score
