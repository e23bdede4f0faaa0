"""The benchmark suite at tiny sizes, so that CI keeps it working (about 45 s).

The solver benches run in process; throughput (and the RSS taken from its run), the identical-pods
throughput, the startup latency bench and the start-up bench run on their own clusters
(``bench-suite-smoke-<pid>-*``). Only that the files and every figure exist and are finite, and
that every identical pod was bound by both schedulers and by simulate, is asserted; timings are
never checked. The preemption and perf-harness benches are left out: their harnesses have smoke
tests of their own (``test_bench_preemption_smoke.py``, ``test_bench_smoke.py``). `make test` runs
the identical, latency, gang and victims benches; `make test-full` adds throughput, RSS and
start-up (``BENCHES``).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
from pathlib import Path

from e2e.bench.suite import parse_args, render, run_suite, write_results
from e2e.bench.suite_model import SuiteOptions, SuiteResults
from e2e.bench.throughput_model import SIMULATE, SIMULATE_ALONE
from e2e.cluster.controlplane import ControlPlane
from e2e.tier import sized

# `make test` runs the throughput harness once (test_bench_smoke.py); the suite's throughput and
# RSS benches, two more runs of it on clusters of their own, are in `make test-full`.
# The start-up bench (a cluster of its own, both schedulers started on a backlog: about 50 s here)
# is in `make test-full` too. The identical-pods workload has no other smoke: `make test` runs it
# here (a cluster of its own, about 15 s).
BENCHES = sized(
    ("identical", "latency", "gang", "victims"),
    ("throughput", "identical", "rss", "latency", "startup", "gang", "victims"),
)
IDENTICAL_PODS = 40


def test_suite_writes_results_and_a_plot_per_bench_with_every_figure_beside_a_finite_baseline(
    tmp_path: Path,
) -> None:
    prefix = f"bench-suite-smoke-{os.getpid()}"
    opts = SuiteOptions(
        only=BENCHES,
        out=tmp_path,
        cluster_prefix=prefix,
        throughput_nodes=(8,),
        throughput_pods=40,
        identical_nodes=8,
        identical_pods=IDENTICAL_PODS,
        rss_nodes=8,
        rss_pods=40,
        latency_nodes=8,
        latency_pods=30,
        latency_rate=30.0,
        startup_nodes=8,
        startup_pending=30,
        startup_bound=10,
        gang_nodes=(60,),
        gang_sizes=(4,),
        gang_trials=2,
        solver_seconds=0.5,
        victim_sizes=("20x4",),
        victim_trials=2,
    )
    try:
        results = asyncio.run(run_suite(opts, "smoke"))
        write_results(results, tmp_path)
    finally:
        for bench in ("throughput", "identical", "latency", "startup"):
            shutil.rmtree(ControlPlane(name=f"{prefix}-{bench}").state_dir, ignore_errors=True)

    assert results.errors == []
    assert {f.bench for f in results.figures} == set(BENCHES)
    for figure in results.figures:
        assert figure.ours is not None, figure
        assert math.isfinite(figure.ours), figure
        if figure.metric != "proven optimal":  # the greedy planner proves nothing
            assert figure.baseline is not None, figure
            assert math.isfinite(figure.baseline), figure
    bound = {r["scheduler"]: r["bound"] for r in results.details["identical"]["results"]}
    assert bound == {
        "koord-scheduler": IDENTICAL_PODS,
        "kube-scheduler": IDENTICAL_PODS,
        SIMULATE: IDENTICAL_PODS,
        SIMULATE_ALONE: IDENTICAL_PODS,
    }
    assert results.details["identical"]["workload"] == "identical"
    assert set(results.latency_ms) == {"koord-scheduler", "kube-scheduler"}
    assert all(len(v) == 30 for v in results.latency_ms.values())
    for bench in BENCHES:
        png = tmp_path / f"{bench}.png"
        assert png.read_bytes().startswith(b"\x89PNG"), bench
    decoded = SuiteResults.model_validate(json.loads((tmp_path / "results.json").read_text()))
    assert decoded.figures == results.figures
    assert sorted(decoded.plots) == sorted(f"{b}.png" for b in BENCHES)
    table = render(results)
    assert "startup latency p99" in table
    assert ("time to ready" in table) == ("startup" in BENCHES)
    assert "kube-scheduler" in table
    assert "greedy" in table


def test_full_flag_selects_the_issue_sizes_and_per_bench_flags_override_them() -> None:
    small, full = parse_args([]), parse_args(["--full"])
    assert full.throughput_nodes == (1000, 5000)
    assert (full.identical_nodes, full.identical_pods) == (1000, 20000)  # issue 32's size
    assert "identical" in small.only
    assert (small.identical_nodes, small.identical_pods) == (small.throughput_nodes[0], small.throughput_pods)
    assert (full.rss_nodes, full.rss_pods) == (5000, 50000)
    assert "5000x256" in full.victim_sizes
    assert small.throughput_nodes != full.throughput_nodes
    assert "openb" in full.only  # the OpenB replay is long: --full (or --only) runs it
    assert "openb" not in small.only
    assert (small.perf_nodes, small.perf_pods, small.perf_qps) == (100, 1000, 100.0)

    opts = parse_args(["--full", "--only", "latency,gang", "--nodes", "300,600", "--rate", "5", "--out", "x"])

    assert opts.only == ("latency", "gang")
    assert opts.throughput_nodes == (300, 600)
    assert opts.latency_rate == 5.0
    assert opts.out == Path("x")
    assert opts.gang_nodes == (1000, 5000)
