"""Koordinator's greedy job-level preemption (algorithms.md 3.2): the CP-SAT hint and fallback.

1. Members one by one in rank order; for each, the nodes that pass its Filters once the victims
   are gone are weighed: if the member does not fit in what is free there, the node's remaining
   victims are removed cheapest first (lowest priority, then smallest job, then name) until it
   does; victims whose mere presence fails the member's Filters there (``blockers``: pod
   anti-affinity) are removed first, whatever the room. The node whose removals cost least
   (highest priority removed, new jobs broken, pods removed) wins, ties by name; its removals
   are kept and the member takes its room. The costs live in a heap per class of members; a
   popped node is re-weighed before it is taken, so a member costs a few re-weighings, not a
   scan of every node.
2. Reprieve: the chosen victims, most important first, are put back one by one wherever the
   members placed on their node still fit and none of them is blocked by it; those stay.
3. With MustGather, steps 1-2 run inside each domain of that layer and the cheapest answer wins.

It does not minimise the total: a placement early on can force costlier evictions later, and a
gang victim counts per pod, not per job. That is what the CP-SAT model fixes.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections.abc import Mapping, Sequence

from scheduler.solver.greedy import members_in_rank_order
from scheduler.solver.preemption_problem import (
    PreemptionProblem,
    VictimSelection,
    VictimSpec,
    objective,
    violations,
)
from scheduler.solver.victim_bounds import Domain, Floor, domain_floors, domains_of

__all__ = ["GreedyPass", "greedy_pass", "select_greedy"]


def _fits(request: Sequence[int], free: Sequence[int]) -> bool:
    return all(r <= f for r, f in zip(request, free, strict=True))


def _add(into: list[int], amount: Sequence[int], sign: int = 1) -> None:
    for i, a in enumerate(amount):
        into[i] += sign * a


Cost = tuple[int, int, int]


class _Shared:
    """What every domain's pass reads alike, computed once per problem (with many MustGather
    domains, each pass sorting every node's victims made the greedy quadratic)."""

    def __init__(self, problem: PreemptionProblem) -> None:
        self.ranks = problem.priority_ranks
        self._problem = problem
        self._order: dict[str, list[VictimSpec]] = {}
        self.by_uid = {v.uid: v for v in problem.victims}
        self.nodes_in = {d: {n.name: n for n in nodes} for d, nodes in domains_of(problem).items()}

    def order(self, node: str) -> list[VictimSpec]:
        """The victims on ``node``, cheapest first (sorted when first asked: most domains are
        never weighed)."""
        found = self._order.get(node)
        if found is None:
            problem = self._problem
            found = sorted(
                problem.victims_by_node.get(node, ()),
                key=lambda v: (v.priority, problem.job_size(v.job), v.name),
            )
            self._order[node] = found
        return found


