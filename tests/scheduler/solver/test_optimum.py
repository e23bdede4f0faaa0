"""On small cases the CP-SAT plan's objective equals a brute-force optimum."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.solver import Infeasible, PlacementProblem, Plan, TopologyLayer, solve, violations
from tests.examples import examples
from tests.scheduler.solver.builders import brute_force, group, node, problem

SPINE_BLOCK_PREFER = (
    TopologyLayer("SpineLayer", "PreferGather"),
    TopologyLayer("BlockLayer", "PreferGather"),
)
BLOCK_MUST = (TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", "MustGather"))

CASES = [
    pytest.param(
        problem(
            [group("w", 4, 2)],
            [
                node("a", 4, path=("s0", "b0")),
                node("b", 4, path=("s0", "b1")),
                node("c", 8, path=("s1", "b2")),
            ],
            SPINE_BLOCK_PREFER,
        ),
        id="prefer-gather-picks-the-one-block-that-holds-all",
    ),
    pytest.param(
        problem(
            [group("w", 5, 1)],
            [
                node("a", 3, path=("s0", "b0")),
                node("b", 2, path=("s0", "b1")),
                node("c", 4, path=("s1", "b2")),
                node("d", 1, path=("s1", "b3")),
            ],
            SPINE_BLOCK_PREFER,
        ),
        id="fewest-blocks-first-then-spines",
    ),
    pytest.param(
        problem(
            [group("w", 3, 1)],
            [
                node("a", 2, path=("s0", "b0")),
                node("b", 2, path=("s0", "b0")),
                node("c", 3, path=("s1", "b1")),
            ],
            SPINE_BLOCK_PREFER,
            scores={"a": 90, "b": 80, "c": 10},
        ),
        id="topology-before-score",
    ),
    pytest.param(
        problem(
            [group("w", 2, 1)],
            [
                node("a", 2, path=("s0", "b0")),
                node("b", 2, path=("s0", "b0")),
                node("c", 2, path=("s1", "b1")),
            ],
            SPINE_BLOCK_PREFER,
            scores={"a": 10, "b": 70, "c": 90},
        ),
        id="score-breaks-topology-ties",
    ),
    pytest.param(
        problem(
            [group("w", 4, 1)],
            [
                node("a", 3, path=("s0", "b0")),
                node("b", 3, path=("s0", "b1")),
                node("c", 2, path=("s1", "b2")),
                node("d", 2, path=("s1", "b2")),
            ],
            BLOCK_MUST,
        ),
        id="must-gather-block",
    ),
    pytest.param(
        problem(
            [group("w", 4, 1)],
            [
                node("a", 3, path=("s0", "b0")),
                node("b", 3, path=("s0", "b1")),
                node("c", 1, path=("s1", "b2")),
            ],
            (TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", "PreferGather", 2)),
        ),
        id="pod-count-multiple-per-block",
    ),
    pytest.param(
        problem(
            [group("m", 1, 0, 8), group("w", 3, 2, 1, first_rank=1)],
            [
                node("a", 4, 4, ("s0", "b0")),
                node("b", 2, 4, ("s0", "b0")),
                node("c", 0, 16, ("s0", "b1")),
                node("d", 2, 12, ("s1", "b2")),
            ],
            SPINE_BLOCK_PREFER,
        ),
        id="mixed-roles-share-nodes",
    ),
    pytest.param(
        problem(
            [group("w", 3, 1)],
            [
                node("a", 2, path=("s0", "b0")),
                node("b", 2, path=("s0", "b0")),
                node("c", 3, path=("s1", "b1")),
            ],
            SPINE_BLOCK_PREFER,
            feasible={"w": frozenset({"a", "b"})},
        ),
        id="feasibility-lists",
    ),
    pytest.param(
        problem([group("w", 3, 1)], [node("a", 1), node("b", 1), node("c", 1)], scores={"b": 5}),
        id="no-topology",
    ),
    pytest.param(
        problem(
            [group("w", 4, 2)],
            [
                node("a", 4, path=("s0", "b0")),
                node("b", 2, path=("s0", "b1")),
                node("c", 2, path=("s1", "b2")),
            ],
            BLOCK_MUST,
        ),
        id="must-gather-infeasible",
    ),
]


def check_against_brute_force(p: PlacementProblem) -> None:
    """With no gap tolerated the plan is the optimum itself; with the default tolerance it has
    the optimum's domain counts and a score within the tolerated gap of the optimum's."""
    want = brute_force(p)
    got = solve(dataclasses.replace(p, options=dataclasses.replace(p.options, relative_gap=0.0)))
    if want is None:
        assert isinstance(got, Infeasible), got
        return
    assert isinstance(got, Plan), got
    assert violations(p, got.assignment) == []
    assert got.objective == want
    assert got.status == "OPTIMAL"
    tolerant = solve(p)
    assert isinstance(tolerant, Plan), tolerant
    assert violations(p, tolerant.assignment) == []
    assert tolerant.status == "OPTIMAL"
    assert tolerant.objective[:-1] == want[:-1]
    assert -tolerant.objective[-1] * (1 + p.options.relative_gap) >= -want[-1]


@pytest.mark.parametrize("p", CASES)
def test_cpsat_objective_equals_brute_force_optimum(p: PlacementProblem) -> None:
    check_against_brute_force(p)


@st.composite
def small_problems(draw: st.DrawFn) -> PlacementProblem:
    n_nodes = draw(st.integers(1, 4))
    layers = (
        TopologyLayer("SpineLayer", draw(st.sampled_from([None, "PreferGather", "MustGather"]))),
        TopologyLayer(
            "BlockLayer",
            draw(st.sampled_from([None, "PreferGather", "MustGather"])),
            draw(st.sampled_from([1, 1, 2])),
        ),
    )
    nodes = [
        node(
            f"n{i}",
            draw(st.integers(0, 4)),
            draw(st.integers(0, 4)),
            (f"s{draw(st.integers(0, 1))}", f"b{draw(st.integers(0, 2))}"),
        )
        for i in range(n_nodes)
    ]
    # Block names are global here (b1 under s0 and s1 are different domains, as path prefixes).
    groups = [group("w", draw(st.integers(1, 3)), draw(st.integers(0, 2)), draw(st.integers(0, 2)))]
    if draw(st.booleans()):
        groups.append(group("m", 1, draw(st.integers(0, 2)), draw(st.integers(1, 3)), first_rank=10))
    scores = {f"n{i}": draw(st.integers(0, 100)) for i in range(n_nodes) if draw(st.booleans())}
    return problem(groups, nodes, layers, scores=scores)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_problems())
def test_random_small_problems_match_brute_force(p: PlacementProblem) -> None:
    check_against_brute_force(p)
