"""Koordinator's greedy job-level preemption (algorithms.md 3.2): the CP-SAT hint and fallback.

1. Members one by one in rank order; for each, every node that passes its Filters once the
   victims are gone is tried: if the member does not fit in what is free there, the node's
   remaining victims are removed cheapest first (lowest priority, then smallest job, then name)
   until it does. The node whose removals cost least (highest priority removed, new jobs broken,
   pods removed) wins, ties by name; its removals are kept and the member takes its room.
2. Reprieve: the chosen victims, most important first, are put back one by one wherever the
   members placed on their node still fit; those stay.
3. With MustGather, steps 1-2 run inside each domain of that layer and the cheapest answer wins.

It does not minimise the total: a placement early on can force costlier evictions later, and a
gang victim counts per pod, not per job. That is what the CP-SAT model fixes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from scheduler.solver.greedy import members_in_rank_order
from scheduler.solver.preemption_problem import (
    PreemptionProblem,
    VictimSelection,
    VictimSpec,
    objective,
    violations,
)
from scheduler.solver.problem import NodeSpec, domain_key

__all__ = ["select_greedy"]

Domain = tuple[str, ...]


def _fits(request: Sequence[int], free: Sequence[int]) -> bool:
    return all(r <= f for r, f in zip(request, free, strict=True))


def _add(into: list[int], amount: Sequence[int], sign: int = 1) -> None:
    for i, a in enumerate(amount):
        into[i] += sign * a


def _domains(problem: PreemptionProblem) -> list[Domain]:
    must = problem.placement.must_gather_index
    if must is None:
        return [()]
    return sorted({domain_key(n.path, must) for n in problem.placement.nodes})


def _in_domain(problem: PreemptionProblem, domain: Domain) -> tuple[list[str], dict[str, str]] | None:
    placement = problem.placement
    ranks = problem.priority_ranks
    nodes: list[NodeSpec] = sorted(
        (n for n in placement.nodes if n.path[: len(domain)] == domain), key=lambda n: n.name
    )
    free = {n.name: list(n.free.values) for n in nodes}
    order = {
        node: sorted(vs, key=lambda v: (v.priority, problem.job_size(v.job), v.name))
        for node, vs in problem.victims_on().items()
    }
    removed: dict[str, VictimSpec] = {}
    broken: set[str] = set()
    budget_left = {key: list(amount.values) for key, amount in problem.budgets.items()}
    assignment: dict[str, str] = {}
    for member, gi in members_in_rank_order(placement):
        group = placement.pod_groups[gi]
        request = group.request.values
        best: tuple[tuple[int, int, int], str, list[VictimSpec]] | None = None
        for node in nodes:
            if not placement.feasible(group, node):
                continue
            room = list(free[node.name])
            new: list[VictimSpec] = []
            if not _fits(request, room):
                spend = {key: list(left) for key, left in budget_left.items()}
                for v in order.get(node.name, ()):
                    if v.uid in removed:
                        continue
                    if v.budget is not None:
                        if not _fits(v.request.values, spend[v.budget]):
                            continue
                        _add(spend[v.budget], v.request.values, -1)
                    new.append(v)
                    _add(room, v.request.values)
                    if _fits(request, room):
                        break
                else:
                    continue
            cost = (
                max((ranks[v.priority] for v in new), default=0),
                len({v.job for v in new} - broken),
                len(new),
            )
            if best is None or (cost, node.name) < (best[0], best[1]):
                best = (cost, node.name, new)
            if cost == (0, 0, 0):
                break  # free room: nothing later can be cheaper
        if best is None:
            return None
        _, node_name, new = best
        for v in new:
            removed[v.uid] = v
            broken.add(v.job)
            _add(free[node_name], v.request.values)
            if v.budget is not None:
                _add(budget_left[v.budget], v.request.values, -1)
        _add(free[node_name], request, -1)
        assignment[member] = node_name
    for v in sorted(removed.values(), key=lambda v: (-v.priority, v.name)):
        room = list(free[v.node])
        _add(room, v.request.values, -1)
        if all(x >= 0 for x in room):
            free[v.node] = room
            del removed[v.uid]
            if v.budget is not None:
                _add(budget_left[v.budget], v.request.values)
    victims = sorted(removed)
    if violations(problem, victims, assignment):
        return None  # podCountMultiple: the member-by-member pass does not count domains
    return victims, assignment


def select_greedy(problem: PreemptionProblem) -> VictimSelection | None:
    """The cheapest greedy selection over the MustGather domains, or None when none was found."""
    start = time.perf_counter()
    best: tuple[tuple[int, ...], list[str], dict[str, str]] | None = None
    for domain in _domains(problem):
        found = _in_domain(problem, domain)
        if found is None:
            continue
        cost = objective(problem, found[0])
        if best is None or cost < best[0]:
            best = (cost, found[0], found[1])
    if best is None:
        return None
    return VictimSelection(
        victims=tuple(best[1]),
        assignment=best[2],
        objective=best[0],
        status="GREEDY",
        solve_seconds=time.perf_counter() - start,
    )
