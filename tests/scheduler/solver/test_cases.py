"""Named cases: infeasibility messages, greedy's weak spots (algorithms.md 2.5), a large gang."""

from __future__ import annotations

import itertools
import random

import pytest

from scheduler.solver import (
    Infeasible,
    NodeSpec,
    PlacementProblem,
    Plan,
    PodGroupSpec,
    ResourceVector,
    SolveOptions,
    TopologyLayer,
    solve,
    violations,
)
from scheduler.solver.greedy import plan as greedy_plan
from tests.scheduler.solver.builders import group, node, problem

PREFER = (TopologyLayer("SpineLayer", "PreferGather"), TopologyLayer("BlockLayer", "PreferGather"))
MUST_BLOCK = (TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", "MustGather"))


@pytest.mark.parametrize(
    ("p", "reason", "message"),
    [
        pytest.param(
            problem(
                [group("w", 8, 1)],
                [node("a", 6, path=("s0", "b0")), node("b", 4, path=("s0", "b1"))],
                MUST_BLOCK,
            ),
            "MUST_GATHER",
            "gang default/train needs 8 members in one BlockLayer domain; the largest free domain holds 6",
            id="must-gather",
        ),
        pytest.param(
            problem([group("w", 8, 2)], [node("a", 6), node("b", 4)]),
            "CAPACITY",
            "gang default/train needs 8 members of group w (gpu=2, cpu=1 each); the feasible nodes hold 5",
            id="capacity",
        ),
        pytest.param(
            problem([group("w", 2, 1)], [node("a", 6)], feasible={"w": frozenset()}),
            "NO_FEASIBLE_NODES",
            "gang default/train needs 2 members of group w (gpu=1, cpu=1 each); "
            "no node passing Filter has room for one",
            id="no-feasible-node",
        ),
        pytest.param(
            problem(
                [group("w", 6, 1)],
                [node("a", 8, path=("s0", "b0"))],
                (TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", "PreferGather", 4)),
            ),
            "POD_COUNT_MULTIPLE",
            "gang default/train has 6 members, not a multiple of podCountMultiple 4 at BlockLayer",
            id="not-a-multiple",
        ),
        pytest.param(
            problem(
                [group("w", 8, 1)],
                [node("a", 6, path=("s0", "b0")), node("b", 3, path=("s0", "b1"))],
                (TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", "PreferGather", 4)),
            ),
            "POD_COUNT_MULTIPLE",
            "gang default/train needs 8 members in multiples of 4 per BlockLayer domain; "
            "the feasible nodes hold 4 that way",
            id="multiples-floor-capacity",
        ),
        pytest.param(
            # Counting passes (each node takes 2 masters or 1 worker) but 3 masters + 1 worker don't.
            problem(
                [group("m", 3, 0, 4), group("w", 1, 2, 5, first_rank=3)],
                [node("a", 2, 8, ("s0", "b0")), node("b", 2, 8, ("s0", "b0"))],
                PREFER,
            ),
            "PACKING",
            "gang default/train needs 4 members; groups m, w cannot be packed together on the feasible nodes",
            id="packing-explained-by-assumptions",
        ),
    ],
)
def test_infeasible_names_the_binding_rule(p: PlacementProblem, reason: str, message: str) -> None:
    got = solve(p)
    assert isinstance(got, Infeasible)
    assert (got.reason, got.message) == (reason, message)


def test_heterogeneous_members_greedy_fails_cpsat_places() -> None:
    # The master sorts first, so every GPU node offers 0 slots (algorithms.md 2.4).
    p = problem(
        [group("master", 1, 0, 8), group("worker", 2, 4, 2, first_rank=1)],
        [node("g1", 4, 4, ("s0", "b0")), node("g2", 4, 4, ("s0", "b0")), node("c1", 0, 16, ("s0", "b0"))],
        PREFER,
    )
    assert greedy_plan(p) is None
    got = solve(p)
    assert isinstance(got, Plan)
    assert got.assignment == {"master-0": "c1", "worker-1": "g1", "worker-2": "g2"}


def test_fragmentation_greedy_tightest_spine_uses_more_blocks() -> None:
    # Spine s0 holds 9 in two blocks (5 + 4); s1 holds 8 in three blocks (3 + 3 + 2). Greedy takes
    # the tightest spine, s1, and needs three blocks; the fewest blocks is two, in s0.
    frees = {("s0", "b0"): 5, ("s0", "b1"): 4, ("s1", "b2"): 3, ("s1", "b3"): 3, ("s1", "b4"): 2}
    nodes = [node(f"n-{p[1]}", g, path=p) for p, g in frees.items()]
    p = problem([group("w", 8, 1)], nodes, PREFER)
    greedy = solve(problem([group("w", 8, 1)], nodes, PREFER, strategy="greedy"))
    cpsat = solve(p)
    assert isinstance(greedy, Plan)
    assert isinstance(cpsat, Plan)
    assert dict(greedy.domains_used)["BlockLayer"] == 3
    assert dict(cpsat.domains_used) == {"SpineLayer": 1, "BlockLayer": 2}


def test_ranks_stay_contiguous_across_blocks() -> None:
    # 10 ranks, 2 blocks: ranks 0..k-1 in one block and k..9 in the other, never interleaved
    # (the reference sorts by name here: w-10 before w-2).
    nodes = [node(f"n{i}", 2, path=("s0", f"b{i % 2}")) for i in range(6)]
    p = problem([group("w", 10, 1)], nodes, PREFER)
    for strategy in ("cpsat", "greedy"):
        got = solve(problem([group("w", 10, 1)], nodes, PREFER, strategy=strategy))
        assert isinstance(got, Plan)
        blocks = [dict((n.name, n.path[1]) for n in p.nodes)[got.assignment[f"w-{r}"]] for r in range(10)]
        changes = sum(1 for a, b in itertools.pairwise(blocks) if a != b)
        assert changes == 1, (strategy, blocks)


def test_large_gang_on_5000_nodes_solves() -> None:
    rng = random.Random(7)
    nodes = tuple(
        NodeSpec(
            f"node-{i:05d}",
            ResourceVector((gpus, gpus * 16_000 + rng.randrange(0, 24_000, 1000))),
            (f"s{i * 64 // 5000 // 32}", f"b{i * 64 // 5000:02d}"),
        )
        for i in range(5000)
        for gpus in [rng.choice([0, 0, 1, 2, 3, 4, 5, 6, 7, 8])]
    )
    members = tuple(f"w-{r}" for r in range(1024))
    p = PlacementProblem(
        gang="default/big",
        resources=("gpu", "cpu"),
        pod_groups=(PodGroupSpec("w", ResourceVector((2, 16_000)), members, tuple(range(1024))),),
        nodes=nodes,
        layers=(TopologyLayer("SpineLayer", "MustGather"), TopologyLayer("BlockLayer", "PreferGather")),
        options=SolveOptions(time_limit_seconds=2.0),
    )
    got = solve(p)
    assert isinstance(got, Plan)
    assert violations(p, got.assignment) == []
    assert got.model_size.variables < 2_000


def test_no_solution_in_time_falls_back_to_greedy_and_reports_it() -> None:
    nodes = [node(f"n{i}", 4, path=("s0", f"b{i % 3}")) for i in range(9)]
    p = problem([group("w", 12, 2)], nodes, PREFER, time_limit=1e-9)
    calls: list[PlacementProblem] = []
    got = solve(p, on_fallback=calls.append)
    assert isinstance(got, Plan)
    assert got.status == "GREEDY_FALLBACK"
    assert calls == [p]
    assert got.assignment == greedy_plan(p)
