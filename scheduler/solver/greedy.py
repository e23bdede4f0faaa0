"""Koordinator's greedy gang plan (algorithms.md 2.3): the baseline, the CP-SAT hint and fallback.

Problem: place every member of a gang, honouring MustGather and podCountMultiple, preferring the
smallest topology domain that can hold the whole gang, without a solver. Steps, numbered as in
the reference:

1. Offer slots per node: members in rank order are added to a copy of the node until the first
   one that does not fit (or fails Filter); the count placed is the node's slot.
3. Aggregate the slots up the tree (domains are path prefixes).
4. podCountMultiple: bottom-up, a domain's slot is the sum of its children's, floored to its
   layer's multiple.
5. Search roots: the domains of the deepest MustGather layer, else the cluster root.
6. Candidates: breadth-first from the roots, keeping domains whose slot holds the gang; the
   deepest depth with any qualifying domain wins (nodes included).
7. Order candidates by smaller slot (tightest fit) compared at the domain, then its parent and so
   on up; then higher score sum; then path.
8. Distribute: a domain takes ``min(slot, remaining)`` floored to its multiple and hands it out to
   its children roomiest first (then score, then name).
9. Assign members in rank order to the distributed node list. The reference sorts members by
   name here, which breaks rank contiguity (``w-10`` before ``w-2``); we keep rank order. Members
   are checked against the node's remaining room, so mixed roles never overcommit a node; a
   candidate whose slots do not take every member is skipped.

Without a topology spec the reference places members one by one on the best-scoring node: a
plain first fit over nodes ordered by score, then name. Both skip a node whose domain already
holds a member the member must stay apart from (``Apart``). Everything is deterministic.
"""

from __future__ import annotations

import time
from collections import defaultdict

from scheduler.solver import explain
from scheduler.solver.aggregate import DomainCapacity, aggregate
from scheduler.solver.problem import (
    Infeasible,
    PlacementProblem,
    Plan,
    domains_used,
    objective,
    violations,
)

__all__ = ["members_in_rank_order", "plan", "solve_greedy"]

Domain = tuple[str, ...]


def members_in_rank_order(problem: PlacementProblem) -> list[tuple[str, int]]:
    """(member id, pod group index): members with a rank first by rank, then the rest in input order."""
    keyed: list[tuple[tuple[int, int, int], str, int]] = []
    order = 0
    for gi, g in enumerate(problem.pod_groups):
        for j, member in enumerate(g.member_ids):
            if g.ranks is not None:
                keyed.append(((0, g.ranks[j], order), member, gi))
            else:
                keyed.append(((1, 0, order), member, gi))
            order += 1
    keyed.sort()
    return [(m, gi) for _, m, gi in keyed]


class _Apart:
    """The domains already holding a member under each of the problem's ``apart`` rules."""

    def __init__(self, problem: PlacementProblem) -> None:
        self._rules = problem.apart
        self._of_group = [
            [i for i, rule in enumerate(problem.apart) if g.name in rule.groups] for g in problem.pod_groups
        ]
        self._taken: set[tuple[int, str]] = set()

    def allows(self, gi: int, node: str) -> bool:
        for i in self._of_group[gi]:
            domain = self._rules[i].domains.get(node)
            if domain is not None and (i, domain) in self._taken:
                return False
        return True

    def take(self, gi: int, node: str) -> None:
        for i in self._of_group[gi]:
            domain = self._rules[i].domains.get(node)
            if domain is not None:
                self._taken.add((i, domain))


def _first_fit(problem: PlacementProblem, members: list[tuple[str, int]]) -> dict[str, str] | None:
    nodes = sorted(problem.nodes, key=lambda n: (-problem.score(n.name), n.name))
    left = {n.name: n.free for n in nodes}
    apart = _Apart(problem)
    out: dict[str, str] = {}
    start = dict.fromkeys(range(len(problem.pod_groups)), 0)
    for member, gi in members:
        group = problem.pod_groups[gi]
        for idx in range(start[gi], len(nodes)):
            node = nodes[idx]
            if (
                problem.feasible(group, node)
                and group.request.fits_in(left[node.name])
                and apart.allows(gi, node.name)
            ):
                left[node.name] = left[node.name] - group.request
                apart.take(gi, node.name)
                out[member] = node.name
                start[gi] = idx  # earlier nodes are full (or their domain taken) for this group
                break
        else:
            return None
    return out


def _offer_slots(problem: PlacementProblem, members: list[tuple[str, int]]) -> dict[str, int]:
    groups = problem.pod_groups
    cache: dict[tuple[object, ...], int] = {}
    slots: dict[str, int] = {}
    for node in problem.nodes:
        signature = tuple(problem.feasible(g, node) for g in groups)
        key = (node.free.values, signature)
        if key not in cache:
            left = node.free
            n = 0
            for _, gi in members:
                req = groups[gi].request
                if not signature[gi] or not req.fits_in(left):
                    break
                left = left - req
                n += 1
            cache[key] = n
        slots[node.name] = cache[key]
    return slots


