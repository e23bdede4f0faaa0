"""Gang placement solvers: CP-SAT over aggregated counts, and Koordinator's greedy plan.

``solve(problem)`` returns a `Plan` (one node per member) or an `Infeasible` (the binding rule in
words), dispatching on ``problem.options.strategy``. Inputs and outputs are frozen dataclasses of
plain values (`problem`), so callers copy what they need out of the scheduler cache first.

The CP-SAT solvers are imported when first called: OR-Tools (with pandas) costs koord-scheduler's
start 0.35 s of CPU and 54 MiB of memory, and a cluster without gangs or job-level preemption
never needs it. A configuration with job-level preemption imports them in the background as it
starts instead (``scheduler.solver.warm``).
"""

from __future__ import annotations

from collections.abc import Callable

from scheduler.solver.greedy import solve_greedy
from scheduler.solver.preemption_problem import PreemptionProblem, VictimSelection, VictimSpec
from scheduler.solver.problem import (
    Infeasible,
    ModelSize,
    NodeSpec,
    PlacementProblem,
    Plan,
    PodGroupSpec,
    ResourceVector,
    SolveOptions,
    TopologyLayer,
    objective,
    spread_violations,
    violations,
)
from scheduler.solver.victim_greedy import select_greedy

__all__ = [
    "Infeasible",
    "ModelSize",
    "NodeSpec",
    "PlacementProblem",
    "Plan",
    "PodGroupSpec",
    "PreemptionProblem",
    "ResourceVector",
    "SolveOptions",
    "TopologyLayer",
    "VictimSelection",
    "VictimSpec",
    "objective",
    "select_victims",
    "solve",
    "violations",
]


def solve(
    problem: PlacementProblem, *, on_fallback: Callable[[PlacementProblem], None] | None = None
) -> Plan | Infeasible:
    """Place a gang. ``on_fallback`` is called when CP-SAT found nothing in time and the greedy
    plan is returned instead (status GREEDY_FALLBACK), so the caller can count it."""
    if problem.options.strategy == "greedy":
        plan = solve_greedy(problem)
        broken = spread_violations(problem, plan.assignment) if isinstance(plan, Plan) else []
        if broken:  # Koordinator's greedy plan knows no topology spread: say so, never break it
            return Infeasible("TOPOLOGY_SPREAD", f"the greedy plan breaks {broken[0]}", strategy="greedy")
        return plan
    from scheduler.solver.gang_placement import solve_cpsat  # OR-Tools on first use (see the module doc)

    return solve_cpsat(problem, on_fallback=on_fallback)


def select_victims(
    problem: PreemptionProblem, *, on_fallback: Callable[[PreemptionProblem], None] | None = None
) -> VictimSelection | None:
    """Choose the victims of a job-level preemption (None: no victims let the whole job fit).
    ``on_fallback`` is called when CP-SAT found nothing in time and the greedy choice is returned
    (status GREEDY_FALLBACK)."""
    if problem.placement.options.strategy == "greedy":
        return select_greedy(problem)
    from scheduler.solver.victim_cpsat import select_cpsat

    return select_cpsat(problem, on_fallback=on_fallback)
