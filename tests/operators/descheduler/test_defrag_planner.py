"""The defragmentation planner (CP-SAT) against brute force on small clusters: never more than N
moves, every moved pod fits outside the domain with capacity counted once, the domain then holds
the gang, workload budgets hold, and the cost (fewest moves, then lowest priority) is optimal."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.descheduler.defrag.domains import Domain
from operators.descheduler.defrag.planner import (
    Candidate,
    Member,
    Plan,
    PlanProblem,
    domain_holds,
    plan,
    priority_ranks,
)
from tests.examples import examples

Amounts = Mapping[str, int]


def _fits_all(items: Sequence[tuple[str, Amounts, frozenset[str]]], free: dict[str, dict[str, int]]) -> bool:
    """Backtracking: every item (key, request, allowed nodes) gets a node with room."""
    if not items:
        return True
    (_, request, allowed), rest = items[0], items[1:]
    for node in sorted(allowed):
        if node not in free:
            continue
        room = free[node]
        if all(room.get(r, 0) >= q for r, q in request.items()):
            for r, q in request.items():
                room[r] = room.get(r, 0) - q
            ok = _fits_all(rest, free)
            for r, q in request.items():
                room[r] += q
            if ok:
                return True
    return False


def brute_force(problem: PlanProblem, domains: Sequence[Domain]) -> tuple[int, int] | None:
    ranks = priority_ranks(problem.candidates)
    best: tuple[int, int] | None = None
    for domain in domains:
        inside = set(domain.nodes)
        movable = [c for c in problem.candidates if c.node in inside]
        for k in range(problem.max_moves + 1):
            for subset in itertools.combinations(movable, k):
                per_workload: dict[str, int] = {}
                for c in subset:
                    if c.workload is not None:
                        per_workload[c.workload] = per_workload.get(c.workload, 0) + 1
                if any(n > problem.budgets.get(w, n) for w, n in per_workload.items()):
                    continue
                outside = {n: dict(r) for n, r in problem.free.items() if n not in inside}
                moved = [(c.key, c.request, c.destinations - inside) for c in subset]
                if not _fits_all(moved, outside):
                    continue
                room = {n: dict(problem.free.get(n, {})) for n in inside}
                for c in subset:
                    for r, q in c.request.items():
                        room[c.node][r] = room[c.node].get(r, 0) + q
                if not _fits_all([(m.key, m.request, m.nodes & inside) for m in problem.members], room):
                    continue
                cost = (k, sum(ranks[c.priority] for c in subset))
                if best is None or cost < best:
                    best = cost
    return best


def check_plan(problem: PlanProblem, found: Plan) -> None:
    inside = set(found.domain.nodes)
    assert len(found.moves) <= problem.max_moves
    keys = {c.key for c in problem.candidates}
    assert all(c.key in keys and c.node in inside for c in found.moves)
    used: dict[str, dict[str, int]] = {}
    for c in found.moves:
        target = found.destinations[c.key]
        assert target not in inside
        assert target in c.destinations
        for r, q in c.request.items():
            used.setdefault(target, {})[r] = used.get(target, {}).get(r, 0) + q
    for node, amounts in used.items():
        for r, q in amounts.items():
            assert q <= problem.free[node].get(r, 0), (node, r)
    per_workload: dict[str, int] = {}
    for c in found.moves:
        if c.workload is not None:
            per_workload[c.workload] = per_workload.get(c.workload, 0) + 1
    assert all(n <= problem.budgets.get(w, n) for w, n in per_workload.items())
    room = {n: dict(problem.free.get(n, {})) for n in inside}
    for c in found.moves:
        for r, q in c.request.items():
            room[c.node][r] = room[c.node].get(r, 0) + q
    for m in problem.members:
        node = found.placement[m.key]
        assert node in inside
        assert node in m.nodes
        for r, q in m.request.items():
            room[node][r] = room[node].get(r, 0) - q
    assert all(q >= 0 for amounts in room.values() for q in amounts.values())


@st.composite
def problems(draw: st.DrawFn) -> tuple[PlanProblem, list[Domain]]:
    n_domains = draw(st.integers(1, 3))
    per_domain = draw(st.integers(1, 2))
    domains = [
        Domain("BlockLayer", f"b{d}", tuple(f"n{d}{i}" for i in range(per_domain))) for d in range(n_domains)
    ]
    nodes = [n for d in domains for n in d.nodes]
    capacity = {n: {"cpu": draw(st.sampled_from([4000, 8000])), "pods": 10} for n in nodes}
    candidates = []
    free = {n: dict(c) for n, c in capacity.items()}
    index = 0
    for node in nodes:
        for _ in range(draw(st.integers(0, 3))):
            cpu = draw(st.sampled_from([1000, 2000, 3000]))
            if free[node]["cpu"] < cpu:
                continue
            free[node]["cpu"] -= cpu
            free[node]["pods"] -= 1
            destinations = frozenset(draw(st.sets(st.sampled_from(nodes))) - {node})
            candidates.append(
                Candidate(
                    f"default/p{index}",
                    node,
                    {"cpu": cpu, "pods": 1},
                    draw(st.integers(0, 3)),
                    draw(st.sampled_from([None, "w0", "w1"])),
                    destinations,
                )
            )
            index += 1
    members = [
        Member(
            f"default/g{i}", {"cpu": draw(st.sampled_from([1000, 2000, 4000])), "pods": 1}, frozenset(nodes)
        )
        for i in range(draw(st.integers(1, 3)))
    ]
    budgets = {"w0": draw(st.integers(0, 3)), "w1": draw(st.integers(0, 3))}
    problem = PlanProblem(free, candidates, members, budgets, draw(st.integers(0, 3)))
    return problem, domains


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_the_plan_is_valid_and_as_cheap_as_brute_force(case: tuple[PlanProblem, list[Domain]]) -> None:
    problem, domains = case
    found = plan(problem, domains)
    expected = brute_force(problem, domains)
    if expected is None:
        assert found is None
        return
    assert found is not None
    check_plan(problem, found)
    assert found.cost(priority_ranks(problem.candidates)) == expected


def _two_racks() -> tuple[PlanProblem, list[Domain]]:
    """Two racks of two 4-CPU nodes, each node holding one low-priority pod of 1 CPU (rack a's
    of priority 5, rack b's of 1 and 9); a spare node x with 4 CPU; the gang: 4 members of 3 CPU."""
    free = {
        "a0": {"cpu": 3000},
        "a1": {"cpu": 3000},
        "b0": {"cpu": 3000},
        "b1": {"cpu": 3000},
        "x": {"cpu": 4000},
    }
    everywhere = frozenset(free)
    candidates = [
        Candidate("ns/a0p", "a0", {"cpu": 1000}, 5, "w", everywhere),
        Candidate("ns/a1p", "a1", {"cpu": 1000}, 5, "w", everywhere),
        Candidate("ns/b0p", "b0", {"cpu": 1000}, 1, "w", everywhere),
        Candidate("ns/b1p", "b1", {"cpu": 1000}, 9, "w", everywhere),
    ]
    members = [Member(f"ns/g{i}", {"cpu": 3000}, everywhere) for i in range(2)]
    domains = [Domain("Rack", "a", ("a0", "a1")), Domain("Rack", "b", ("b0", "b1"))]
    return PlanProblem(free, candidates, members, {}, 2), domains


def test_a_domain_that_holds_the_gang_needs_no_move() -> None:
    problem, domains = _two_racks()
    found = plan(problem, domains)
    assert found is not None
    assert found.moves == ()


def test_fewest_moves_then_lowest_priority() -> None:
    problem, domains = _two_racks()
    bigger = PlanProblem(
        problem.free,
        problem.candidates,
        [Member(f"ns/g{i}", {"cpu": 4000}, frozenset(problem.free)) for i in range(2)],
        {},
        2,
    )
    found = plan(bigger, domains)
    assert found is not None
    # Rack a moves two pods of priority 5; rack b moves priorities 1 and 9: equal count, and
    # rank sums 1+1 (a) against 0+2 (b): a tie broken by the domain's name.
    assert found.domain.name == "a"
    assert [c.key for c in found.moves] == ["ns/a0p", "ns/a1p"]
    assert plan(bigger, domains) == found  # deterministic


def test_never_more_than_n_moves_nor_past_a_workload_budget() -> None:
    problem, domains = _two_racks()
    bigger = [Member(f"ns/g{i}", {"cpu": 4000}, frozenset(problem.free)) for i in range(2)]
    assert plan(PlanProblem(problem.free, problem.candidates, bigger, {}, 1), domains) is None
    assert plan(PlanProblem(problem.free, problem.candidates, bigger, {"w": 1}, 2), domains) is None


def test_moved_pods_need_room_outside_counted_once() -> None:
    problem, domains = _two_racks()
    bigger = [Member(f"ns/g{i}", {"cpu": 4000}, frozenset(problem.free)) for i in range(2)]
    # Only x (4 CPU) takes them, and it has room for one 1-CPU pod only once it holds 3 CPU.
    free = {**problem.free, "x": {"cpu": 1500}}
    only_x = [
        Candidate(c.key, c.node, c.request, c.priority, c.workload, frozenset({"x"}))
        for c in problem.candidates
    ]
    assert plan(PlanProblem(free, only_x, bigger, {}, 2), domains) is None
    free = {**problem.free, "x": {"cpu": 2000}}
    found = plan(PlanProblem(free, only_x, bigger, {}, 2), domains)
    assert found is not None
    assert set(found.destinations.values()) == {"x"}


def test_domain_holds() -> None:
    domain = Domain("Rack", "a", ("a0", "a1"))
    members = [
        Member("ns/g0", {"cpu": 3000}, frozenset({"a0", "a1"})),
        Member("ns/g1", {"cpu": 3000}, frozenset({"a0", "a1"})),
    ]
    assert domain_holds(members, domain, {"a0": {"cpu": 3000}, "a1": {"cpu": 3000}})
    assert not domain_holds(members, domain, {"a0": {"cpu": 5000}, "a1": {"cpu": 2000}})