class _Domain:
    """The greedy pass inside one domain: every member class keeps a heap of its nodes by the cost
    of making room there, so a member costs a heap pop instead of a scan over every node."""

    def __init__(self, problem: PreemptionProblem, domain: Domain, shared: _Shared | None = None) -> None:
        shared = shared or _Shared(problem)
        self.problem = problem
        self.domain = domain
        self.ranks = shared.ranks
        self.nodes = shared.nodes_in.get(domain, {})
        self.free = {name: list(n.free.values) for name, n in self.nodes.items()}
        self.removed: dict[str, VictimSpec] = {}
        self.broken: set[str] = set()
        self.budget_left = {key: list(amount.values) for key, amount in problem.budgets.items()}
        self.heaps: dict[int, list[tuple[Cost, str]]] = {}
        self.first: dict[int, list[tuple[Cost, str]]] = {}
        """Each class's heap as first weighed, before any choice (`cheapest_nodes`)."""
        self.by_uid = shared.by_uid
        self.placed: list[tuple[int, str]] = []
        self.shared = shared

    def blockers(self, gi: int, name: str) -> frozenset[str]:
        return self.problem.blockers.get((self.problem.placement.pod_groups[gi].name, name), frozenset())

    def option(self, gi: int, name: str) -> tuple[Cost, list[VictimSpec]] | None:
        """What it costs to fit one member of class ``gi`` on ``name`` now (None: it cannot)."""
        request = self.problem.placement.pod_groups[gi].request.values
        room = list(self.free[name])
        spend = {key: list(left) for key, left in self.budget_left.items()}
        new: list[VictimSpec] = []
        blockers = self.blockers(gi, name)
        for uid in sorted(u for u in blockers if u not in self.removed):  # they go whatever the room
            v = self.by_uid[uid]
            if v.budget is not None:
                if not _fits(v.request.values, spend[v.budget]):
                    return None
                _add(spend[v.budget], v.request.values, -1)
            new.append(v)
            if v.node == name:
                _add(room, v.request.values)
        if not _fits(request, room):
            forced = {v.uid for v in new}
            for v in self.shared.order(name):
                if v.uid in self.removed or v.uid in forced:
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
                return None
        cost = (
            max((self.ranks[v.priority] for v in new), default=0),
            len({v.job for v in new} - self.broken),
            len(new),
        )
        return cost, new

    def heap(self, gi: int) -> list[tuple[Cost, str]]:
        found = self.heaps.get(gi)
        if found is None:
            group = self.problem.placement.pod_groups[gi]
            found = []
            for name, node in self.nodes.items():
                if self.problem.placement.feasible(group, node) and (opt := self.option(gi, name)):
                    found.append((opt[0], name))
            heapq.heapify(found)
            self.heaps[gi] = found
            self.first[gi] = list(found)
        return found

    def place(self, gi: int) -> str | None:
        """The cheapest node for one member of ``gi`` (ties by name), its victims removed."""
        heap = self.heap(gi)
        while heap:
            cost, name = heapq.heappop(heap)
            opt = self.option(gi, name)  # other placements may have changed this node or the budgets
            if opt is None:
                continue
            if opt[0] != cost:
                heapq.heappush(heap, (opt[0], name))
                continue
            for v in opt[1]:
                self.removed[v.uid] = v
                self.broken.add(v.job)
                if v.node in self.free:
                    _add(self.free[v.node], v.request.values)
                if v.budget is not None:
                    _add(self.budget_left[v.budget], v.request.values, -1)
            _add(self.free[name], self.problem.placement.pod_groups[gi].request.values, -1)
            self.placed.append((gi, name))
            again = self.option(gi, name)
            if again is not None:
                heapq.heappush(heap, (again[0], name))
            return name
        return None

    def freed(self, release: str) -> list[int]:
        total = [0] * len(self.problem.placement.resources)
        for v in self.removed.values():
            if v.release == release:
                _add(total, v.request.values)
        return total

    def meet_releases(self) -> bool:
        """Evict more of each release's pods (cheapest first, any node) until it frees enough."""
        for release, need in sorted(self.problem.releases.items()):
            freed = self.freed(release)
            candidates = sorted(
                (v for v in self.problem.victims if v.release == release and v.uid not in self.removed),
                key=lambda v: (v.priority, self.problem.job_size(v.job), v.name),
            )
            for v in candidates:
                if _fits(need.values, freed):
                    break
                self.removed[v.uid] = v
                self.broken.add(v.job)
                _add(freed, v.request.values)
                if v.node in self.free:
                    _add(self.free[v.node], v.request.values)
            if not _fits(need.values, freed):
                return False
        return True

    def reprieve(self) -> None:
        needed = {uid for gi, name in self.placed for uid in self.blockers(gi, name)}
        for v in sorted(self.removed.values(), key=lambda v: (-v.priority, v.name)):
            if v.uid in needed:
                continue  # a member placed beside it would fail its Filters
            if v.release is not None:
                freed = self.freed(v.release)
                _add(freed, v.request.values, -1)
                if not _fits(self.problem.releases[v.release].values, freed):
                    continue  # the release needs it
            if v.node not in self.free:
                continue
            room = list(self.free[v.node])
            _add(room, v.request.values, -1)
            if all(x >= 0 for x in room):
                self.free[v.node] = room
                del self.removed[v.uid]
                if v.budget is not None:
                    _add(self.budget_left[v.budget], v.request.values)


