"""Solvers that prove instead of burning their time limit: counting bounds and plans for the gang
placement's score term, the counting decisions and cuts of victim selection, and the relative
gap tolerance (``SolveOptions.relative_gap``, ``CoschedulingArgs.solverRelativeGap``)."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from e2e.bench import gang_placement as gang_bench
from e2e.bench.victim_selection import problem as victim_bench
from scheduler.plugins.coscheduling import CoschedulingArgs
from scheduler.solver import (
    NodeSpec,
    PlacementProblem,
    Plan,
    PodGroupSpec,
    PreemptionProblem,
    ResourceVector,
    SolveOptions,
    TopologyLayer,
    VictimSpec,
    select_victims,
    solve,
    violations,
)
from scheduler.solver.preemption_problem import violations as vviolations
from scheduler.solver.score_bound import DomainSlots, best_choice, exact_choice, score_upper_bound
from scheduler.solver.victim_bounds import rank_lower_bound
from scheduler.solver.victim_greedy import select_greedy
from tests.examples import examples

# ---- the score term by counting ------------------------------------------------------------------


@st.composite
def domain_sets(draw: st.DrawFn) -> tuple[list[DomainSlots], int, int, bool]:
    domains = []
    for parent in range(draw(st.integers(1, 2))):
        for i in range(draw(st.integers(1, 4))):
            hist = draw(st.dictionaries(st.sampled_from([0, 25, 50, 88, 100]), st.integers(1, 5), max_size=3))
            domains.append(DomainSlots((f"s{parent}", f"b{i}"), tuple(sorted(hist.items(), reverse=True))))
    members = draw(st.integers(1, 20))
    k = draw(st.integers(1, 3))
    return domains, members, k, draw(st.booleans())


def _brute_best(domains: list[DomainSlots], members: int, k: int, one_parent: bool) -> int | None:
    best = None
    for n in range(1, k + 1):
        for chosen in itertools.combinations(domains, n):
            if one_parent and len({d.domain[:-1] for d in chosen}) > 1:
                continue
            slots = sorted((s for d in chosen for s, c in d.slots for _ in range(c)), reverse=True)
            if len(slots) >= members:
                score = sum(slots[:members])
                best = score if best is None else max(best, score)
    return best


@settings(max_examples=examples(200), deadline=None)
@given(domain_sets())
def test_the_counting_bound_is_never_below_the_best_choice_and_the_plan_never_above(
    case: tuple[list[DomainSlots], int, int, bool],
) -> None:
    domains, members, k, one_parent = case
    brute = _brute_best(domains, members, k, one_parent)
    if brute is None:
        return
    assert score_upper_bound(domains, members, k, one_parent=one_parent) >= brute
    anywhere = _brute_best(domains, members, len(domains), one_parent=False)
    assert anywhere is not None
    assert score_upper_bound(domains, members, None) >= anywhere
    exact = exact_choice(domains, members, k, one_parent=one_parent)
    assert exact is not None
    assert exact[1] == brute
    assert len(exact[0]) <= k
    assert _brute_best([d for d in domains if d.domain in exact[0]], members, k, one_parent) == brute
    found = best_choice(domains, members, k, one_parent=one_parent)
    if found is not None:
        chosen, score = found
        assert len(chosen) == k
        assert score <= brute
        if one_parent:
            assert len({d[:-1] for d in chosen}) == 1


def test_the_bound_is_tight_when_one_domain_has_every_best_slot() -> None:
    domains = [DomainSlots(("s0", "b0"), ((100, 4), (50, 4))), DomainSlots(("s0", "b1"), ((88, 8),))]
    assert score_upper_bound(domains, 4, 1) == 400
    assert best_choice(domains, 4, 1) == ((("s0", "b0"),), 400)
    assert best_choice(domains, 12, 1) is None  # no one domain holds 12


def test_without_prefer_gather_the_score_bound_sums_every_spine() -> None:
    """No PreferGather layer: any nodes may be used, so the bound adds up the slots of every
    domain (a bound over one spine's alone cut the best plan, score 3, down to greedy's 2)."""
    r = ResourceVector
    problem = PlacementProblem(
        gang="default/train",
        resources=("gpu", "cpu"),
        pod_groups=(PodGroupSpec("w", r((1, 0)), ("w-0",)), PodGroupSpec("m", r((1, 1)), ("m-0",))),
        nodes=(
            NodeSpec("n0", r((1, 1)), ("s0", "b0")),
            NodeSpec("n2", r((1, 0)), ("s0", "b0")),
            NodeSpec("n3", r((1, 1)), ("s1", "b0")),
        ),
        layers=(TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer")),
        node_scores={"n2": 1, "n3": 2},
    )
    plan = solve(problem)
    assert isinstance(plan, Plan)
    assert plan.objective == (-3,)
    assert plan.assignment == {"m-0": "n3", "w-0": "n2"}


def _bench_gang(nodes: int, size: int, trial: int, **options: object) -> PlacementProblem:
    cluster = gang_bench.build_cluster(nodes, random.Random(trial * 104729 + nodes))
    return gang_bench.build_problem(cluster, size, SolveOptions(**options))  # type: ignore[arg-type]


def test_a_bench_gang_is_proven_within_the_gap_by_counting_without_a_model() -> None:
    """The bench's 5,000 nodes, 256 members: two blocks are the fewest by counting, the counting
    plan reaches that and its score is within 1% of the counting bound, so no CP-SAT model is
    built. Before, CP-SAT ran to its time limit (FEASIBLE) on 8 of 10 such gangs."""
    problem = _bench_gang(5000, 256, trial=0, time_limit_seconds=30.0)
    plan = solve(problem)
    greedy = solve(dataclasses.replace(problem, options=SolveOptions(strategy="greedy")))
    assert isinstance(plan, Plan)
    assert isinstance(greedy, Plan)
    assert violations(problem, plan.assignment) == []
    assert plan.status == "OPTIMAL"
    assert plan.gap is not None
    assert plan.gap <= problem.options.relative_gap
    assert plan.model_size.variables == 0
    assert plan.objective[:2] == greedy.objective[:2] == (2, 1)
    assert plan.objective < greedy.objective


def test_fewer_blocks_across_two_spines_beat_more_blocks_in_one() -> None:
    """1,024 members: no spine's seven roomiest blocks hold them, the two spines' together do.
    Blocks rank before spines, so seven blocks in two spines is the better plan; greedy (and
    CP-SAT hinted with it, at its time limit) stayed at eight blocks in one spine. The limit is
    wall-clock: the default second ran out on a loaded 2-core machine before the proof."""
    problem = _bench_gang(5000, 1024, trial=0, time_limit_seconds=30.0)
    plan = solve(problem)
    assert isinstance(plan, Plan)
    assert violations(problem, plan.assignment) == []
    assert plan.objective[:2] == (7, 2)
    assert plan.status == "OPTIMAL"


def test_relative_gap_zero_asks_for_a_proof() -> None:
    problem = _bench_gang(1000, 64, trial=1, relative_gap=0.0, time_limit_seconds=30.0)
    plan = solve(problem)
    assert isinstance(plan, Plan)
    assert plan.status == "OPTIMAL"
    assert plan.gap == 0.0


# ---- victim selection ----------------------------------------------------------------------------


def _victim(uid: str, node: str, cpu: int, priority: int, job: str | None = None) -> VictimSpec:
    return VictimSpec(uid, f"default/{uid}", node, ResourceVector((cpu, 0)), priority, job or uid)


def test_the_top_rank_is_the_least_whose_victims_make_room_for_every_member() -> None:
    nodes = tuple(NodeSpec(f"n{i}", ResourceVector((0, 0))) for i in range(3))
    victims = (
        _victim("a", "n0", 2000, 100),
        _victim("b", "n1", 1000, 100),
        _victim("c", "n1", 1000, 200),
        _victim("d", "n2", 2000, 300),
    )
    members = PodGroupSpec("job", ResourceVector((2000, 0)), ("m0", "m1"))
    placement = PlacementProblem("default/job", ("cpu", "memory"), (members,), nodes)
    problem = PreemptionProblem(placement, victims)
    assert rank_lower_bound(problem) == 2  # rank 1 frees one member's room, rank 2 two
    three = dataclasses.replace(members, member_ids=("m0", "m1", "m2"))
    assert (
        rank_lower_bound(
            dataclasses.replace(problem, placement=dataclasses.replace(placement, pod_groups=(three,)))
        )
        == 3
    )
    four = dataclasses.replace(members, member_ids=("m0", "m1", "m2", "m3"))
    assert (
        rank_lower_bound(
            dataclasses.replace(problem, placement=dataclasses.replace(placement, pod_groups=(four,)))
        )
        == 4
    )


@pytest.mark.parametrize("size", [(1000, 64), (5000, 256)])
def test_bench_victims_are_proven_within_the_gap_and_beat_greedy(size: tuple[int, int]) -> None:
    """The bench's problems with time to spare: the counting cuts make the relaxation tight
    enough that the answer is proven within 1% among the nodes modelled; before, every stage
    ran to its time limit and nothing bounded the answer."""
    problem: PreemptionProblem = victim_bench(*size, 30.0, 0)
    greedy = select_greedy(problem)
    cpsat = select_victims(problem)
    assert greedy is not None
    assert cpsat is not None
    assert cpsat.gap is not None
    assert cpsat.gap <= problem.placement.options.relative_gap
    assert cpsat.objective < greedy.objective


# ---- the tolerance as a plugin argument ----------------------------------------------------------


def test_solver_relative_gap_is_a_coscheduling_arg_with_a_one_percent_default() -> None:
    assert CoschedulingArgs().solver_relative_gap == 0.01
    assert CoschedulingArgs.model_validate({"solverRelativeGap": 0.05}).solver_relative_gap == 0.05
    for bad in (-0.1, 1.0):
        with pytest.raises(ValidationError):
            CoschedulingArgs.model_validate({"solverRelativeGap": bad})


# ---- never worse than greedy, at the benches' sizes ---------------------------------------------


@settings(max_examples=examples(12), deadline=None)
@given(
    st.sampled_from([1000, 5000]),
    st.sampled_from([8, 64, 256, 1024]),
    st.integers(0, 10_000),
)
def test_gang_placement_is_never_worse_than_greedy_at_bench_sizes(nodes: int, size: int, seed: int) -> None:
    problem = _bench_gang(nodes, size, trial=seed)
    plan = solve(problem)
    greedy = solve(dataclasses.replace(problem, options=SolveOptions(strategy="greedy")))
    assert isinstance(plan, Plan)
    assert violations(problem, plan.assignment) == []
    if isinstance(greedy, Plan):
        assert plan.objective <= greedy.objective


@settings(max_examples=examples(6), deadline=None)
@given(st.sampled_from([(100, 16), (1000, 64), (5000, 256)]), st.integers(0, 10_000))
def test_victim_selection_is_never_costlier_than_greedy_at_bench_sizes(
    size: tuple[int, int], seed: int
) -> None:
    problem = victim_bench(*size, 1.0, seed)
    greedy = select_greedy(problem)
    cpsat = select_victims(problem)
    assert greedy is not None
    assert cpsat is not None
    assert vviolations(problem, cpsat.victims, cpsat.assignment) == []
    assert cpsat.objective <= greedy.objective


def test_several_member_classes_keep_the_decided_counts_and_get_a_score_bound() -> None:
    """With two member classes there is no counting plan, which once read as "no spine holds the
    gang" and raised the spine bound to two: the counts were then never decided and the model got
    no score bound. The spine bound is raised only when no spine's k roomiest blocks have room."""
    from scheduler.solver import gang_placement as gp
    from scheduler.solver.problem import objective

    r = ResourceVector
    nodes = tuple(
        NodeSpec(f"n-{s}{b}{i}", r((8, 64_000)), (f"s{s}", f"s{s}-b{b}"))
        for s in range(2)
        for b in range(2)
        for i in range(2)
    )
    problem = PlacementProblem(
        gang="default/mixed",
        resources=("gpu", "cpu"),
        pod_groups=(
            PodGroupSpec("worker", r((2, 8_000)), tuple(f"w-{i}" for i in range(4))),
            PodGroupSpec("ps", r((1, 4_000)), ("p-0", "p-1")),
        ),
        nodes=nodes,
        layers=(TopologyLayer("SpineLayer", "PreferGather"), TopologyLayer("BlockLayer", "PreferGather")),
        node_scores={n.name: 10 * i for i, n in enumerate(nodes)},
    )
    ctx = gp._Context(problem)
    bound = ctx.lower_bound(())
    term = gp._ScoreTerm.of(ctx, (), bound, ctx.classes_in(()))
    assert term.bound[:2] == bound[:2] == (1, 1)
    plan = solve(problem)
    assert isinstance(plan, Plan)
    assert plan.objective[:2] == (1, 1)
    assert term.upper_bound(objective(problem, plan.assignment)) is not None
