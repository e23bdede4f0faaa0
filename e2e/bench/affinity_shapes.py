"""Affinity and spreading throughput: kube-scheduler's scheduler_perf shapes, koord-scheduler against
kube-scheduler on the same cluster in the same run, and the schedulers' peak memory.

    python -m e2e.bench.affinity_shapes [--nodes 1000] [--shape NAME ...] [-o table|json]
    python -m e2e.bench.affinity_shapes --memory --nodes 5000      # peak RSS with 50,000 bound pods

Method
------

1. **Cluster.** A dedicated cluster ``bench-affinity`` (``.cluster/bench-affinity/``), started fresh
   with the CRDs, and ``--nodes`` KWOK nodes as scheduler_perf's ``node-default.yaml`` (4 CPU, 32Gi,
   110 pods) in three zones ``moon-1..3``, made schedulable as in ``scheduler_throughput``.
2. **Shapes** (``affinity_shapes_workload.SHAPES``), each run on its own, in this order:
   SchedulingPodAntiAffinity (required anti-affinity on hostname; init pods 0.2 x nodes, measured
   0.4 x nodes), SchedulingPreferredPodAffinity and SchedulingPreferredPodAntiAffinity (weight 1 on
   hostname; 1 x + 1 x), TopologySpreading and PreferredTopologySpreading (zone, maxSkew 5,
   DoNotSchedule / ScheduleAnyway; 1 x default pods + 2 x), SchedulingPodAffinity (required
   affinity on zone with every node relabelled ``zone1``; 1 x + 1 x): scheduler_perf's templates
   and its ratios at 5,000 nodes. Init pods are created bound (``spec.nodeName``) in ``aff-init``;
   the measured pods pending in ``aff-koord`` (``schedulerName: koord-scheduler``) and ``aff-kube``
   (``kube-bench``), their terms naming their own namespace and ``aff-init``.
3. **Runs**: koord-scheduler, then kube-scheduler, each measured by the throughput benchmark's
   harness (``throughput_runs.measure_scheduler``: clock from ``/readyz`` or the first binding to the
   last binding seen by a watch, the scheduler started fresh for the run and stopped after it), then
   every pod of the shape is deleted.
4. **Memory** (``--memory``): the shape AffinityMemory: 10 bound pods per node cycling through
   required affinity, preferred affinity, preferred anti-affinity and required anti-affinity terms
   (50,000 at 5,000 nodes), and 0.02 x nodes measured preferred-anti-affinity pods; ``PEAK RSS`` is
   each scheduler's ``VmHWM`` at the end of its run (caches full, the measured pods scheduled).

Figures are printed, never asserted; exit code 0 unless something failed to run (1), 2 for bad
arguments. Both schedulers evaluate every term and constraint (koord-scheduler's InterPodAffinity
and PodTopologySpread; ``e2e/scenarios/test_upstream_parity.py`` checks its placements).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from e2e.bench.affinity_shapes_runs import ShapeOptions, ShapesReport, run_shapes
from e2e.bench.affinity_shapes_workload import MEMORY, SHAPES
from e2e.bench.harness import BenchError

__all__ = ["main", "render"]


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render(report: ShapesReport, output: str = "table") -> str:
    if output == "json":
        return json.dumps(report.to_json(), indent=2)
    header = ["SHAPE", "SCHEDULER", "NODES", "INIT PODS", "PODS", "BOUND", "SECONDS", "PODS/S"]
    header += ["SUSTAINED PODS/S", "PEAK RSS MIB"]
    rows = [
        [
            shape.shape,
            r.scheduler,
            str(report.nodes),
            str(shape.init_pods),
            str(r.pods),
            str(r.bound),
            _fmt(r.seconds, 2),
            _fmt(r.pods_per_second),
            _fmt(r.sustained_pods_per_second),
            _fmt(r.peak_rss_mib),
        ]
        for shape in report.shapes
        for r in shape.results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]
    ]
    lines.append("")
    for shape in report.shapes:
        lines.append(f"ratio koord-scheduler/kube-scheduler pods/s, {shape.shape}: {_fmt(shape.ratio, 2)}")
    lines.append("phases: " + ", ".join(f"{name} {s:.1f}s" for name, s in report.phases.items()))
    for shape in report.shapes:
        for r in shape.results:
            if r.cpu_percent:
                usage = ", ".join(
                    f"{n} {p:.0f}%" for n, p in sorted(r.cpu_percent.items(), key=lambda x: -x[1])
                )
                lines.append(f"cpu during {shape.shape} {r.scheduler} (% of one core): {usage}")
    lines.extend(f"ERROR: {e}" for e in report.errors)
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> tuple[ShapeOptions, str]:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.affinity_shapes", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument(
        "--shape", action="append", choices=list(SHAPES), help="run only this shape (repeatable)"
    )
    parser.add_argument("--memory", action="store_true", help=f"run only {MEMORY}: peak RSS of both")
    parser.add_argument("--qps", type=float, default=1000.0)
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--parallelism", type=int)
    parser.add_argument("--concurrency", type=int, default=32, help="create requests in flight")
    parser.add_argument("--stall-timeout", type=float, default=120.0)
    parser.add_argument("--cluster-name", default="bench-affinity")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args(argv)
    if args.nodes < 3:
        parser.error("--nodes must be at least 3 (one per zone)")
    shapes = (MEMORY,) if args.memory else tuple(args.shape or ShapeOptions().shapes)
    return ShapeOptions(
        nodes=args.nodes,
        shapes=shapes,
        qps=args.qps,
        burst=args.burst,
        parallelism=args.parallelism,
        cluster_name=args.cluster_name,
        concurrency=args.concurrency,
        stall_timeout=args.stall_timeout,
        keep=args.keep,
    ), args.output


def main(argv: list[str] | None = None) -> int:
    opts, output = parse_args(argv)
    try:
        report = asyncio.run(run_shapes(opts))
    except BenchError as exc:
        print(f"[bench] {exc}", file=sys.stderr)
        return 2
    print(render(report, output), flush=True)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