def _in_domain(state: _Domain) -> tuple[list[str], dict[str, str]] | None:
    problem = state.problem
    assignment: dict[str, str] = {}
    for member, gi in members_in_rank_order(problem.placement):
        node = state.place(gi)
        if node is None:
            return None
        assignment[member] = node
    if not state.meet_releases():
        return None
    state.reprieve()
    victims = sorted(state.removed)
    if violations(problem, victims, assignment):
        return None  # podCountMultiple: the member-by-member pass does not count domains
    return victims, assignment


def _cheapest(state: _Domain, per_class: int) -> set[str]:
    keep: set[str] = set()
    fresh: _Domain | None = None
    for gi in range(len(state.problem.placement.pod_groups)):
        first = state.first.get(gi)
        if first is None:  # the greedy pass stopped before this class: weigh it on a fresh state
            fresh = fresh or _Domain(state.problem, state.domain, state.shared)
            first = fresh.heap(gi)
        keep.update(name for _, name in heapq.nsmallest(per_class, first))
    return keep


@dataclasses.dataclass(frozen=True)
class GreedyPass:
    """The greedy selection and the nodes a model needs to do at least as well."""

    selection: VictimSelection | None
    candidates: frozenset[str]
    """Of the MustGather domains whose floor (`victim_bounds.domain_floors`) does not rule out
    a selection as cheap as ``selection``: the ``per_class`` cheapest nodes per member class, or
    every node when ``per_class`` is 0 (every node of the problem when it has a release)."""
    complete: bool
    """``candidates`` hold every node of those domains: a model over them loses no selection that
    could be better."""


def select_greedy(problem: PreemptionProblem) -> VictimSelection | None:
    """The cheapest greedy selection over the MustGather domains, or None when none was found."""
    return greedy_pass(problem, 0).selection


def greedy_pass(
    problem: PreemptionProblem, per_class: int, floors: Mapping[Domain, Floor | None] | None = None
) -> GreedyPass:
    """`select_greedy` and the model's candidate nodes from one weighing of the nodes (the greedy
    pass's first heaps are the cheapest nodes before any choice).

    Domains go cheapest floor first; one whose floor is above the best selection found so far is
    not weighed at all (nothing there can beat it). Among equally cheap selections the first
    domain in name order wins, as when every domain was weighed in that order."""
    start = time.perf_counter()
    shared = _Shared(problem)
    domains = list(shared.nodes_in)
    floors = domain_floors(problem) if floors is None else floors
    order = sorted(
        (floor, i) for i, domain in enumerate(domains) if (floor := floors.get(domain)) is not None
    )
    best: tuple[tuple[int, ...], int, list[str], dict[str, str]] | None = None
    weighed: list[tuple[Floor, _Domain]] = []
    for floor, i in order:
        if best is not None and floor > best[0]:
            break  # the floors are sorted: no later domain can do better either
        state = _Domain(problem, domains[i], shared)
        weighed.append((floor, state))
        found = _in_domain(state)
        if found is None:
            continue
        cost = objective(problem, found[0])
        if best is None or (cost, i) < best[:2]:
            best = (cost, i, found[0], found[1])
    kept = [state for floor, state in weighed if best is None or floor <= best[0]]
    if problem.releases:  # a release may need victims in any domain
        candidates = frozenset(n.name for n in problem.placement.nodes)
    elif per_class:
        candidates = frozenset(name for state in kept for name in _cheapest(state, per_class))
    else:
        candidates = frozenset(name for state in kept for name in state.nodes)
    complete = per_class == 0 or all(len(state.nodes) <= per_class for state in kept)
    if best is None:
        return GreedyPass(None, candidates, complete)
    selection = VictimSelection(
        victims=tuple(best[2]),
        assignment=best[3],
        objective=best[0],
        status="GREEDY",
        solve_seconds=time.perf_counter() - start,
    )
    return GreedyPass(selection, candidates, complete)
