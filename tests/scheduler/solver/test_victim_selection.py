"""Job-level preemption's victim selection: the CP-SAT model against the greedy one, on the
scenarios the issue names and on random problems (every answer valid, CP-SAT never costlier)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.solver import (
    NodeSpec,
    PlacementProblem,
    PodGroupSpec,
    PreemptionProblem,
    ResourceVector,
    SolveOptions,
    TopologyLayer,
    VictimSpec,
    select_victims,
)
from scheduler.solver.preemption_problem import objective, violations
from scheduler.solver.victim_greedy import select_greedy
from tests.examples import examples

RESOURCES = ("cpu", "memory")
GI = 1024**3


def job(count: int, cpu: int, memory: int = 0, name: str = "hp") -> PodGroupSpec:
    return PodGroupSpec(name, ResourceVector((cpu, memory)), tuple(f"{name}-{i}" for i in range(count)))


def node(name: str, free_cpu: int, free_memory: int = 64 * GI, path: tuple[str, ...] = ()) -> NodeSpec:
    return NodeSpec(name, ResourceVector((free_cpu, free_memory)), path)


def victim(
    name: str,
    node_name: str,
    cpu: int,
    *,
    priority: int = 1000,
    job_key: str | None = None,
    pdbs: tuple[str, ...] = (),
    memory: int = 0,
) -> VictimSpec:
    return VictimSpec(
        uid=name,
        name=f"default/{name}",
        node=node_name,
        request=ResourceVector((cpu, memory)),
        priority=priority,
        job=job_key or name,
        pdbs=pdbs,
    )


def preemption(
    groups: Sequence[PodGroupSpec],
    nodes: Sequence[NodeSpec],
    victims: Sequence[VictimSpec],
    *,
    layers: Sequence[TopologyLayer] = (),
    job_sizes: dict[str, int] | None = None,
    pdb_allowed: dict[str, int] | None = None,
    strategy: str = "cpsat",
) -> PreemptionProblem:
    placement = PlacementProblem(
        gang="default/hp",
        resources=RESOURCES,
        pod_groups=tuple(groups),
        nodes=tuple(nodes),
        layers=tuple(layers),
        options=SolveOptions(time_limit_seconds=10.0, strategy=strategy),  # type: ignore[arg-type]
    )
    return PreemptionProblem(placement, tuple(victims), job_sizes or {}, pdb_allowed or {})


def full_cluster(
    nodes: int = 4, pods_per_node: int = 4, cpu: int = 1000
) -> tuple[list[NodeSpec], list[VictimSpec]]:
    """Nodes of 4 CPU filled with 1-CPU low-priority pods (the v1.7 scenario)."""
    return (
        [node(f"n{i}", 0) for i in range(nodes)],
        [victim(f"low-{i}-{j}", f"n{i}", cpu) for i in range(nodes) for j in range(pods_per_node)],
    )


def check(problem: PreemptionProblem) -> tuple[str, ...]:
    selection = select_victims(problem)
    assert selection is not None
    assert violations(problem, selection.victims, selection.assignment) == []
    assert selection.objective == objective(problem, selection.victims)
    return selection.victims


def test_the_v17_job_preempts_just_enough_across_two_nodes() -> None:
    nodes, victims = full_cluster()
    chosen = check(preemption([job(2, 3000, 4 * GI)], nodes, victims))
    assert len(chosen) == 6
    assert len({v.split("-")[1] for v in chosen}) == 2  # three on each of two nodes


def test_nothing_is_evicted_when_the_job_cannot_fit_even_with_every_victim_gone() -> None:
    nodes, victims = full_cluster()
    problem = preemption([job(5, 3000)], nodes, victims)
    assert select_victims(problem) is None
    assert select_greedy(problem) is None


def test_lower_priority_victims_go_first_even_when_more_pods_go() -> None:
    nodes = [node("a", 0), node("b", 0)]
    victims = [victim("mid", "a", 4000, priority=500)] + [
        victim(f"low-{i}", "b", 1000, priority=100) for i in range(4)
    ]
    assert sorted(check(preemption([job(1, 4000)], nodes, victims))) == [f"low-{i}" for i in range(4)]


def test_a_pdb_protected_victim_is_spared_when_another_choice_exists() -> None:
    nodes = [node("a", 0), node("b", 0)]
    victims = [victim("guarded", "a", 4000, pdbs=("default/guard",)), victim("free", "b", 4000)]
    chosen = check(preemption([job(1, 4000)], nodes, victims, pdb_allowed={"default/guard": 0}))
    assert chosen == ("free",)


def test_a_pdb_is_only_a_cost_when_there_is_no_other_choice() -> None:
    victims = [victim("guarded", "a", 4000, pdbs=("default/guard",))]
    chosen = check(preemption([job(1, 4000)], [node("a", 0)], victims, pdb_allowed={"default/guard": 0}))
    assert chosen == ("guarded",)


def test_a_gang_victim_costs_its_whole_gang() -> None:
    # Evicting one member of the 3-pod gang breaks the job: the single pod is cheaper.
    nodes = [node("a", 0), node("b", 0), node("c", 0), node("d", 0)]
    victims = [
        victim("gang-0", "a", 4000, job_key="default/gang"),
        victim("gang-1", "b", 4000, job_key="default/gang"),
        victim("gang-2", "c", 4000, job_key="default/gang"),
        victim("single", "d", 4000),
    ]
    problem = preemption([job(1, 4000)], nodes, victims, job_sizes={"default/gang": 3})
    assert check(problem) == ("single",)


def test_one_gang_is_cheaper_than_several_single_pods() -> None:
    # Two members to place: both members of one gang (one job) beat two unrelated pods (two jobs).
    nodes = [node("a", 0), node("b", 0), node("c", 0), node("d", 0)]
    victims = [
        victim("gang-0", "a", 4000, job_key="default/gang"),
        victim("gang-1", "b", 4000, job_key="default/gang"),
        victim("single-0", "c", 4000),
        victim("single-1", "d", 4000),
    ]
    problem = preemption([job(2, 4000)], nodes, victims, job_sizes={"default/gang": 2})
    assert check(problem) == ("gang-0", "gang-1")


def test_must_gather_preempts_inside_one_block() -> None:
    layers = [TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", strategy="MustGather")]
    nodes = [node(f"b{b}-{i}", 0, path=("s0", f"b{b}")) for b in range(2) for i in range(2)]
    # Block b0 has the cheapest victims on one node only; b1 is uniformly a bit dearer.
    victims = [
        victim("b0-0-low", "b0-0", 4000, priority=100),
        victim("b0-1-high", "b0-1", 4000, priority=900),
        victim("b1-0-mid", "b1-0", 4000, priority=500),
        victim("b1-1-mid", "b1-1", 4000, priority=500),
    ]
    problem = preemption([job(2, 4000)], nodes, victims, layers=layers)
    chosen = check(problem)
    assert sorted(chosen) == ["b1-0-mid", "b1-1-mid"]


def test_cpsat_beats_greedy_when_an_early_choice_forces_a_dearer_eviction() -> None:
    # Greedy puts the small member in c's free room; then the big one fits nowhere but on b, whose
    # victim has a high priority. CP-SAT puts the small member on a and the big one on c: only
    # low-priority pods go.
    nodes = [node("a", 0), node("b", 0), node("c", 2000)]
    victims = [
        victim("a-low", "a", 2000, priority=100),
        victim("b-high", "b", 4000, priority=900),
        victim("c-low", "c", 2000, priority=100),
    ]
    groups = [job(1, 2000, name="small"), job(1, 4000, name="big")]
    greedy = select_greedy(preemption(groups, nodes, victims))
    assert greedy is not None
    assert greedy.victims == ("b-high",)
    assert sorted(check(preemption(groups, nodes, victims))) == ["a-low", "c-low"]


@st.composite
def random_problems(draw: st.DrawFn) -> PreemptionProblem:
    n_nodes = draw(st.integers(1, 5))
    nodes, victims = [], []
    for i in range(n_nodes):
        nodes.append(node(f"n{i}", draw(st.integers(0, 3)) * 1000, path=("s0", f"b{i % 2}")))
        for j in range(draw(st.integers(0, 3))):
            victims.append(
                victim(
                    f"v{i}-{j}",
                    f"n{i}",
                    draw(st.integers(1, 3)) * 1000,
                    priority=draw(st.sampled_from([100, 200, 300])),
                    job_key=draw(st.sampled_from(["g1", "g2", f"v{i}-{j}"])),
                    pdbs=draw(st.sampled_from([(), ("default/pdb",)])),
                )
            )
    groups = [job(draw(st.integers(1, 3)), draw(st.integers(1, 4)) * 1000)]
    must = draw(st.booleans())
    layers = [
        TopologyLayer("SpineLayer"),
        TopologyLayer("BlockLayer", strategy="MustGather" if must else None),
    ]
    return preemption(
        groups,
        nodes,
        victims,
        layers=layers,
        job_sizes={"g1": 3, "g2": 2},
        pdb_allowed={"default/pdb": draw(st.integers(0, 2))},
    )


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problems())
def test_selections_are_valid_and_cpsat_is_never_costlier_than_greedy(problem: PreemptionProblem) -> None:
    greedy = select_greedy(problem)
    cpsat = select_victims(problem)
    if greedy is not None:
        assert violations(problem, greedy.victims, greedy.assignment) == []
        assert cpsat is not None
    if cpsat is not None:
        assert violations(problem, cpsat.victims, cpsat.assignment) == []
        assert cpsat.status == "OPTIMAL"
        if greedy is not None:
            assert cpsat.objective <= greedy.objective


@pytest.mark.parametrize("strategy", ["cpsat", "greedy"])
def test_a_job_that_fits_without_victims_evicts_nobody(strategy: str) -> None:
    problem = preemption([job(1, 1000)], [node("a", 2000)], [victim("v", "a", 1000)], strategy=strategy)
    selection = select_victims(problem)
    assert selection is not None
    assert selection.victims == ()


@pytest.mark.parametrize("strategy", ["cpsat", "greedy"])
def test_a_quota_release_evicts_pods_of_the_quota_wherever_they_run(strategy: str) -> None:
    # The member fits on a's free room, but its quota needs 2 CPU back: one of the quota's pods
    # on b goes (the cheapest), although no member lands on b.
    victims = [
        victim("q-low", "b", 2000, priority=100),
        victim("q-mid", "b", 2000, priority=200),
    ]
    base = preemption([job(1, 4000)], [node("a", 4000), node("b", 0)], victims, strategy=strategy)
    marked = tuple(dataclasses.replace(v, release="quota:q") for v in victims)

    def with_release(cpu: int) -> PreemptionProblem:
        return dataclasses.replace(base, victims=marked, releases={"quota:q": ResourceVector((cpu, 0))})

    problem = with_release(2000)
    selection = select_victims(problem)
    assert selection is not None
    assert selection.victims == ("q-low",)
    assert violations(problem, selection.victims, selection.assignment) == []
    assert select_victims(with_release(6000)) is None


@pytest.mark.parametrize("seed", [0, 1])
def test_cpsat_is_never_costlier_than_greedy_when_its_stages_run_out_of_time(seed: int) -> None:
    """The bench's 5,000 nodes x 256 members: the first stage hits its time limit and, before the
    answers were compared, fixed its term at 296 victim jobs where greedy had 238."""
    from e2e.bench.victim_selection import problem as bench_problem

    problem = bench_problem(5000, 256, 1.0, seed)
    greedy = select_greedy(problem)
    cpsat = select_victims(problem)
    assert greedy is not None
    assert cpsat is not None
    assert violations(problem, cpsat.victims, cpsat.assignment) == []
    assert cpsat.objective <= greedy.objective
    assert cpsat.objective == objective(problem, cpsat.victims)


def test_a_greedy_answer_better_than_a_gap_limited_solve_is_reported_as_proven() -> None:
    # Found by hypothesis: the only way is v1-0, v1-1 (n1) and v3-0 (n3, against its budget) in
    # block b1. The last stage stopped within its 1 % gap at one eviction more (106 against a bound
    # of 105); the greedy answer is that bound, so it is returned as proven, not as "GREEDY".
    b0, b1 = ("s0", "b0"), ("s0", "b1")
    nodes = [
        node("n0", 0, path=b0),
        node("n1", 0, path=b1),
        node("n2", 0, path=b0),
        node("n3", 1000, path=b1),
        node("n4", 2000, path=b0),
    ]
    victims = [
        victim("v1-0", "n1", 1000, priority=100, job_key="g1"),
        victim("v1-1", "n1", 3000, priority=100, job_key="g1"),
        victim("v3-0", "n3", 3000, priority=100, job_key="g2", pdbs=("default/pdb",)),
        victim("v4-0", "n4", 2000, priority=100, job_key="g1"),
        victim("v4-1", "n4", 2000, priority=100, job_key="g2"),
    ]
    layers = [TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", strategy="MustGather")]
    problem = preemption(
        [job(2, 4000)],
        nodes,
        victims,
        layers=layers,
        job_sizes={"g1": 3, "g2": 2},
        pdb_allowed={"default/pdb": 0},
    )
    selection = select_victims(problem)
    assert selection is not None
    assert selection.victims == ("v1-0", "v1-1", "v3-0")
    assert selection.status == "OPTIMAL"
    assert selection.gap == 0.0
