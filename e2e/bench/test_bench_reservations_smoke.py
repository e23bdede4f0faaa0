"""The throughput benchmark's ``--reservations`` and ``--owner-share`` at a tiny size.

On its own cluster (``bench-res-smoke-<pid>``). Asserts completeness only: every reservation
placed by koord-scheduler before the pods, every pod bound by both schedulers and by simulate,
and owner pods that allocated from a reservation (the restore path ran); never a figure.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil

from e2e.bench.scheduler_throughput import KOORD, KUBE, SIMULATE, Options, render, run_benchmark
from e2e.cluster.controlplane import ControlPlane

NODES = 8
PODS = 80
RESERVATIONS = 6


def test_reservations_are_placed_before_the_pods_and_owner_pods_allocate_from_them() -> None:
    cluster = ControlPlane(name=f"bench-res-smoke-{os.getpid()}")
    opts = Options(
        nodes=NODES,
        pods=PODS,
        cluster_name=cluster.name,
        stall_timeout=60.0,
        reservations=RESERVATIONS,
        owner_share=0.5,
    )

    report = asyncio.run(run_benchmark(opts))

    assert report.errors == []
    assert report.placement is not None
    assert (report.placement.placed, report.placement.per_second > 0) == (RESERVATIONS, True)
    assert [(r.scheduler, r.bound) for r in report.results] == [(KOORD, PODS), (KUBE, PODS), (SIMULATE, PODS)]
    # An owner pod placed on its reservation's node allocates from it (the restore path ran);
    # the other pods own none.
    assert report.owners_allocated is not None
    assert 0 < report.owners_allocated <= PODS // 2
    table = render(report)
    assert f"reservations: {RESERVATIONS}, {RESERVATIONS}/{RESERVATIONS} placed by koord-scheduler" in table
    assert "kube-scheduler ignores Reservations" in table
    for result in report.results[:2]:
        assert result.first_binding_seconds is not None
        assert 0 <= result.first_binding_seconds <= result.seconds
    assert "first binding after the clock started: koord-scheduler" in table
    decoded = json.loads(render(report, "json"))
    assert decoded["placement"]["placed"] == RESERVATIONS
    assert decoded["ownersAllocated"] == report.owners_allocated
    assert not cluster.is_running()
    shutil.rmtree(cluster.state_dir, ignore_errors=True)
