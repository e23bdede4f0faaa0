"""Human reasons for a gang that cannot be placed, decided by counting where counting suffices.

Problem: when a gang does not fit, the user must learn which rule binds, in one stable sentence
("gang default/train needs 8 members in one BlockLayer domain; the largest free domain holds 6").
`diagnose` checks, in order, the rules that counting alone can refute: a pod class with no
feasible node, a pod class larger than the cluster's capacity for it, a gang size that is not a
multiple of a layer's podCountMultiple, the flooring of capacity to those multiples, and
MustGather (no domain of the layer holds the gang). What survives these checks can only fail on
packing (mixed roles sharing nodes), which the CP-SAT model reports through its assumptions and
`packing` renders. Every list is sorted, so the same input always gives the same text.
"""

from __future__ import annotations

from scheduler.solver.aggregate import Aggregate, DomainCapacity, PodClass
from scheduler.solver.problem import Infeasible, PlacementProblem, ResourceVector

__all__ = ["describe_request", "diagnose", "packing", "timeout"]


def describe_request(problem: PlacementProblem, request: ResourceVector) -> str:
    parts = [f"{name}={v}" for name, v in zip(problem.resources, request.values, strict=True) if v > 0]
    return ", ".join(parts) if parts else "no resources"


def _group_phrase(problem: PlacementProblem, pc: PodClass) -> str:
    return f"{pc.count} members of group {pc.name} ({describe_request(problem, pc.request)} each)"


def diagnose(problem: PlacementProblem, agg: Aggregate, cap: DomainCapacity) -> Infeasible | None:
    """The first rule that counting proves unsatisfiable, or None when counting finds no clash."""
    gang = problem.gang
    total_members = problem.member_count
    root = cap.per_class.get((), tuple(0 for _ in agg.pod_classes))
    for pc in sorted(agg.pod_classes, key=lambda p: p.name):
        if root[pc.index] == 0:
            return Infeasible(
                "NO_FEASIBLE_NODES",
                f"gang {gang} needs {_group_phrase(problem, pc)}; no node passing Filter has room for one",
                groups=(pc.name,),
            )
    for pc in sorted(agg.pod_classes, key=lambda p: p.name):
        if root[pc.index] < pc.count:
            return Infeasible(
                "CAPACITY",
                f"gang {gang} needs {_group_phrase(problem, pc)}; the feasible nodes hold {root[pc.index]}",
                groups=(pc.name,),
            )
    for layer in problem.layers:
        k = layer.pod_count_multiple
        if k > 1 and total_members % k:
            return Infeasible(
                "POD_COUNT_MULTIPLE",
                f"gang {gang} has {total_members} members, not a multiple of podCountMultiple {k} "
                f"at {layer.name}",
                layer=layer.name,
            )
    root_total = cap.total.get((), 0)
    if root_total < total_members:
        multiples = [layer for layer in problem.layers if layer.pod_count_multiple > 1]
        if multiples:
            deepest = multiples[-1]
            return Infeasible(
                "POD_COUNT_MULTIPLE",
                f"gang {gang} needs {total_members} members in multiples of {deepest.pod_count_multiple} "
                f"per {deepest.name} domain; the feasible nodes hold {root_total} that way",
                layer=deepest.name,
            )
        return Infeasible(
            "CAPACITY",
            f"gang {gang} needs {total_members} members; the feasible nodes hold {root_total} together",
        )
    must = problem.must_gather_index
    if must is not None:
        counts = tuple(pc.count for pc in agg.pod_classes)
        keys = sorted(k for k in cap.per_class if len(k) == must + 1)
        if not any(cap.can_hold(k, counts) for k in keys):
            largest = max((cap.holds.get(k, 0) for k in keys), default=0)
            layer = problem.layers[must]
            return Infeasible(
                "MUST_GATHER",
                f"gang {gang} needs {total_members} members in one {layer.name} domain; "
                f"the largest free domain holds {largest}",
                layer=layer.name,
            )
    return None


def packing(problem: PlacementProblem, groups: list[str], layer: str | None) -> Infeasible:
    """The exact model proved that these groups' demands cannot be met together."""
    names = sorted(set(groups))
    where = f" in one {layer} domain" if layer else ""
    if len(names) > 1:
        what = f"groups {', '.join(names)} cannot be packed together{where} on the feasible nodes"
    elif names:
        what = f"group {names[0]} cannot be packed{where} on the feasible nodes"
    else:
        what = f"the members cannot be packed{where} on the feasible nodes"
    return Infeasible(
        "PACKING",
        f"gang {problem.gang} needs {problem.member_count} members; {what}",
        layer=layer,
        groups=tuple(names),
    )


def timeout(problem: PlacementProblem, seconds: float) -> Infeasible:
    return Infeasible(
        "TIMEOUT",
        f"gang {problem.gang}: no placement found within {seconds:g}s and the greedy planner found none",
    )
