"""GPU fragmentation: DeviceShare's MostAllocated, LeastAllocated and Fragmentation on one trace.

    python -m e2e.bench.gpu_fragmentation [--nodes 64] [--pods 3000] [--load 1.0] [--seed 0]
                                          [--warmup 0.2] [--strategies ...] [-o table|json]

A replayed mixed trace (``gpu_fragmentation_trace.py``: 1/8, 1/2, 1, 2, 4 and 8 GPUs, Poisson
arrivals, exponential durations, fixed seed) runs on the in-memory scheduler once per strategy,
in one process, DeviceShare the only score plugin (``gpu_fragmentation_run.py``). Printed per
strategy: the mean share of all GPUs that is free but unallocatable for the trace's request mix,
the mean share that is free, the mean number of 8-GPU nodes left entirely idle (sampled after
every arrival past the warm-up), and the pods that found no GPUs. Nothing is asserted; the exit
code is 0 unless a run failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field

from e2e.bench.gpu_fragmentation_run import GPUS_PER_NODE, RunResult, replay
from e2e.bench.gpu_fragmentation_trace import make_trace

__all__ = ["STRATEGIES", "Options", "Report", "main", "render", "run_benchmark"]

STRATEGIES = ("MostAllocated", "LeastAllocated", "Fragmentation")


@dataclass(frozen=True)
class Options:
    nodes: int = 64
    pods: int = 3000
    load: float = 1.0
    """Offered GPU load as a share of the cluster's GPUs."""
    seed: int = 0
    warmup: float = 0.2
    """Share of the arrivals before sampling starts."""
    strategies: tuple[str, ...] = STRATEGIES


@dataclass
class Report:
    options: Options
    runs: list[RunResult] = field(default_factory=list)


async def run_benchmark(opts: Options) -> Report:
    trace = make_trace(opts.pods, opts.nodes * GPUS_PER_NODE, opts.load, opts.seed)
    report = Report(opts)
    for strategy in opts.strategies:
        report.runs.append(await replay(strategy, opts.nodes, trace, int(opts.pods * opts.warmup)))
    return report


def _row(run: RunResult) -> dict[str, float | int | str]:
    return {
        "strategy": run.strategy,
        "unallocatableGPUFraction": round(run.mean_unallocatable, 4),
        "freeGPUFraction": round(run.mean_free, 4),
        "wholeNodesLeft": round(run.mean_whole_nodes, 2),
        "failedPods": run.failed,
        "failedGPUFraction": round(run.failed_gpus / run.demanded_gpus, 4) if run.demanded_gpus else 0.0,
        "arrivals": run.arrivals,
        "seconds": round(run.seconds, 1),
    }


def render(report: Report, output: str = "table") -> str:
    rows = [_row(r) for r in report.runs]
    o = report.options
    if output == "json":
        return json.dumps(
            {"options": o.__dict__ | {"strategies": list(o.strategies)}, "runs": rows}, indent=2
        )
    header = (
        "strategy",
        "unallocatable GPUs",
        "free GPUs",
        "whole 8-GPU nodes",
        "failed pods",
        "failed GPU demand",
        "seconds",
    )
    lines = [
        (
            str(r["strategy"]),
            f"{float(r['unallocatableGPUFraction']) * 100:.2f}%",
            f"{float(r['freeGPUFraction']) * 100:.2f}%",
            f"{float(r['wholeNodesLeft']):.2f}",
            f"{r['failedPods']} / {r['arrivals']}",
            f"{float(r['failedGPUFraction']) * 100:.2f}%",
            f"{float(r['seconds']):.1f}",
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in (header, *lines)) for i in range(len(header))]
    table = [
        "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, *lines)
    ]
    title = (
        f"{o.nodes} nodes x {GPUS_PER_NODE} GPUs, {o.pods} pods, offered load {o.load:.2f}, seed {o.seed}; "
        f"means over the arrivals after the first {o.warmup:.0%}"
    )
    return "\n".join([title, *table])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.gpu_fragmentation", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--nodes", type=int, default=Options.nodes)
    parser.add_argument("--pods", type=int, default=Options.pods)
    parser.add_argument("--load", type=float, default=Options.load)
    parser.add_argument("--seed", type=int, default=Options.seed)
    parser.add_argument("--warmup", type=float, default=Options.warmup)
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 1 or args.load <= 0 or not 0 <= args.warmup < 1:
        print(
            "ERROR: --nodes and --pods must be positive, --load above 0, --warmup in [0, 1)", file=sys.stderr
        )
        return 2
    opts = Options(args.nodes, args.pods, args.load, args.seed, args.warmup, tuple(args.strategies))
    print(render(asyncio.run(run_benchmark(opts)), args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
