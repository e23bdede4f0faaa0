"""Gang interference: plain-pod bindings per second while large topology gangs are being placed.

    python -m e2e.bench.gang_interference [--nodes 1000] [--pods 2000] [--rate 250] [--gangs 2]
                                          [--gang-size 256] [--solver-time-limit 1.0] [--seed 0]
                                          [-o table|json]

Method
------

1. **Cluster** (``gang_interference_cluster``): koord-scheduler runs in this process on the in-memory
   backend, as ``koordctl simulate`` runs it, with ``CoschedulingArgs.awareNetworkTopology: true``
   and ``solverTimeLimitSeconds`` from ``--solver-time-limit``. ``--nodes`` nodes of 8 GPUs and 128
   cores under two spines (blocks per spine grow with the cluster: 6 at 1,000 nodes, 32 at 5,000),
   fragmented as ``gang_placement.py`` draws it from ``--seed``: filler pods bound to each node take
   what is not free (0..8 GPUs free per node). ClusterNetworkTopology ``default``: spine -> block.
2. **Run "plain only"** (``gang_interference_run``): ``--pods`` plain pods (the throughput
   benchmark's: cpu 250m..2, memory 256Mi..2Gi, priority 0) arrive as a stream of ``--rate`` pods
   per second, below what the scheduler can do, so that it keeps up and its queue drains between
   arrivals; the clock starts with the first one.
3. **Run "plain + gangs"**: a fresh scheduler on the same cluster, the same stream, and gang ``k`` of
   ``--gangs`` (a PodGroup with minMember ``--gang-size``, PreferGather on BlockLayer, members of 2
   GPUs / 16 cores / 32Gi at priority 1000, ranked) submitted right after plain pod
   ``(k + 1) * pods / (gangs + 1)``. The members outrank the plain pods, so a gang is placed as soon
   as it is complete, in the middle of the stream.

Figures per run: plain pods and gang members bound; plain pods/s from the first plain pod to the
last plain binding (close to ``--rate`` when the scheduler keeps up); **plain pods/s while gangs
are placed**: plain bindings per second inside the windows from each gang's submission to its last
member bound (for "plain only", the same windows of time, as the baseline); and the longest time
without a plain binding, the stall a gang placement causes (CP-SAT runs up to its time limit per
gang; inside the scheduling cycle nothing else is scheduled or bound meanwhile, and the members'
own cycles come next). Then the ratio of the two "while gangs are placed" rates, each gang's time
to its last member bound, and every solver call (status, seconds) as the scheduler reports it to
``koord_scheduler_solver_duration_seconds``.

The same seeds make both runs place the same pods on the same cluster; the figures are printed,
never asserted. The exit code is 0 unless a run left pods unbound or failed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from e2e.bench import gang_interference_cluster as workload
from e2e.bench.gang_interference_run import RunFigures, run_once
from e2e.bench.harness import phase

__all__ = ["Options", "Report", "main", "render", "run_benchmark"]

PLAIN_ONLY = "plain only"


def _progress(message: str) -> None:
    print(f"[bench-gangs] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Options:
    nodes: int = 1000
    pods: int = 2000
    """Plain pods per run."""
    rate: float = 250.0
    """Plain pods submitted per second (keep it below what the scheduler does on the machine)."""
    gangs: int = 2
    gang_size: int = 256
    solver_time_limit: float = 1.0
    """CoschedulingArgs.solverTimeLimitSeconds (Koordinator-py's default: 1 s)."""
    seed: int = 0
    stall_timeout: float = 60.0
    """Seconds without a binding after which a run is given up (its pods left unbound)."""


@dataclass
class Report:
    options: Options
    spines: int = 0
    blocks: int = 0
    free_gpus: int = 0
    runs: list[RunFigures] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def windows(self) -> list[tuple[float, float]]:
        """When the gangs of the second run were being placed (seconds after its stream began)."""
        return self.runs[1].gang_windows() if len(self.runs) == 2 else []

    def plain_rate_during_gangs(self, figures: RunFigures) -> float | None:
        return figures.plain_rate_within(self.windows())

    @property
    def ratio(self) -> float | None:
        """Plain pods/s while the gangs were placed over plain pods/s in the same windows alone."""
        if len(self.runs) != 2 or not all(r.complete for r in self.runs):
            return None
        alone, mixed = (self.plain_rate_during_gangs(r) for r in self.runs)
        return None if alone is None or mixed is None or alone == 0 else round(mixed / alone, 3)

    def to_json(self) -> dict[str, Any]:
        return {
            "options": asdict(self.options),
            "cluster": {"spines": self.spines, "blocks": self.blocks, "freeGpus": self.free_gpus},
            "runs": [
                {**r.to_json(), "plain_pods_per_second_during_gangs": self.plain_rate_during_gangs(r)}
                for r in self.runs
            ],
            "gangWindows": self.windows(),
            "ratio": self.ratio,
            "phases": self.phases,
            "errors": self.errors,
        }


async def run_benchmark(opts: Options) -> Report:
    """Both runs on the same cluster, "plain only" first; a failed run is recorded in ``errors``."""
    report = Report(options=opts)
    with phase(report.phases, "build cluster", _progress):
        cluster = workload.build(opts.nodes, opts.seed)
    report.spines, report.blocks, report.free_gpus = cluster.spines, cluster.blocks, cluster.free_gpus
    mixed = f"plain + {opts.gangs}x{opts.gang_size} gangs"
    for run, gangs in ((PLAIN_ONLY, 0), (mixed, opts.gangs)):
        gc.collect()  # what the previous run left does not slow this one down
        with phase(report.phases, run, _progress):
            began = time.perf_counter()
            try:
                figures = await run_once(
                    run,
                    cluster,
                    plain_pods=opts.pods,
                    rate=opts.rate,
                    gangs=gangs,
                    gang_size=opts.gang_size,
                    solver_time_limit_seconds=opts.solver_time_limit,
                    stall_timeout=opts.stall_timeout,
                )
            except Exception as exc:
                report.errors.append(f"{run}: {type(exc).__name__}: {exc}")
                continue
            report.runs.append(figures)
            _progress(
                f"{run}: {figures.plain_bound}/{figures.plain_pods} plain, "
                f"{figures.gang_members_bound}/{figures.gang_members} gang members bound "
                f"({time.perf_counter() - began:.1f}s with start and stop)"
            )
    report.errors.extend(f"{r.run}: {r.error}" for r in report.runs if r.error)
    report.errors.extend(
        f"{r.run}: {r.plain_pods - r.plain_bound} plain pods and "
        f"{r.gang_members - r.gang_members_bound} gang members left unbound"
        for r in report.runs
        if not r.error and not r.complete
    )
    return report


# ---- output -------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render(report: Report, output: str = "table") -> str:
    if output == "json":
        return json.dumps(report.to_json(), indent=2)
    opts = report.options
    header = [
        "RUN",
        "PLAIN BOUND",
        "GANG MEMBERS BOUND",
        "SECONDS",
        "PLAIN PODS/S",
        "PLAIN PODS/S WHILE GANGS PLACED",
        "LONGEST PLAIN GAP S",
        "GAP AT S",
    ]
    rows = [
        [
            r.run,
            f"{r.plain_bound}/{r.plain_pods}",
            f"{r.gang_members_bound}/{r.gang_members}",
            f"{r.seconds:.2f}",
            f"{r.plain_pods_per_second:.1f}",
            _fmt(report.plain_rate_during_gangs(r)),
            f"{r.longest_plain_gap:.3f}",
            f"{r.longest_plain_gap_at:.2f}",
        ]
        for r in report.runs
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]
    ]
    lines.append("")
    windows = ", ".join(f"{start:.2f}-{end:.2f}s" for start, end in report.windows()) or "-"
    lines.append(
        f"plain pods/s while gangs placed, with gangs / alone: {_fmt(report.ratio, 2)} (windows {windows})"
    )
    for r in report.runs:
        lines.append(f"stream of '{r.run}': {r.rate:g} plain pods/s asked, {r.arrival_rate:g} submitted")
        for g in r.gangs:
            took = "-" if g.seconds_to_bind is None else f"{g.seconds_to_bind:.2f}s"
            lines.append(
                f"{g.name}: submitted after plain pod {g.submitted_after} at {g.submitted_at:.2f}s; "
                f"{g.bound}/{g.members} members bound, the last {took} after submission"
            )
        if r.solver_calls:
            calls = ", ".join(f"{c.solver} {c.status} {c.seconds:.3f}s" for c in r.solver_calls)
            lines.append(
                f"solver calls in '{r.run}' (solverTimeLimitSeconds {opts.solver_time_limit:g}): "
                f"{calls}; fallbacks {r.fallbacks}"
            )
    lines.append(
        f"cluster: {opts.nodes} nodes x 8 GPUs / 128 cores, {report.spines} spines x "
        f"{report.blocks // max(report.spines, 1)} blocks, {report.free_gpus} GPUs free (seed {opts.seed})"
    )
    lines.append("phases: " + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in report.phases.items()))
    lines.extend(f"ERROR: {error}" for error in report.errors)
    return "\n".join(lines)


