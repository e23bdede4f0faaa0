"""Gang placement keeps DoNotSchedule topology spread between its members and against the pods
already placed: count(d) - min <= maxSkew after placement, for every domain receiving a member."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.solver import Infeasible, PlacementProblem, Plan, solve, violations
from scheduler.solver.problem import SpreadConstraint
from tests.examples import examples
from tests.scheduler.solver.builders import brute_force, group, node, problem

ZONE_OF = {"a1": "z1", "a2": "z1", "a3": "z1", "b1": "z2"}


def zones_problem(
    members: int = 4,
    *,
    existing: dict[str, int] | None = None,
    max_skew: int = 1,
    min_domains: int = 1,
    strategy: str = "cpsat",
) -> PlacementProblem:
    """Zone z1 has three roomy nodes the score prefers, z2 one."""
    base = problem(
        [group("w", members, 1)],
        [node(name, 8) for name in ZONE_OF],
        scores={"a1": 100, "a2": 100, "a3": 100, "b1": 0},
        strategy=strategy,
    )
    ids = frozenset(f"w-{i}" for i in range(members))
    spread = SpreadConstraint(
        name="zone",
        max_skew=max_skew,
        domains=ZONE_OF,
        existing=existing or {"z1": 0, "z2": 0},
        constrained=ids,
        matching=ids,
        min_domains=min_domains,
    )
    return dataclasses.replace(base, spread=(spread,))


def per_zone(plan: Plan | Infeasible) -> dict[str, int]:
    assert isinstance(plan, Plan), plan
    out: dict[str, int] = {}
    for node_name in plan.assignment.values():
        out[ZONE_OF[node_name]] = out.get(ZONE_OF[node_name], 0) + 1
    return out


def test_members_are_spread_two_and_two_although_the_score_prefers_one_zone() -> None:
    unconstrained = dataclasses.replace(zones_problem(), spread=())
    assert per_zone(solve(unconstrained)) == {"z1": 4}
    assert per_zone(solve(zones_problem())) == {"z1": 2, "z2": 2}


def test_existing_pods_count() -> None:
    # z1 already holds 3 matching pods: the 3 members must all go to z2 (3/3)
    assert per_zone(solve(zones_problem(3, existing={"z1": 3, "z2": 0}))) == {"z2": 3}
    # maxSkew 2: one member may join z1 (4 against 3), two may not (5 against 2); the score
    # prefers z1, so exactly one goes there
    assert per_zone(solve(zones_problem(4, existing={"z1": 3, "z2": 0}, max_skew=2))) == {"z1": 1, "z2": 3}


def test_a_domain_already_skewed_does_not_block_the_others() -> None:
    """As upstream's Filter, only domains receiving members are held to maxSkew."""
    assert per_zone(solve(zones_problem(1, existing={"z1": 5, "z2": 0}))) == {"z2": 1}


def test_min_domains_above_the_domains_makes_the_minimum_zero() -> None:
    # 2 zones < minDomains 3: each zone may hold at most maxSkew members
    assert per_zone(solve(zones_problem(2, min_domains=3))) == {"z1": 1, "z2": 1}
    answer = solve(zones_problem(3, min_domains=3))
    assert isinstance(answer, Infeasible)
    assert answer.reason == "TOPOLOGY_SPREAD", answer


def test_violations_name_the_spread_breach() -> None:
    p = zones_problem()
    broken = violations(p, {f"w-{i}": "a1" for i in range(4)})
    assert broken == ["topology spread zone: z1 holds 4, 4 above the least loaded domain (maxSkew 1)"]


def test_the_greedy_strategy_refuses_rather_than_breaks_spread() -> None:
    answer = solve(zones_problem(strategy="greedy"))  # Koordinator's plan packs z1
    assert isinstance(answer, Infeasible)
    assert answer.reason == "TOPOLOGY_SPREAD"
    assert answer.message == (
        "the greedy plan breaks topology spread zone: z1 holds 4, 4 above the least loaded domain (maxSkew 1)"
    )


def test_members_the_selector_does_not_match_are_not_counted() -> None:
    p = zones_problem()
    (spread,) = p.spread
    only_two = frozenset({"w-0", "w-1"})
    with_classes = dataclasses.replace(
        p,
        pod_groups=(
            dataclasses.replace(group("w", 2, 1), name="counted"),
            dataclasses.replace(group("w", 2, 1, first_rank=2), name="free"),
        ),
        spread=(dataclasses.replace(spread, matching=only_two, constrained=only_two),),
    )
    plan = solve(with_classes)
    assert isinstance(plan, Plan)
    assert violations(with_classes, plan.assignment) == []
    counted = [ZONE_OF[plan.assignment[m]] for m in ("w-0", "w-1")]
    assert sorted(counted) == ["z1", "z2"]
    assert [ZONE_OF[plan.assignment[m]] for m in ("w-2", "w-3")] == ["z1", "z1"]  # the score decides


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    members=st.integers(1, 4),
    capacity=st.lists(st.integers(0, 3), min_size=4, max_size=4),
    existing=st.tuples(st.integers(0, 3), st.integers(0, 3)),
    max_skew=st.integers(1, 2),
    min_domains=st.integers(1, 3),
)
def test_cpsat_matches_brute_force_with_spread(
    members: int, capacity: list[int], existing: tuple[int, int], max_skew: int, min_domains: int
) -> None:
    base = zones_problem(
        members, existing={"z1": existing[0], "z2": existing[1]}, max_skew=max_skew, min_domains=min_domains
    )
    p = dataclasses.replace(
        base, nodes=tuple(node(n.name, 8, cpu=c) for n, c in zip(base.nodes, capacity, strict=True))
    )
    best = brute_force(p)
    answer = solve(p)
    if best is None:
        assert isinstance(answer, Infeasible), answer
    else:
        assert isinstance(answer, Plan), answer
        assert violations(p, answer.assignment) == []
        assert answer.objective == best