def plan(problem: PlacementProblem) -> dict[str, str] | None:
    """Koordinator's placement, or None when it finds none."""
    members = members_in_rank_order(problem)
    if not members:
        return {}
    if not problem.has_topology_spec:
        return _first_fit(problem, members)
    need = len(members)
    n_layers = len(problem.layers)
    by_name = {n.name: n for n in problem.nodes}
    node_slot = _offer_slots(problem, members)

    # 3-4. Aggregate up the tree (node domains are path + name), flooring to multiples.
    children: dict[Domain, list[Domain]] = defaultdict(list)
    offer: dict[Domain, int] = {}
    score: dict[Domain, int] = defaultdict(int)
    for node in problem.nodes:
        leaf = (*node.path, node.name)
        offer[leaf] = node_slot[node.name]
        for depth in range(n_layers + 1):
            score[leaf[:depth]] += problem.score(node.name)
        for depth in range(n_layers, -1, -1):
            parent, child = leaf[:depth], leaf[: depth + 1]
            if child in children[parent]:
                break
            children[parent].append(child)
    for depth in range(n_layers, -1, -1):
        k = problem.layers[depth - 1].pod_count_multiple if depth > 0 else 1
        for dom in [d for d in children if len(d) == depth]:
            total = sum(offer[c] for c in children[dom])
            offer[dom] = total - total % k

    # 5. Search roots.
    must = problem.must_gather_index
    roots: list[Domain] = sorted(d for d in children if len(d) == must + 1) if must is not None else [()]

    # 6. Candidates at the deepest depth with a domain that holds the gang.
    level = [d for d in roots if offer.get(d, 0) >= need]
    candidates: list[Domain] = []
    while level:
        candidates = level
        level = [c for d in level for c in children.get(d, []) if offer.get(c, 0) >= need]

    # 7. Tightest fit first, compared level by level upwards; then score; then path.
    def order_key(d: Domain) -> tuple[tuple[int, ...], int, Domain]:
        return (tuple(offer[d[:i]] for i in range(len(d), -1, -1)), -score[d], d)

    def child_key(d: Domain) -> tuple[int, int, Domain]:
        return (-offer[d], -score[d], d)

    def distribute(dom: Domain, remaining: int, out: list[tuple[str, int]]) -> int:
        want = min(offer[dom], remaining)
        depth = len(dom)
        if 0 < depth <= n_layers:
            k = problem.layers[depth - 1].pod_count_multiple
            want -= want % k
        if depth == n_layers + 1:
            if want > 0:
                out.append((dom[-1], want))
            return want
        given = 0
        for child in sorted(children[dom], key=child_key):
            if given >= want:
                break
            given += distribute(child, want - given, out)
        return given

    groups = problem.pod_groups
    for cand in sorted(candidates, key=order_key):
        slots: list[tuple[str, int]] = []
        if distribute(cand, need, slots) < need:
            continue
        # 9. Members in rank order onto the node list, checking each node's remaining room.
        left = [by_name[name].free for name, _ in slots]
        room = [n for _, n in slots]
        apart = _Apart(problem)
        assignment: dict[str, str] = {}
        for member, gi in members:
            g = groups[gi]
            for idx, (name, _) in enumerate(slots):
                if (
                    room[idx] > 0
                    and problem.feasible(g, by_name[name])
                    and g.request.fits_in(left[idx])
                    and apart.allows(gi, name)
                ):
                    room[idx] -= 1
                    left[idx] = left[idx] - g.request
                    apart.take(gi, name)
                    assignment[member] = name
                    break
            else:
                break
        if len(assignment) == need and not violations(problem, assignment):
            return assignment
    return None


def solve_greedy(problem: PlacementProblem) -> Plan | Infeasible:
    """The greedy strategy on its own: a GREEDY plan, or the counting diagnosis of the failure."""
    start = time.perf_counter()
    assignment = plan(problem)
    seconds = time.perf_counter() - start
    if assignment is None:
        agg = aggregate(problem)
        reason = explain.diagnose(problem, agg, DomainCapacity.build(problem, agg))
        if reason is None:
            must = problem.must_gather_index
            layer = problem.layers[must].name if must is not None else None
            reason = explain.packing(problem, [g.name for g in problem.pod_groups], layer)
        return _with(reason, seconds)
    return Plan(
        assignment=assignment,
        strategy="greedy",
        status="GREEDY",
        domains_used=domains_used(problem, assignment),
        objective=objective(problem, assignment),
        solve_seconds=seconds,
        gap=None,
    )


def _with(reason: Infeasible, seconds: float) -> Infeasible:
    return Infeasible(reason.reason, reason.message, reason.layer, reason.groups, seconds, "greedy")
