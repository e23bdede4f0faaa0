"""The benchmark suite: every bench at a size that fits a 2-core machine, or issue 20's with --full.

    python -m e2e.bench.suite [--full] [--only throughput,latency,...] [--nodes 200,1000] [--pods 2000]
                              [--identical-nodes 200 --identical-pods 2000]
                              [--startup-nodes 200 --startup-pending 2000 --startup-bound 2000]
                              [--out DIR] [--cluster-prefix bench-suite]

Benches (``--only``, in this order): ``throughput`` (koord-scheduler against kube-scheduler on the
same KWOK cluster, ``scheduler_throughput``), ``identical`` (the same on the identical-pods
workload, every pod a replica of one Deployment, with ``koordctl simulate``'s rate in process
beside kube-scheduler's too; issue 32), ``perf-harness`` (the same at Koordinator's
perf-harness shape: 100 nodes, 1,000 pods, client capped at 100 QPS), ``rss`` (both schedulers'
peak RSS in a throughput run), ``latency`` (create -> bound p50/p99 under a steady arrival rate,
``startup_latency``), ``startup`` (process start to ready and peak RSS with a backlog of pending
and bound pods, ``startup_time``), ``gang`` (CP-SAT gang placement against the greedy planner,
``gang_placement``), ``victims`` (CP-SAT victim selection against the greedy one,
``victim_selection``), ``preemption`` (job-level preemption against kube-scheduler's, on a cluster,
``preemption``), and with ``--full`` only ``openb`` (the FGD paper's GPU-sharing trace replayed per
DeviceShare strategy, its GPU allocation beside the paper's, ``openb_replay``; about half an hour).

Writes ``DIR/results.json`` (every figure beside its baseline, ``SuiteResults``) and one
``DIR/<bench>.png`` per bench (``openb`` adds ``DIR/openb/`` with its curves), and prints a table
with each figure beside its baseline from the same run. Progress goes to stderr. Figures are
printed, never asserted; the exit code is 0 unless a bench failed to run (1; its error is in the
results and under the table).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import shlex
import sys
import time
from pathlib import Path

from e2e.bench.harness import BenchError, log_progress
from e2e.bench.suite_model import BENCHES, Figure, Machine, SuiteOptions, SuiteResults, default_options
from e2e.bench.suite_plots import write_plots
from e2e.bench.suite_runs import RUNS

__all__ = ["main", "parse_args", "render", "run_suite"]


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown bench {', '.join(unknown)}; known: {', '.join(BENCHES)}")
    return names


def parse_args(argv: list[str] | None) -> SuiteOptions:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.suite", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--full", action="store_true", help="issue 20's sizes (hours on a 2-core machine)")
    parser.add_argument("--only", type=_names, help=f"comma-separated benches of: {','.join(BENCHES)}")
    parser.add_argument("--out", type=Path, help="directory for results.json and the PNGs")
    parser.add_argument("--cluster-prefix", help="clusters are <prefix>-<bench> (default bench-suite)")
    parser.add_argument("--nodes", type=_ints, help="throughput: cluster sizes, comma-separated")
    parser.add_argument("--pods", type=int, help="throughput: pods per scheduler")
    parser.add_argument("--identical-nodes", type=int)
    parser.add_argument("--identical-pods", type=int, help="identical: pods per scheduler")
    parser.add_argument("--rss-nodes", type=int)
    parser.add_argument("--rss-pods", type=int)
    parser.add_argument("--latency-nodes", type=int)
    parser.add_argument("--latency-pods", type=int, help="latency: pods per scheduler")
    parser.add_argument("--rate", type=float, help="latency: pods created per second")
    parser.add_argument("--startup-nodes", type=int)
    parser.add_argument("--startup-pending", type=int, help="startup: pending pods of the scheduler")
    parser.add_argument("--startup-bound", type=int, help="startup: pods already on the nodes")
    parser.add_argument("--gang-nodes", type=_ints)
    parser.add_argument("--gang-sizes", type=_ints)
    parser.add_argument("--trials", type=int, help="gang and victims: problems drawn per size")
    parser.add_argument("--victim-sizes", help="victims: NODESxMEMBERS, comma-separated")
    parser.add_argument("--solver-seconds", type=float, help="time limit of each CP-SAT solve")
    parser.add_argument("--preemption-nodes", type=int)
    parser.add_argument("--preemption-repeat", type=int, help="preemption: runs per scenario and scheduler")
    parser.add_argument("--openb-seed", type=int, help="openb: the shuffle and inflation seed")
    parser.add_argument("--openb-limit", type=int, help="openb: replay only the first N pods")
    parser.add_argument("--openb-nodes", type=int, help="openb: replay on N of the trace's nodes")
    args = parser.parse_args(argv)
    values = default_options(args.full)
    flags = {
        "only": args.only,
        "out": args.out,
        "cluster_prefix": args.cluster_prefix,
        "throughput_nodes": args.nodes,
        "throughput_pods": args.pods,
        "identical_nodes": args.identical_nodes,
        "identical_pods": args.identical_pods,
        "rss_nodes": args.rss_nodes,
        "rss_pods": args.rss_pods,
        "latency_nodes": args.latency_nodes,
        "latency_pods": args.latency_pods,
        "latency_rate": args.rate,
        "startup_nodes": args.startup_nodes,
        "startup_pending": args.startup_pending,
        "startup_bound": args.startup_bound,
        "gang_nodes": args.gang_nodes,
        "gang_sizes": args.gang_sizes,
        "gang_trials": args.trials,
        "victim_trials": args.trials,
        "victim_sizes": None if args.victim_sizes is None else tuple(args.victim_sizes.split(",")),
        "solver_seconds": args.solver_seconds,
        "preemption_nodes": args.preemption_nodes,
        "preemption_repeat": args.preemption_repeat,
        "openb_seed": args.openb_seed,
        "openb_limit": args.openb_limit,
        "openb_nodes": args.openb_nodes,
    }
    values.update({k: v for k, v in flags.items() if v is not None})
    return SuiteOptions.model_validate(values)


async def run_suite(opts: SuiteOptions, command: str = "") -> SuiteResults:
    """Every bench of ``opts.only`` in order; a bench that fails leaves its error and the rest run."""
    one, five, fifteen = os.getloadavg()
    results = SuiteResults(
        command=command,
        started_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        machine=Machine(
            cpus=os.cpu_count() or 0, load_average=(one, five, fifteen), platform=platform.platform()
        ),
        options=opts,
    )
    began = time.monotonic()
    benches = [b for b in BENCHES if b in opts.only]
    for i, bench in enumerate(benches, 1):
        log_progress(f"suite {i}/{len(benches)}: {bench} ({time.monotonic() - began:.0f}s into the suite)")
        started = time.monotonic()
        try:
            await RUNS[bench](opts, results)
        except (Exception, asyncio.CancelledError) as exc:
            results.errors.append(f"{bench}: {type(exc).__name__}: {exc}")
            log_progress(f"suite: {bench} failed: {type(exc).__name__}: {exc}")
        results.bench_seconds[bench] = round(time.monotonic() - started, 1)
        log_progress(f"suite {i}/{len(benches)}: {bench} done in {results.bench_seconds[bench]:.0f}s")
    results.seconds = round(time.monotonic() - began, 1)
    return results


def write_results(results: SuiteResults, out: Path) -> None:
    """The PNGs, then ``results.json`` (which lists them, with any a bench wrote itself)."""
    out.mkdir(parents=True, exist_ok=True)
    results.plots = [*results.plots, *(p.name for p in write_plots(results, out))]
    (out / "results.json").write_text(results.model_dump_json(indent=2) + "\n")


def _value(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _ratio(figure: Figure) -> str:
    ratio = figure.ratio
    return "-" if ratio is None else f"{ratio:.2f}"


def render(results: SuiteResults) -> str:
    header = ("BENCH", "SIZE", "METRIC", "UNIT", "OURS", "BASELINE", "RATIO", "BETTER")
    rows = [
        (
            f.bench,
            f.size,
            f.metric,
            f.unit,
            f"{_value(f.ours)} ({f.ours_label})",
            f"{_value(f.baseline)} ({f.baseline_label})" if f.baseline is not None else "-",
            _ratio(f),
            f.better,
        )
        for f in results.figures
    ]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    m = results.machine
    lines.append(
        f"\n{m.cpus} CPUs, load average {m.load_average[0]:.1f} at the start; {results.seconds:.0f}s in all "
        f"({', '.join(f'{b} {s:.0f}s' for b, s in results.bench_seconds.items())})"
    )
    lines.extend(f"ERROR: {e}" for e in results.errors)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    opts = parse_args(args)
    command = shlex.join(["python", "-m", "e2e.bench.suite", *args])
    try:
        results = asyncio.run(run_suite(opts, command))
    except BenchError as exc:
        print(f"[bench] {exc}", file=sys.stderr)
        return 2
    write_results(results, opts.out)
    print(render(results), flush=True)
    log_progress(f"suite: {opts.out / 'results.json'} and {len(results.plots)} PNGs under {opts.out}/")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
