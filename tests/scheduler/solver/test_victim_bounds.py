"""Victim selection's counting bounds per MustGather domain, against a brute-force optimum.

The bounds let the greedy pass skip domains and the CP-SAT model leave them out
(`victim_bounds`): every floor must be at most the best selection inside its domain, term by
term; a domain without a floor must hold no selection; the greedy pass must answer as weighing
every domain did; and the model without the domains left out must find the brute-force optimum.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

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
from scheduler.solver.victim_bounds import domain_floors, least_ranks, rank_lower_bound
from scheduler.solver.victim_greedy import greedy_pass, select_greedy
from tests.examples import examples

Objective = tuple[int, ...]


@st.composite
def domain_problems(draw: st.DrawFn) -> PreemptionProblem:
    """2-3 blocks of 1-2 nodes, at most 7 victims, 1-2 pod groups of at most 3 members, MustGather
    at the block (or none), sometimes a blocker, a PDB, a reclaim budget or a podCountMultiple."""
    nodes: list[NodeSpec] = []
    victims: list[VictimSpec] = []
    for b in range(draw(st.integers(2, 3))):
        for i in range(draw(st.integers(1, 2))):
            name = f"n{b}-{i}"
            nodes.append(NodeSpec(name, ResourceVector((draw(st.integers(0, 2)) * 1000, 0)), ("s0", f"b{b}")))
            for j in range(draw(st.integers(0, 2))):
                if len(victims) == 7:
                    break
                uid = f"v{b}-{i}-{j}"
                victims.append(
                    VictimSpec(
                        uid=uid,
                        name=f"default/{uid}",
                        node=name,
                        request=ResourceVector((draw(st.integers(1, 3)) * 1000, draw(st.integers(0, 1)))),
                        priority=draw(st.sampled_from([100, 200, 300])),
                        job=draw(st.sampled_from(["g1", "g2", uid, uid])),
                        pdbs=draw(st.sampled_from([(), (), ("default/pdb",)])),
                        budget=draw(st.sampled_from([None, None, None, "quota"])),
                    )
                )
    groups = tuple(
        PodGroupSpec(
            f"grp{g}",
            ResourceVector((draw(st.integers(1, 3)) * 1000, draw(st.integers(0, 1)))),
            tuple(f"m{g}-{k}" for k in range(draw(st.integers(1, 3 - g)))),
        )
        for g in range(draw(st.integers(1, 2)))
    )
    must = draw(st.sampled_from([True, True, False]))
    layers = (
        TopologyLayer("SpineLayer"),
        TopologyLayer(
            "BlockLayer",
            "MustGather" if must else None,
            pod_count_multiple=draw(st.sampled_from([1, 1, 2])),
        ),
    )
    blockers: dict[tuple[str, str], frozenset[str]] = {}
    if draw(st.booleans()) and victims:
        blocker = draw(st.sampled_from(victims))
        node = draw(st.sampled_from(nodes)).name
        blockers[(draw(st.sampled_from(groups)).name, node)] = frozenset({blocker.uid})
    placement = PlacementProblem(
        gang="default/hp",
        resources=("cpu", "gpu"),
        pod_groups=groups,
        nodes=tuple(nodes),
        layers=layers,
        options=SolveOptions(time_limit_seconds=30.0, relative_gap=0.0),
    )
    return PreemptionProblem(
        placement,
        tuple(victims),
        job_sizes={"g1": 3, "g2": 2},
        pdb_allowed={"default/pdb": draw(st.integers(0, 1))},
        budgets={"quota": ResourceVector((draw(st.integers(1, 4)) * 1000, 2**62))},
        blockers=blockers,
    )


def _placements(problem: PreemptionProblem, nodes: Sequence[str]) -> list[dict[str, str]]:
    """Every way to put the members on ``nodes`` (members of a group taken as alike)."""
    per_group = []
    for group in problem.placement.pod_groups:
        choices = itertools.combinations_with_replacement(nodes, group.count)
        per_group.append([dict(zip(group.member_ids, chosen, strict=True)) for chosen in choices])
    out = []
    for parts in itertools.product(*per_group):
        merged: dict[str, str] = {}
        for part in parts:
            merged.update(part)
        out.append(merged)
    return out


def brute_force(problem: PreemptionProblem, nodes: Sequence[str] | None = None) -> Objective | None:
    """The least objective of a valid selection whose members all land on ``nodes`` (all nodes
    when None); None when there is none."""
    names = [n.name for n in problem.placement.nodes] if nodes is None else list(nodes)
    placements = _placements(problem, names)
    uids = [v.uid for v in problem.victims]
    subsets = [c for k in range(len(uids) + 1) for c in itertools.combinations(uids, k)]
    for chosen in sorted(subsets, key=lambda c: objective(problem, c)):
        if any(not violations(problem, chosen, placed) for placed in placements):
            return objective(problem, chosen)
    return None


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(domain_problems())
def test_each_floor_is_below_the_best_selection_of_its_domain(problem: PreemptionProblem) -> None:
    floors = domain_floors(problem)
    for domain, nodes in problem.placement.must_gather_domains.items():
        best = brute_force(problem, [n.name for n in nodes])
        floor = floors[domain]
        if floor is None:
            assert best is None, f"{domain}: no floor, but {best} fits"
            continue
        if best is not None:
            assert all(f <= b for f, b in zip(floor, best, strict=True)), f"{domain}: {floor} > {best}"
    found = [r for r in least_ranks(problem).values() if r is not None]
    overall = brute_force(problem)
    if overall is not None:
        assert rank_lower_bound(problem) <= overall[0]
        assert found


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(domain_problems())
def test_cpsat_finds_the_brute_force_optimum_with_domains_left_out(problem: PreemptionProblem) -> None:
    best = brute_force(problem)
    selection = select_victims(problem)
    if best is None:
        assert selection is None
        return
    assert selection is not None
    assert violations(problem, selection.victims, selection.assignment) == []
    assert selection.objective == best


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(domain_problems())
def test_the_greedy_pass_skipping_domains_answers_as_weighing_every_domain(
    problem: PreemptionProblem,
) -> None:
    nowhere = {domain: (0, 0, 0, 0, 0) for domain in problem.placement.must_gather_domains}
    every = greedy_pass(problem, 0, nowhere).selection
    skipping = select_greedy(problem)
    if every is None:
        assert skipping is None
        return
    assert skipping is not None
    assert (skipping.victims, dict(skipping.assignment), skipping.objective) == (
        every.victims,
        dict(every.assignment),
        every.objective,
    )


def _whole_node_victim(node: str) -> VictimSpec:
    return VictimSpec(f"v-{node}", f"default/v-{node}", node, ResourceVector((4000, 0)), 100, f"v-{node}")


def test_a_domain_too_small_for_the_gang_has_no_floor_and_no_candidate_node() -> None:
    """Two blocks: b0 has two nodes full of victims, b1 one node; a gang of two whole-node
    members must gather in a block, so only b0 can hold it and b1's node stays out of the model."""
    nodes = (
        NodeSpec("a0", ResourceVector((0, 0)), ("s0", "b0")),
        NodeSpec("a1", ResourceVector((0, 0)), ("s0", "b0")),
        NodeSpec("c0", ResourceVector((0, 0)), ("s0", "b1")),
    )
    victims = tuple(_whole_node_victim(n.name) for n in nodes)
    placement = PlacementProblem(
        gang="default/hp",
        resources=("cpu", "gpu"),
        pod_groups=(PodGroupSpec("hp", ResourceVector((4000, 0)), ("m0", "m1")),),
        nodes=nodes,
        layers=(TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", "MustGather")),
    )
    problem = PreemptionProblem(placement, victims)
    assert domain_floors(problem) == {("s0", "b0"): (1, 0, 2, 2, 2), ("s0", "b1"): None}
    weighed = greedy_pass(problem, 0)
    assert weighed.candidates == {"a0", "a1"}
    assert weighed.complete
    selection = select_victims(problem)
    assert selection is not None
    assert sorted(selection.victims) == ["v-a0", "v-a1"]
    assert selection.status == "OPTIMAL"


def test_a_blocker_in_a_domain_left_out_is_kept_with_its_node() -> None:
    """The member of 3000m fits on a0 only once v-a0 goes, and only once v-c0 in block b1 goes
    too (pod anti-affinity over the spine). b1 cannot hold the gang, so its node is no candidate;
    the model once dropped v-c0 with it and with it the blocker, and placed the member on a0
    keeping v-c0 (found by hypothesis). Now c0 is kept for its blocker."""
    nodes = (
        NodeSpec("a0", ResourceVector((0, 0)), ("s0", "b0")),
        NodeSpec("a1", ResourceVector((0, 0)), ("s0", "b0")),
        NodeSpec("c0", ResourceVector((0, 0)), ("s0", "b1")),
    )
    victims = (
        VictimSpec("v-a0", "default/v-a0", "a0", ResourceVector((3000, 0)), 100, "g1"),
        VictimSpec("v-a1", "default/v-a1", "a1", ResourceVector((1000, 0)), 100, "g1"),
        VictimSpec("v-c0", "default/v-c0", "c0", ResourceVector((1000, 0)), 100, "g1"),
    )
    placement = PlacementProblem(
        gang="default/hp",
        resources=("cpu", "gpu"),
        pod_groups=(
            PodGroupSpec("small", ResourceVector((1000, 0)), ("m0",)),
            PodGroupSpec("big", ResourceVector((3000, 0)), ("m1",)),
        ),
        nodes=nodes,
        layers=(TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", "MustGather")),
    )
    problem = PreemptionProblem(placement, victims, blockers={("big", "a0"): frozenset({"v-c0"})})
    assert domain_floors(problem)[("s0", "b1")] is None
    selection = select_victims(problem)
    assert selection is not None
    assert violations(problem, selection.victims, selection.assignment) == []
    assert sorted(selection.victims) == ["v-a0", "v-a1", "v-c0"]
    assert dict(selection.assignment) == {"m0": "a1", "m1": "a0"}


def test_a_domain_whose_floor_is_above_the_greedy_answer_is_not_weighed() -> None:
    """b0 needs one eviction, b1 at least two: b1 is neither weighed nor modelled."""
    nodes = (
        NodeSpec("a0", ResourceVector((4000, 0)), ("s0", "b0")),
        NodeSpec("a1", ResourceVector((0, 0)), ("s0", "b0")),
        NodeSpec("c0", ResourceVector((0, 0)), ("s0", "b1")),
        NodeSpec("c1", ResourceVector((0, 0)), ("s0", "b1")),
    )
    victims = tuple(_whole_node_victim(n.name) for n in nodes if n.name != "a0")
    placement = PlacementProblem(
        gang="default/hp",
        resources=("cpu", "gpu"),
        pod_groups=(PodGroupSpec("hp", ResourceVector((4000, 0)), ("m0", "m1")),),
        nodes=nodes,
        layers=(TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", "MustGather")),
    )
    problem = PreemptionProblem(placement, victims)
    assert domain_floors(problem) == {("s0", "b0"): (1, 0, 1, 1, 1), ("s0", "b1"): (1, 0, 2, 2, 2)}
    weighed = greedy_pass(problem, 0)
    assert weighed.selection is not None
    assert weighed.selection.victims == ("v-a1",)
    assert weighed.candidates == {"a0", "a1"}
    selection = select_victims(problem)
    assert selection is not None
    assert selection.victims == ("v-a1",)
    assert selection.status == "OPTIMAL"
