"""The affinity benchmark's harness at a tiny size (6 nodes, a dozen pods per shape), so that CI keeps
it working. Only completeness is asserted: every shape ran under both schedulers and every measured
pod was bound; the figures are never checked. Its own cluster, ``bench-affinity-smoke-<pid>``."""

from __future__ import annotations

import asyncio
import json
import os
import shutil

import pytest

from e2e.bench.affinity_shapes import render
from e2e.bench.affinity_shapes_runs import ShapeOptions, run_shapes
from e2e.bench.processes import KOORD, KUBE
from e2e.cluster.controlplane import ControlPlane

# A benchmark harness's smoke, in `make test-full` like the preemption one; the placements it
# compares with kube-scheduler's are checked in the fast tier by test_upstream_parity.py.
pytestmark = pytest.mark.full

NODES = 6


def test_every_shape_runs_under_both_schedulers_and_binds_every_pod() -> None:
    cluster = ControlPlane(name=f"bench-affinity-smoke-{os.getpid()}")
    opts = ShapeOptions(nodes=NODES, cluster_name=cluster.name, stall_timeout=60.0)

    report = asyncio.run(run_shapes(opts))

    assert report.errors == []
    assert [s.shape for s in report.shapes] == list(opts.shapes)
    for shape in report.shapes:
        assert [r.scheduler for r in shape.results] == [KOORD, KUBE]
        for result in shape.results:
            assert (shape.shape, result.scheduler, result.bound) == (
                shape.shape,
                result.scheduler,
                result.pods,
            )
            assert result.peak_rss_mib is not None
            assert result.peak_rss_mib > 0
        assert shape.ratio is not None
    table = render(report)
    assert "ratio koord-scheduler/kube-scheduler pods/s, SchedulingPodAntiAffinity" in table
    assert [s["shape"] for s in json.loads(render(report, "json"))["shapes"]] == list(opts.shapes)
    assert not cluster.is_running()
    shutil.rmtree(cluster.state_dir, ignore_errors=True)
