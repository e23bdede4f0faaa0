"""Stopping CP-SAT within a relative gap, and the gap of an answer.

CP-SAT's deterministic interleaved search (several workers, a fixed seed) checks
``relative_gap_limit`` only between its batches, about a second apart on a loaded machine, and
runs on with an answer long proven within the gap. `GapStop` checks the gap on every solution
found and stops the search there; it is deterministic with one worker only (with several, the
stop lands mid-batch), so the solvers use it only then. `relative_gap` is the one definition of
the gap.
"""

from __future__ import annotations

from ortools.sat.python import cp_model
from ortools.sat.python.cp_model import CpSolverStatus

__all__ = ["GapStop", "relative_gap", "within"]


def relative_gap(found: float, bound: float) -> float:
    """How far a minimised objective ``found`` is above the proven ``bound``, relative to it."""
    return max(0.0, found - bound) / max(1.0, abs(found))


class GapStop(cp_model.CpSolverSolutionCallback):
    """Stop the search at the first solution within ``tolerance`` of the objective bound."""

    def __init__(self, tolerance: float) -> None:
        super().__init__()
        self.tolerance = tolerance

    def on_solution_callback(self) -> None:
        if relative_gap(self.objective_value, self.best_objective_bound) <= self.tolerance:
            self.stop_search()


def within(solver: cp_model.CpSolver, status: CpSolverStatus, tolerance: float) -> bool:
    """Whether a solve ended proven optimal or within ``tolerance`` of its bound."""
    if status == cp_model.OPTIMAL:
        return True
    return (
        status == cp_model.FEASIBLE
        and relative_gap(solver.objective_value, solver.best_objective_bound) <= tolerance
    )
