"""The CP-SAT solvers imported ahead of their first call, in a thread of their own.

OR-Tools is imported when a CP-SAT solver is first called (``scheduler.solver``): 0.35 s of CPU
and 54 MiB that a cluster without gangs never pays. A configuration that turns job-level
preemption on (``CoschedulingArgs.enablePreemption``) says the solver will be needed, and its first
preemption then held the scheduling cycle, every other pod's included, for the whole import: the
suite's preemption scenario took 0.55-0.67 s to run its job cold against 0.36 s warm
(kube-scheduler 0.18-0.19 s). ``warm_in_background`` imports the solvers in a daemon thread
instead, once per process; a cycle that needs them before the import ends waits on Python's
import lock for the rest of it only.
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading

__all__ = ["SOLVER_MODULES", "warm_in_background"]

log = logging.getLogger(__name__)

SOLVER_MODULES = ("scheduler.solver.victim_cpsat", "scheduler.solver.gang_placement")
"""The modules that import OR-Tools, in the order the warm-up imports them."""


def _import_solvers() -> None:
    for name in SOLVER_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # the first call imports it again and reports what fails
            log.warning("importing %s ahead of its first use failed", name, exc_info=True)
            return


@functools.cache
def warm_in_background() -> threading.Thread:
    """Start importing the CP-SAT solvers in a daemon thread, once per process (a second thread
    racing the first would only wait on the import lock)."""
    thread = threading.Thread(target=_import_solvers, name="cp-sat warm-up", daemon=True)
    thread.start()
    return thread