# ---- command line -------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> tuple[Options, str]:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.gang_interference", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000, help="plain pods per run")
    parser.add_argument("--rate", type=float, default=250.0, help="plain pods submitted per second")
    parser.add_argument("--gangs", type=int, default=2, help="gangs submitted during the second run")
    parser.add_argument("--gang-size", type=int, default=256, help="members (minMember) per gang")
    parser.add_argument(
        "--solver-time-limit", type=float, default=1.0, help="CoschedulingArgs.solverTimeLimitSeconds"
    )
    parser.add_argument("--seed", type=int, default=0, help="the fragmented cluster's seed")
    parser.add_argument(
        "--stall-timeout", type=float, default=60.0, help="give a run up after s without a binding"
    )
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 1 or args.rate <= 0 or args.gangs < 0 or args.gang_size < 1:
        parser.error("--nodes, --pods, --rate and --gang-size must be positive, --gangs at least 0")
    return Options(
        nodes=args.nodes,
        pods=args.pods,
        rate=args.rate,
        gangs=args.gangs,
        gang_size=args.gang_size,
        solver_time_limit=args.solver_time_limit,
        seed=args.seed,
        stall_timeout=args.stall_timeout,
    ), args.output


def main(argv: list[str] | None = None) -> int:
    opts, output = parse_args(argv)
    report = asyncio.run(run_benchmark(opts))
    print(render(report, output), flush=True)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
