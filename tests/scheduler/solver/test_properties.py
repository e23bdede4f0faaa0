"""Property tests: every plan fits, respects Filter, MustGather and podCountMultiple, and repeats."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.solver import PlacementProblem, Plan, TopologyLayer, solve, violations
from tests.examples import examples
from tests.scheduler.solver.builders import group, node, problem


@st.composite
def clusters(draw: st.DrawFn) -> PlacementProblem:
    n_spines = draw(st.integers(1, 2))
    n_blocks = draw(st.integers(1, 3))
    n_nodes = draw(st.integers(1, 24))
    nodes = []
    for i in range(n_nodes):
        s = draw(st.integers(0, n_spines - 1))
        b = draw(st.integers(0, n_blocks - 1))
        nodes.append(node(f"n{i:02d}", draw(st.integers(0, 8)), draw(st.integers(0, 16)), (f"s{s}", f"b{b}")))
    layers = (
        TopologyLayer(
            "SpineLayer",
            draw(st.sampled_from([None, "PreferGather", "MustGather"])),
            draw(st.sampled_from([1, 1, 2])),
        ),
        TopologyLayer(
            "BlockLayer",
            draw(st.sampled_from([None, "PreferGather", "MustGather"])),
            draw(st.sampled_from([1, 1, 2, 4])),
        ),
    )
    groups = [group("w", draw(st.integers(1, 16)), draw(st.integers(0, 4)), draw(st.integers(0, 4)))]
    if draw(st.booleans()):
        groups.append(
            group(
                "m", draw(st.integers(1, 2)), draw(st.integers(0, 2)), draw(st.integers(1, 8)), first_rank=100
            )
        )
    names = [n.name for n in nodes]
    feasible = {}
    if draw(st.booleans()):
        feasible["w"] = frozenset(draw(st.lists(st.sampled_from(names), unique=True)))
    scores = {name: draw(st.integers(0, 100)) for name in names if draw(st.booleans())}
    strategy = draw(st.sampled_from(["cpsat", "greedy"]))
    return problem(groups, nodes, layers, scores=scores, feasible=feasible, strategy=strategy, time_limit=5.0)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_every_plan_is_valid(p: PlacementProblem) -> None:
    result = solve(p)
    if isinstance(result, Plan):
        # Fits every node, only feasible nodes, MustGather in one domain, podCountMultiple holds.
        assert violations(p, result.assignment) == []
        assert set(result.assignment) == {m for g in p.pod_groups for m in g.member_ids}


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_same_input_gives_same_plan(p: PlacementProblem) -> None:
    a, b = solve(p), solve(p)
    assert dataclasses.replace(a, solve_seconds=0.0) == dataclasses.replace(b, solve_seconds=0.0)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_cpsat_is_never_worse_than_greedy(p: PlacementProblem) -> None:
    cpsat = solve(dataclasses.replace(p, options=dataclasses.replace(p.options, strategy="cpsat")))
    greedy = solve(dataclasses.replace(p, options=dataclasses.replace(p.options, strategy="greedy")))
    if isinstance(greedy, Plan):
        assert isinstance(cpsat, Plan)
        assert cpsat.objective <= greedy.objective
