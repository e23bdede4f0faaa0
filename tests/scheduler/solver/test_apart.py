"""Members kept apart (required pod anti-affinity among a gang's members): at most one per domain,
in the CP-SAT model, the greedy planner and ``violations``; checked against brute force."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.solver import (
    Infeasible,
    Plan,
    select_victims,
    solve,
    violations,
)
from scheduler.solver.gang_placement import solve_cpsat
from scheduler.solver.greedy import solve_greedy
from scheduler.solver.preemption_problem import violations as preemption_violations
from scheduler.solver.problem import Apart, PlacementProblem
from tests.scheduler.solver.builders import brute_force, group, node, problem
from tests.scheduler.solver.test_victim_selection import job, preemption
from tests.scheduler.solver.test_victim_selection import node as pnode
from tests.scheduler.solver.test_victim_selection import victim as pvictim

NODES = [node(f"n{i}", gpu=8) for i in range(3)]
HOSTS = {f"n{i}": f"n{i}" for i in range(3)}


def apart(p: PlacementProblem, *rules: Apart) -> PlacementProblem:
    return dataclasses.replace(p, apart=rules)


@pytest.mark.parametrize("strategy", ["cpsat", "greedy"])
def test_one_worker_per_node_although_one_node_would_hold_them_all(strategy: str) -> None:
    # the scores pull every member onto n0, which has room for all three
    base = problem([group("w", 3, gpu=1)], NODES, scores={"n0": 100, "n1": 10, "n2": 0}, strategy=strategy)
    packed = solve(base)
    assert isinstance(packed, Plan)
    assert set(packed.assignment.values()) == {"n0"}
    spread = apart(base, Apart("kubernetes.io/hostname", frozenset({"w"}), HOSTS))
    plan = solve(spread)
    assert isinstance(plan, Plan), plan
    assert sorted(plan.assignment.values()) == ["n0", "n1", "n2"]
    assert violations(spread, plan.assignment) == []
    assert violations(spread, packed.assignment) == [
        "anti-affinity on kubernetes.io/hostname: n0 holds 3 members"
    ]


def test_zone_domains_span_several_nodes() -> None:
    nodes = [node(f"n{i}", gpu=8) for i in range(4)]
    zones = {"n0": "z0", "n1": "z0", "n2": "z1", "n3": "z1"}
    p = apart(
        problem([group("w", 2, gpu=1)], nodes, scores={"n0": 100, "n1": 90}),
        Apart("zone", frozenset({"w"}), zones),
    )
    plan = solve_cpsat(p)
    assert isinstance(plan, Plan)
    assert sorted(zones[n] for n in plan.assignment.values()) == ["z0", "z1"]
    assert plan.objective == brute_force(p)


def test_nodes_without_the_key_are_free_of_the_rule() -> None:
    p = apart(problem([group("w", 3, gpu=1)], NODES[:2]), Apart("zone", frozenset({"w"}), {"n0": "z0"}))
    plan = solve_cpsat(p)
    assert isinstance(plan, Plan)
    assert sorted(plan.assignment.values()).count("n0") <= 1
    assert violations(p, plan.assignment) == []


def test_only_the_members_under_the_rule_are_kept_apart() -> None:
    p = apart(
        problem([group("w", 2, gpu=1), group("ps", 2, gpu=1)], NODES[:2], scores={"n0": 100}),
        Apart("kubernetes.io/hostname", frozenset({"w"}), HOSTS),
    )
    plan = solve_cpsat(p)
    assert isinstance(plan, Plan)
    workers = sorted(plan.assignment[m] for m in ("w-0", "w-1"))
    assert workers == ["n0", "n1"]
    assert plan.objective == brute_force(p)


@pytest.mark.parametrize("solver", [solve_cpsat, solve_greedy])
def test_more_members_than_domains_is_infeasible(solver: object) -> None:
    p = apart(
        problem([group("w", 3, gpu=1)], NODES[:2]), Apart("kubernetes.io/hostname", frozenset({"w"}), HOSTS)
    )
    assert callable(solver)
    assert isinstance(solver(p), Infeasible)


# ---- preemption: a blocker must go for a member to use its node ----------------------------------


@pytest.mark.parametrize("strategy", ["cpsat", "greedy"])
def test_a_blocker_is_evicted_although_the_room_is_free(strategy: str) -> None:
    """n0 has room for the preemptor but hosts a pod it repels (cheaper to evict than n1's)."""
    victims = [pvictim("db", "n0", 1, priority=1000), pvictim("pad", "n1", 4, priority=1001)]
    free_room = preemption([job(1, 2)], [pnode("n0", 3), pnode("n1", 0)], victims, strategy=strategy)
    chosen = select_victims(free_room)
    assert chosen is not None
    assert chosen.victims == ()  # resources alone: nothing to evict
    blocked = dataclasses.replace(free_room, blockers={("hp", "n0"): frozenset({"db"})})
    chosen = select_victims(blocked)
    assert chosen is not None
    assert (chosen.victims, dict(chosen.assignment)) == (("db",), {"hp-0": "n0"})
    assert preemption_violations(blocked, (), {"hp-0": "n0"}) == [
        "member hp-0 on n0, where ['db'] stay and fail its Filters"
    ]
