"""The preemption benchmark's harness at its smallest size, so that CI keeps it working.

It runs on its own cluster (``bench-preempt-smoke-<pid>``). Besides completeness (every row
present, nothing failed to run) it asserts only what must hold for koord-scheduler whatever the
timing: in ``cannot-fit`` it evicted nothing, and in ``v1.7`` its job had every member bound.
Wall-clock figures, and everything kube-scheduler does, are never checked.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil

import pytest

from e2e.bench.preemption import KOORD, KUBE, SCENARIOS, Options, render, run_benchmark
from e2e.cluster.controlplane import ControlPlane
from e2e.tier import sized

# The preemption harness runs in `make test-full` (issue 27: the preemption and throughput smokes
# belong to the full tier); job-level, quota and kube-scheduler preemption themselves stay in the
# fast tier (test_job_preemption.py, test_shipped_config.py).
pytestmark = pytest.mark.full

NODES = 4


def test_preemption_harness_reports_every_scenario_and_koord_evicts_only_for_a_job_that_fits() -> None:
    cluster = ControlPlane(name=f"bench-preempt-smoke-{os.getpid()}")
    # cannot-fit waits the whole timeout under both schedulers: 10 s in `make test`, 20 s in full
    opts = Options(nodes=NODES, timeout=sized(10.0, 20.0), settle=2.0, cluster_name=cluster.name)

    report = asyncio.run(run_benchmark(opts))

    assert report.errors == []
    assert [(r.scenario, r.scheduler) for r in report.rows] == [
        (scenario, scheduler) for scenario in SCENARIOS for scheduler in (KOORD, KUBE)
    ]
    cannot_fit = report.row("cannot-fit", KOORD)
    assert cannot_fit is not None
    assert cannot_fit.victims == 0
    assert cannot_fit.bound < cannot_fit.members
    v17 = report.row("v1.7", KOORD)
    assert v17 is not None
    assert (v17.bound, v17.members) == (2, 2)
    table = render(report)
    for scenario in SCENARIOS:
        assert scenario in table
    decoded = json.loads(render(report, "json"))
    assert len(decoded["rows"]) == 2 * len(SCENARIOS)
    assert not cluster.is_running()
    shutil.rmtree(cluster.state_dir, ignore_errors=True)


def test_repeated_runs_alternate_the_schedulers_and_report_each_ones_median() -> None:
    """``--repeat 2`` on one scenario: every run is in the report, koord-scheduler and
    kube-scheduler alternating, and the table gives each scheduler's median run with its spread."""
    cluster = ControlPlane(name=f"bench-preempt-repeat-{os.getpid()}")
    opts = Options(
        nodes=NODES, timeout=20.0, settle=1.0, scenarios=("v1.7",), cluster_name=cluster.name, repeat=2
    )

    report = asyncio.run(run_benchmark(opts))

    assert report.errors == []
    assert [(r.scheduler, r.attempt) for r in report.rows] == [(KOORD, 0), (KUBE, 0), (KOORD, 1), (KUBE, 1)]
    assert all((r.bound, r.members) == (2, 2) for r in report.runs("v1.7", KOORD))
    koord_line = next(line for line in render(report).splitlines() if line.split()[:2] == ["v1.7", KOORD])
    assert koord_line.rstrip().endswith(" of 2)")
    assert not cluster.is_running()
    shutil.rmtree(cluster.state_dir, ignore_errors=True)
