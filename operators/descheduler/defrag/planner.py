"""Which pods to move so that one topology domain holds a waiting gang: a CP-SAT model per domain.

For a domain D (its nodes), with ``m[c]`` (candidate c, running in D, moves), ``d[c, t]``
(c's new node t, outside D) and ``p[g, n]`` (gang member g goes to node n of D):

* every moved pod gets exactly one node outside D: ``sum_t d[c, t] = m[c]``, and only where its
  static checks pass (``Candidate.destinations``);
* outside D, per node and resource, the moved pods take at most what is free:
  ``sum_c req[c] * d[c, t] <= free[t]`` (no double use);
* every member gets one node of D where its static checks pass, and per node and resource the
  members take at most what is free plus what the moved pods release:
  ``sum_g req[g] * p[g, n] <= free[n] + sum_{c on n} req[c] * m[c]``;
* at most N moves; per workload at most its budget.

Objective, lexicographic in one weighted sum: fewest moves, then the least sum of the moved pods'
priority ranks (dense ranks of the candidates' priorities, lowest 0), then the first candidates in
(priority, key) order. One worker and a fixed seed: the same input gives the same plan. Domains
are solved one by one (in name order) and the best plan by the same order wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from operators.descheduler.defrag.domains import Domain

__all__ = ["Candidate", "Member", "Plan", "PlanProblem", "domain_holds", "plan", "priority_ranks"]

Amounts = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod that may move: already checked for priority, kind and the evictor's filter."""

    key: str
    """``namespace/name``."""
    node: str
    request: Amounts
    """In integer units (millicores for cpu), ``pods: 1`` included."""
    priority: int
    workload: str | None
    """The controller's uid; None for a bare pod."""
    destinations: frozenset[str]
    """Nodes where it passes its static checks (affinity, taints, schedulable)."""


@dataclass(frozen=True, slots=True)
class Member:
    """A pending gang member."""

    key: str
    request: Amounts
    nodes: frozenset[str]
    """Nodes where it passes its static checks."""


@dataclass(frozen=True, slots=True)
class PlanProblem:
    free: Mapping[str, Amounts]
    """Per node, what its pods leave free (a resource absent here is 0)."""
    candidates: Sequence[Candidate]
    members: Sequence[Member]
    budgets: Mapping[str, int]
    """Per workload: how many of its pods may move (absent: no limit)."""
    max_moves: int


@dataclass(frozen=True, slots=True)
class Plan:
    domain: Domain
    moves: tuple[Candidate, ...]
    """In (priority, key) order."""
    destinations: Mapping[str, str]
    """Moved pod key -> a node outside the domain with room for it."""
    placement: Mapping[str, str]
    """Member key -> its node in the domain once the moves are done."""

    def cost(self, ranks: Mapping[int, int]) -> tuple[int, int]:
        return len(self.moves), sum(ranks[c.priority] for c in self.moves)


def priority_ranks(candidates: Sequence[Candidate]) -> dict[int, int]:
    """Dense ranks of the candidates' priorities, the lowest 0."""
    return {p: i for i, p in enumerate(sorted({c.priority for c in candidates}))}


def _resources(problem: PlanProblem) -> list[str]:
    names = {r for m in problem.members for r in m.request}
    names |= {r for c in problem.candidates for r in c.request}
    return sorted(names)


def _solve(problem: PlanProblem, domain: Domain, ranks: Mapping[int, int], time_limit: float) -> Plan | None:
    inside = set(domain.nodes)
    names = _resources(problem)
    free = problem.free
    movable = sorted((c for c in problem.candidates if c.node in inside), key=lambda c: (c.priority, c.key))
    members = list(problem.members)
    # Summed over the domain, a resource the members lack even with every candidate gone: hopeless.
    for r in names:
        room = sum(free.get(n, {}).get(r, 0) for n in inside) + sum(c.request.get(r, 0) for c in movable)
        if sum(m.request.get(r, 0) for m in members) > room:
            return None
    model = cp_model.CpModel()
    move = {c.key: model.new_bool_var(f"m[{c.key}]") for c in movable}
    dest: dict[tuple[str, str], cp_model.IntVar] = {}
    for c in movable:
        targets = sorted(t for t in c.destinations if t not in inside and t in free)
        for t in targets:
            dest[c.key, t] = model.new_bool_var(f"d[{c.key},{t}]")
        model.add(sum(dest[c.key, t] for t in targets) == move[c.key])
    place: dict[tuple[str, str], cp_model.IntVar] = {}
    for g in members:
        nodes = sorted(n for n in g.nodes if n in inside)
        if not nodes:
            return None
        for n in nodes:
            place[g.key, n] = model.new_bool_var(f"p[{g.key},{n}]")
        model.add_exactly_one(place[g.key, n] for n in nodes)
    for t in sorted({t for _, t in dest}):
        for r in names:
            takers = [(dest[c.key, t], c.request.get(r, 0)) for c in movable if (c.key, t) in dest]
            if any(q for _, q in takers):
                model.add(sum(v * q for v, q in takers) <= free[t].get(r, 0))
    for n in sorted(inside):
        on_node = [c for c in movable if c.node == n]
        for r in names:
            need = [(place[g.key, n], g.request.get(r, 0)) for g in members if (g.key, n) in place]
            if not any(q for _, q in need):
                continue
            released = sum(move[c.key] * c.request.get(r, 0) for c in on_node)
            model.add(sum(v * q for v, q in need) <= free.get(n, {}).get(r, 0) + released)
    model.add(sum(move.values()) <= problem.max_moves)
    for workload in sorted({c.workload for c in movable if c.workload is not None}):
        if workload in problem.budgets:
            model.add(
                sum(move[c.key] for c in movable if c.workload == workload) <= problem.budgets[workload]
            )
    index_weight = 1
    rank_weight = sum(range(len(movable))) + 1
    move_weight = rank_weight * (sum(ranks[c.priority] for c in movable) + 1)
    model.minimize(
        sum(
            move[c.key] * (move_weight + rank_weight * ranks[c.priority] + index_weight * i)
            for i, c in enumerate(movable)
        )
    )
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_time_in_seconds = time_limit
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    moves = tuple(c for c in movable if solver.boolean_value(move[c.key]))
    destinations = {key: t for (key, t), v in dest.items() if solver.boolean_value(v)}
    placement = {key: n for (key, n), v in place.items() if solver.boolean_value(v)}
    return Plan(domain, moves, destinations, placement)


def plan(problem: PlanProblem, domains: Sequence[Domain], time_limit: float = 5.0) -> Plan | None:
    """The best plan over the domains (fewest moves, then lowest priority ranks, then the domain's
    name), or None when no domain can be freed within the limits. A plan with no moves means that
    a domain already holds the gang."""
    ranks = priority_ranks(problem.candidates)
    best: Plan | None = None
    for domain in sorted(domains, key=lambda d: d.name):
        found = _solve(problem, domain, ranks, time_limit)
        if found is not None and (best is None or found.cost(ranks) < best.cost(ranks)):
            best = found
            if not found.moves:
                break
    return best


def domain_holds(members: Sequence[Member], domain: Domain, free: Mapping[str, Amounts]) -> bool:
    """Whether the members fit in the domain's nodes as they are (``free``), no pod moved."""
    problem = PlanProblem(free=free, candidates=(), members=members, budgets={}, max_moves=0)
    return _solve(problem, domain, {}, 5.0) is not None
