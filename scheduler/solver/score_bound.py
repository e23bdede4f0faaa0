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
* **Exact** (`exact_choice`): when the bound and the plan are further apart than the tolerated
  gap, a dynamic programme over the domains (chosen count x members placed, each domain adding
  its best t slots) gives the best choice of at most k domains itself: the true optimum of the
  slot relaxation, so both a bound and, where the counts are the whole answer, a plan.
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

import numpy as np

from scheduler.solver.aggregate import NodeClass

__all__ = ["DomainSlots", "best_choice", "exact_choice", "score_upper_bound"]

EXACT_WORK_LIMIT = 150_000_000
"""Most array cells `exact_choice` may touch (slots x k x members summed over the domains), about
0.1 s on the development machine: a 1,024-member gang over 64 blocks."""

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
    """The most any plan of ``members`` members using at most ``k`` of ``domains`` (any number
    when None) can score; the k share one parent when ``one_parent``."""
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


def best_choice(
    domains: Sequence[DomainSlots], members: int, k: int, *, one_parent: bool = False
) -> tuple[tuple[Domain, ...], int] | None:
    """k domains (under one parent when ``one_parent``) that hold ``members`` with the best score
    found, and that score; None when no such choice was found (no k domains hold them)."""
    scores = sorted({s for d in domains for s, _ in d.slots}, reverse=True)
    best: tuple[tuple[Domain, ...], int] | None = None
    for group in _groups(domains, one_parent):
        if len(group) < k:
            continue
        table = _Table(group, scores, members)
        starts = {table.by_capacity()[:k], *(table.by_value(lam)[:k] for lam in [0, *scores])}
        for start in sorted(starts):
            found = table.improve(list(start))
            if found is not None and (best is None or found[1] > best[1]):
                best = (tuple(sorted(group[i].domain for i in found[0])), found[1])
    return best


class _Table:
    """A group's slots as a matrix (domain x score, best score first), to score many choices of
    domains at once."""

    def __init__(self, group: Sequence[DomainSlots], scores: list[int], members: int) -> None:
        index = {s: i for i, s in enumerate(scores)}
        self.slots = np.zeros((len(group), len(scores)), dtype=np.int64)
        for row, d in enumerate(group):
            for s, n in d.slots:
                self.slots[row, index[s]] = n
        self.scores = np.array(scores, dtype=np.int64)
        self.members = members

    def by_capacity(self) -> tuple[int, ...]:
        return tuple(int(i) for i in np.lexsort((np.arange(len(self.slots)), -self.slots.sum(axis=1))))

    def by_value(self, lam: int) -> tuple[int, ...]:
        value = self.slots @ np.maximum(self.scores - lam, 0)
        return tuple(int(i) for i in np.lexsort((np.arange(len(self.slots)), -value)))

    def fill(self, totals: np.ndarray) -> np.ndarray:
        """Score of the best ``members`` slots for each row of ``totals`` (-1: too few slots)."""
        before = np.cumsum(totals, axis=-1) - totals
        take = np.clip(self.members - before, 0, totals)
        score = take @ self.scores
        return np.where(totals.sum(axis=-1) >= self.members, score, -1)

    def improve(self, chosen: list[int]) -> tuple[list[int], int] | None:
        """Make the best swap of one chosen domain for an unchosen one while it raises the score."""
        score = int(self.fill(self.slots[chosen].sum(axis=0)))
        if score < 0:
            return None
        while True:
            outside = [i for i in range(len(self.slots)) if i not in chosen]
            if not outside:
                return chosen, score
            base = self.slots[chosen].sum(axis=0)
            trial = base[None, None, :] - self.slots[chosen][:, None, :] + self.slots[outside][None, :, :]
            got = self.fill(trial)
            i, j = np.unravel_index(int(np.argmax(got)), got.shape)
            if got[i, j] <= score:
                return chosen, score
            chosen = sorted([*chosen[:i], outside[j], *chosen[i + 1 :]])
            score = int(got[i, j])


def exact_choice(
    domains: Sequence[DomainSlots], members: int, k: int, *, one_parent: bool = False
) -> tuple[tuple[Domain, ...], int] | None:
    """At most k domains (under one parent when ``one_parent``) whose best ``members`` slots score
    the most, and that score; None when none hold them or the programme would be too big."""
    best: tuple[tuple[Domain, ...], int] | None = None
    groups = _groups(domains, one_parent)
    work = sum(sum(min(d.capacity, members) for d in group) for group in groups) * (k + 1) * (members + 1)
    if work > EXACT_WORK_LIMIT:
        return None
    for group in groups:
        found = _programme(group, members, k)
        if found is not None and (best is None or found[1] > best[1]):
            best = found
    return best


_NONE = -(1 << 50)


def _programme(group: Sequence[DomainSlots], members: int, k: int) -> tuple[tuple[Domain, ...], int] | None:
    # values[i][j, m]: the best score of m members in j of the first i domains.
    value = np.full((k + 1, members + 1), _NONE, dtype=np.int64)
    value[0, 0] = 0
    values, prefixes = [value], []
    for d in group:
        prefix = np.cumsum([0, *(s for s, n in d.slots for _ in range(n))][: members + 1], dtype=np.int64)
        nxt = value.copy()
        for t in range(1, len(prefix)):
            np.maximum(nxt[1:, t:], value[:-1, : members + 1 - t] + prefix[t], out=nxt[1:, t:])
        value = nxt
        values.append(value)
        prefixes.append(prefix)
    column = value[:, members]
    j = int(np.argmax(column))
    if column[j] <= _NONE // 2:
        return None
    score, m, chosen = int(column[j]), members, []
    for i in range(len(group), 0, -1):  # walk back: which t of domain i-1 gave the value
        here, before, prefix = values[i][j, m], values[i - 1], prefixes[i - 1]
        if here == before[j, m]:
            continue
        t = next(t for t in range(1, min(len(prefix), m + 1)) if before[j - 1, m - t] + prefix[t] == here)
        chosen.append(group[i - 1].domain)
        j, m = j - 1, m - t
    return tuple(sorted(chosen)), score
