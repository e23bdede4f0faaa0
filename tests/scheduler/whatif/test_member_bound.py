"""``member_bound``: the most members a prefix of the job could place, by counting each class's
room per MustGather domain; the largest-members search tries no count above it."""

from __future__ import annotations

from scheduler.solver import NodeSpec, PlacementProblem, PodGroupSpec, ResourceVector, TopologyLayer
from scheduler.whatif.largest import member_bound


def _problem(must: bool) -> PlacementProblem:
    free = {"a0": 8, "a1": 8, "a2": 0, "b0": 8, "b1": 4, "b2": 8, "b3": 8}
    nodes = tuple(NodeSpec(n, ResourceVector((gpu, 16_000)), ("s0", f"b-{n[0]}")) for n, gpu in free.items())
    whole = PodGroupSpec("whole", ResourceVector((8, 1000)), tuple(f"w{i}" for i in range(5)))
    half = PodGroupSpec("half", ResourceVector((4, 1000)), ("h0", "h1"))
    return PlacementProblem(
        gang="default/train",
        resources=("gpu", "cpu"),
        pod_groups=(whole, half),
        nodes=nodes,
        feasible_nodes={"half": frozenset({"b1", "a2"})},
        layers=(TopologyLayer("SpineLayer"), TopologyLayer("BlockLayer", "MustGather" if must else None)),
    )


def test_the_bound_counts_each_class_in_the_roomiest_domain() -> None:
    # Block a: 2 whole members, no room for a half one (a2 is full); block b: 3 whole (b1 holds
    # only 4 GPUs) and 1 half on b1 (counted alone: the classes are relaxed apart).
    assert member_bound(_problem(must=True)) == 4


def test_without_must_gather_the_whole_cluster_counts() -> None:
    assert member_bound(_problem(must=False)) == 6
