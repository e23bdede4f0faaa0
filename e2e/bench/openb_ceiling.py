"""The most GPU any placement of a replay's GPU-sharing pods could leave allocated.

A card that holds shares of one GPU (a pod asking for ``gpu_milli`` < 1000 of one card) keeps
whatever its shares do not add up to: two 470-milli pods leave 60 of it free, an 810-milli pod 190
unless a pod of at most 190 joins it. However the shares are placed, they need some fewest number
of cards, and everything those cards keep free is GPU no pod allocates. That number is a
bin-packing (cutting-stock) optimum: the shares are grouped by size, every way of filling one card
with them (a pattern) is listed, and CP-SAT finds the fewest patterns that hold every share. Its
proven lower bound, never its best solution, is what the ceiling is computed from, so the ceiling
holds even when the solver runs out of time.

Nothing else constrains the packing (which node, which model, cpu and memory beside the card): a
real placement can only need more cards, so the ceiling is an upper bound on the allocation of
any placement of the same pods. A scheduler that places pods one at a time, each wherever it fits,
must place every sharing pod that arrives while a card has room for it; a better placement of the
same stream can change which of the last pods are placed, and nothing more.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from ortools.sat.python import cp_model
from pydantic import BaseModel

from e2e.bench.openb_trace import FULL_GPU_MILLI

__all__ = ["MAX_PATTERNS", "SharingCeiling", "sharing_ceiling"]

MAX_PATTERNS = 100_000
"""Beyond this many ways to fill a card the ceiling is not computed (None)."""


class SharingCeiling(BaseModel, frozen=True):
    cards: int
    """The fewest cards that can hold the shares (the solver's proven lower bound)."""
    proven_optimal: bool
    """``cards`` is also reached by a packing the solver found."""
    idle_milli: int
    """What those cards keep free, in thousandths of a GPU."""
    max_allocated_percent: float
    """Of the cluster's GPUs: no placement of these pods allocates more."""


def _patterns(sizes: Sequence[int], demand: Counter[int]) -> list[tuple[int, ...]] | None:
    """Every maximal way to fill one card: counts per size (largest first), none above its demand."""
    found: list[tuple[int, ...]] = []
    counts: list[int] = []

    def fill(i: int, room: int) -> bool:
        if i == len(sizes):
            if any(counts) and all(s > room or counts[j] == demand[s] for j, s in enumerate(sizes)):
                found.append(tuple(counts))
            return len(found) <= MAX_PATTERNS
        size = sizes[i]
        for k in range(min(room // size, demand[size]), -1, -1):
            counts.append(k)
            ok = fill(i + 1, room - k * size)
            counts.pop()
            if not ok:
                return False
        return True

    return found if fill(0, FULL_GPU_MILLI) else None


def sharing_ceiling(
    shares: Sequence[int], capacity_milli: int, seconds: float = 30.0
) -> SharingCeiling | None:
    """The ceiling for pods holding ``shares`` (gpu milli of one card each, below a whole card);
    None when there are none, or too many ways to fill a card to list."""
    if not shares:
        return None
    if any(not 0 < s < FULL_GPU_MILLI for s in shares):
        raise ValueError("a share must be between 0 and one whole card")
    demand = Counter(shares)
    sizes = sorted(demand, reverse=True)
    patterns = _patterns(sizes, demand)
    if patterns is None:
        return None
    model = cp_model.CpModel()
    used = [model.new_int_var(0, len(shares), f"pattern{j}") for j in range(len(patterns))]
    for i, size in enumerate(sizes):
        model.add(sum(p[i] * used[j] for j, p in enumerate(patterns) if p[i]) >= demand[size])
    model.minimize(sum(used))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = 2
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    cards = math.ceil(solver.best_objective_bound - 1e-6)
    idle = cards * FULL_GPU_MILLI - sum(shares)
    return SharingCeiling(
        cards=cards,
        proven_optimal=status == cp_model.OPTIMAL,
        idle_milli=idle,
        max_allocated_percent=round(100 * (capacity_milli - idle) / capacity_milli, 3),
    )
