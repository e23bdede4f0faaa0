"""The throughput benchmark's harness at a tiny size, so that CI keeps it working.

It runs on its own cluster (``bench-smoke-<pid>``: two test sessions at once do not stop each
other's), next to the e2e session's. Only completeness is
asserted (every pod bound, every row present); the figures are never checked: wall-clock time
depends on the machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil

import pytest

from e2e.bench.scheduler_throughput import KOORD, KUBE, SIMULATE, Options, render, run_benchmark
from e2e.cluster.controlplane import ControlPlane

NODES = 20
PODS = 200


def test_benchmark_harness_binds_every_pod_with_both_schedulers_and_simulate() -> None:
    cluster = ControlPlane(name=f"bench-smoke-{os.getpid()}")
    opts = Options(nodes=NODES, pods=PODS, cluster_name=cluster.name, stall_timeout=60.0)

    report = asyncio.run(run_benchmark(opts))

    assert report.errors == []
    assert [r.scheduler for r in report.results] == [KOORD, KUBE, SIMULATE]
    for result in report.results:
        assert (result.scheduler, result.bound) == (result.scheduler, PODS)
        assert result.nodes == NODES
    assert report.ratio is not None
    table = render(report)
    assert KOORD in table
    assert KUBE in table
    assert "ratio koord-scheduler/kube-scheduler" in table
    decoded = json.loads(render(report, "json"))
    assert [r["scheduler"] for r in decoded["results"]] == [KOORD, KUBE, SIMULATE]
    assert not cluster.is_running()
    shutil.rmtree(cluster.state_dir, ignore_errors=True)


@pytest.mark.full  # `make test` runs the throughput harness once (above); LoadAware is e2e-tested there
def test_load_aware_run_reports_node_metrics_and_binds_every_pod() -> None:
    """``--load-aware``: every node gets a fresh NodeMetric first, and koord-scheduler (its default
    profile runs LoadAwareScheduling) still binds every pod."""
    cluster = ControlPlane(name=f"bench-smoke-la-{os.getpid()}")
    opts = Options(
        nodes=NODES,
        pods=PODS,
        cluster_name=cluster.name,
        stall_timeout=60.0,
        load_aware=True,
        skip_upstream=True,
        skip_simulate=True,
    )

    report = asyncio.run(run_benchmark(opts))

    assert report.errors == []
    assert "node metrics" in report.phases
    assert [(r.scheduler, r.bound) for r in report.results] == [(KOORD, PODS)]
    assert "node metrics: every node reports usage" in render(report)
    shutil.rmtree(cluster.state_dir, ignore_errors=True)
