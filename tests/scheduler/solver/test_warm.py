"""A configuration that turns job-level preemption on has the CP-SAT solvers imported in the
background (``scheduler.solver.warm``); one that does not keeps OR-Tools out of the process.

Each case runs in a fresh interpreter (this one has imported OR-Tools long ago), on the
configuration ``make up`` runs (job-level preemption on) and on the chart's default (off)."""

from __future__ import annotations

import subprocess
import sys

from e2e.components import LOCAL_SCHEDULER_CONFIG
from scheduler.config import DEFAULT_CONFIG_YAML

_SCRIPT = """
import sys, time
from scheduler.backend.memory import MemoryBackend
from scheduler.simulator.run import memory_app

memory_app(sys.stdin.read(), MemoryBackend())
loaded_at_start = "ortools.sat.python.cp_model" in sys.modules
deadline = time.monotonic() + float(sys.argv[1])
while "ortools.sat.python.cp_model" not in sys.modules and time.monotonic() < deadline:
    time.sleep(0.02)
print(loaded_at_start, "ortools.sat.python.cp_model" in sys.modules)
"""


def _run(config: str, wait_seconds: float) -> tuple[bool, bool]:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(wait_seconds)],
        input=config,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    at_start, later = done.stdout.split()
    return at_start == "True", later == "True"


def test_job_level_preemption_has_the_solver_imported_in_the_background() -> None:
    assert "enablePreemption: true" in LOCAL_SCHEDULER_CONFIG
    _, later = _run(LOCAL_SCHEDULER_CONFIG, wait_seconds=30)
    assert later  # imported without any cycle asking for it


def test_without_job_level_preemption_or_tools_is_never_imported() -> None:
    at_start, later = _run(DEFAULT_CONFIG_YAML, wait_seconds=2)
    assert not at_start
    assert not later
