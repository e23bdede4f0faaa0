"""``python -m e2e.stages STAGE [STAGE ...]``: run make targets in order, each timed, then a table.

`make test` and `make test-full` run through it, so every CI log ends with the wall time of each
stage (and ``.cluster/reports/stages.json`` keeps it beside the JUnit XML of the pytest stages).
A stage that fails stops the run, as `make` would, after the table is printed with that stage
marked; the exit status is the failed stage's.

A stage written ``a+b+c`` runs those targets at the same time: ``c`` writes to the log as it goes,
``a`` and ``b`` to ``.cluster/reports/<target>.log``, printed when they end. `make test` runs lint
and the unit tests beside the e2e files, on the CPU that the e2e clusters leave while they wait.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from e2e.cluster.controlplane import repo_root

REPORTS = repo_root() / ".cluster" / "reports"


class StageTime(BaseModel):
    stage: str
    seconds: float
    status: int


class StageReport(BaseModel):
    stages: list[StageTime]
    total_seconds: float


def _run_together(targets: list[str], make: str) -> int:
    """The last target writes to this log as it goes (its progress shows); the others write to
    ``.cluster/reports/<target>.log``, printed when they end."""
    *logged, live = targets
    procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    for target in logged:
        log = REPORTS / f"{target}.log"
        with log.open("wb") as out:
            cmd = [make, "--no-print-directory", target]
            procs.append((target, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT), log))
    status = subprocess.call([make, "--no-print-directory", live])
    for target, proc, log in procs:
        rc = proc.wait()
        sys.stdout.write(f"\n===== make {target} (exit {rc}) =====\n")
        sys.stdout.write(log.read_text(errors="replace"))
        sys.stdout.flush()
        status = status or rc
    return status


def run(stages: list[str], make: str = "make") -> int:
    REPORTS.mkdir(parents=True, exist_ok=True)
    done: list[StageTime] = []
    began = time.monotonic()
    status = 0
    for stage in stages:
        print(f"\n===== stage {stage} =====", flush=True)
        start = time.monotonic()
        targets = stage.split("+")
        if len(targets) == 1:
            status = subprocess.call([make, "--no-print-directory", stage])
        else:
            status = _run_together(targets, make)
        done.append(StageTime(stage=stage, seconds=round(time.monotonic() - start, 1), status=status))
        if status:
            break
    report = StageReport(stages=done, total_seconds=round(time.monotonic() - began, 1))
    (REPORTS / "stages.json").write_text(report.model_dump_json(indent=2) + "\n")
    print("\n===== stage times =====")
    for row in report.stages:
        mark = "" if row.status == 0 else f"  FAILED (exit {row.status})"
        print(f"  {row.stage:<16} {row.seconds:>8.1f} s{mark}")
    print(f"  {'total':<16} {report.total_seconds:>8.1f} s", flush=True)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.stages", description="run make targets in order, each timed"
    )
    parser.add_argument("stages", nargs="+", help="make targets, in order; a+b runs a and b together")
    args = parser.parse_args(argv)
    return run(args.stages)


if __name__ == "__main__":
    sys.exit(main())
