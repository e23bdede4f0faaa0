"""Small makers for placement problems in tests."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from scheduler.solver import (
    NodeSpec,
    PlacementProblem,
    PodGroupSpec,
    ResourceVector,
    SolveOptions,
    TopologyLayer,
    objective,
    violations,
)

RESOURCES = ("gpu", "cpu")


def group(name: str, count: int, gpu: int, cpu: int = 1, *, first_rank: int = 0) -> PodGroupSpec:
    return PodGroupSpec(
        name,
        ResourceVector((gpu, cpu)),
        tuple(f"{name}-{r}" for r in range(first_rank, first_rank + count)),
        tuple(range(first_rank, first_rank + count)),
    )


def node(name: str, gpu: int, cpu: int = 64, path: tuple[str, ...] = ()) -> NodeSpec:
    return NodeSpec(name, ResourceVector((gpu, cpu)), path)


def problem(
    groups: Sequence[PodGroupSpec],
    nodes: Sequence[NodeSpec],
    layers: Sequence[TopologyLayer] = (),
    *,
    scores: Mapping[str, int] | None = None,
    feasible: Mapping[str, frozenset[str]] | None = None,
    strategy: str = "cpsat",
    time_limit: float = 10.0,
) -> PlacementProblem:
    assert strategy in ("cpsat", "greedy")
    return PlacementProblem(
        gang="default/train",
        resources=RESOURCES,
        pod_groups=tuple(groups),
        nodes=tuple(nodes),
        feasible_nodes=dict(feasible or {}),
        layers=tuple(layers),
        node_scores=dict(scores or {}),
        options=SolveOptions(
            time_limit_seconds=time_limit, strategy="cpsat" if strategy == "cpsat" else "greedy"
        ),
    )


def brute_force(p: PlacementProblem) -> tuple[int, ...] | None:
    """The best objective over every member -> node assignment (None: nothing is valid)."""
    members = [m for g in p.pod_groups for m in g.member_ids]
    names = [n.name for n in p.nodes]
    best: tuple[int, ...] | None = None
    for combo in itertools.product(names, repeat=len(members)):
        assignment = dict(zip(members, combo, strict=True))
        if violations(p, assignment):
            continue
        obj = objective(p, assignment)
        if best is None or obj < best:
            best = obj
    return best
