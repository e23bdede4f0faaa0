"""OpenB replay: the FGD paper's GPU-sharing experiment on koord-scheduler, strategy by strategy.

    python -m e2e.bench.openb_replay [--strategies Fragmentation MostAllocated LeastAllocated]
                                     [--seed 42] [--limit N] [--nodes N] [--profile default]
                                     [--workload default] [--data DIR] [--out DIR]

The Alibaba openb trace (cluster-trace-gpu-v2023: 1,213 GPU nodes, 8,152 tasks; ``--data``) is
replayed as the paper's artifact does (``openb_trace.py``): the tasks sorted by name, shuffled with
the seed and inflated by tasks drawn with replacement until their GPU request reaches 130% of the
cluster's GPUs, submitted one at a time to the real scheduler in process, never deleted, a pod
that fits nowhere failed and not retried (``openb_run.py``). ``--limit N`` replays only the first N
pods; ``--nodes N`` takes N nodes spread over the list (and inflates to 130% of theirs). The
scheduler runs koord-scheduler's default profile; ``--profile deviceshare-only`` leaves DeviceShare
the only score plugin. ``--workload gpushare40`` (``multigpu50``, ``cpu250``, ``gpuspec33``, ...)
replays ``openb_pod_list_<workload>.csv`` of ``--data``, one of the paper's variants of the trace,
beside the paper's figures for it when ``--data`` holds them (``openb_paper.paper_file``).

Printed per DeviceShare ``scoringStrategy.type``: the GPU allocation ratio (allocated GPU milli over
the cluster's) once 100% and 130% of the GPU capacity has arrived, the failed GPU and CPU-only
pods, the replay's pods/s; then the paper's means over its ten seeds. ``DIR/openb.json`` holds the
figures and every curve, ``DIR/openb.png`` the curves. Every run is audited for over-allocated
GPUs, CPU and memory: the exit code is 1 if one was found (the error says where), 2 when the input
cannot be read, 0 otherwise. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from e2e.bench.harness import log_progress
from e2e.bench.openb_audit import OverAllocationError
from e2e.bench.openb_ceiling import SharingCeiling, sharing_ceiling
from e2e.bench.openb_cluster import cluster_description
from e2e.bench.openb_paper import PaperPolicy, load_paper, paper_file
from e2e.bench.openb_plot import write_plot
from e2e.bench.openb_run import PROFILES, STRATEGIES, Profile, StrategyRun, replay
from e2e.bench.openb_trace import (
    NODE_FILE,
    Submission,
    gpu_capacity_milli,
    load_nodes,
    load_tasks,
    pod_file,
    sample_nodes,
    submission_order,
)

__all__ = ["MARKS", "OpenBOptions", "OpenBReport", "default_data_dir", "main", "render", "run_benchmark"]

MARKS = (100, 130)
"""Arrived % of GPU capacity at which the allocation is reported."""
TARGET_PERCENT = 130.0
_DATA_ENV = "KOORD_OPENB_DATA"
_DATA_DIRS = (Path(__file__).resolve().parents[2] / "shared/data/openb", Path("/work/shared/data/openb"))


def default_data_dir() -> Path:
    """``$KOORD_OPENB_DATA``, else ``shared/data/openb`` of the checkout, else the shared copy."""
    if os.environ.get(_DATA_ENV):
        return Path(os.environ[_DATA_ENV])
    return next((d for d in _DATA_DIRS if d.is_dir()), _DATA_DIRS[-1])


class OpenBOptions(BaseModel, frozen=True):
    data: Path = Field(default_factory=default_data_dir)
    strategies: tuple[str, ...] = STRATEGIES
    seed: int = 42
    """The paper's seeds are 42..51."""
    limit: int | None = Field(default=None, gt=0)
    """Replay only the first N pods of the submission order."""
    nodes: int | None = Field(default=None, gt=0)
    """Replay on N nodes spread over the node list instead of all of them."""
    profile: Profile = "default"
    """``deviceshare-only``: DeviceShare the only score plugin; ``gpu-cluster``: NodeResourcesFit
    packs cpu and memory (``MostAllocated``)."""
    workload: str = Field(default="default", pattern=r"^[a-z0-9]+$")
    """The pod list ``openb_pod_list_<workload>.csv`` (``openb_trace.WORKLOADS``)."""
    out: Path = Path("bench-results/openb")


class StrategyFigures(BaseModel):
    strategy: str
    allocation_at: dict[int, float | None]
    """Arrived % -> allocated % (None: the replay did not get that far)."""
    arrived_percent: float
    allocated_percent: float
    """At the end of the replay."""
    failed_gpu_pods: int
    failed_cpu_pods: int
    gpu_pods: int
    cpu_pods: int
    pods_per_second: float
    seconds: float
    cpu_ms_per_pod: float = 0.0
    audited_pods: int
    ceiling: SharingCeiling | None = None
    """The most any placement of the GPU-sharing pods this run placed could allocate
    (``openb_ceiling``)."""


class OpenBReport(BaseModel):
    options: OpenBOptions
    started_at: str
    nodes: int
    gpus: int
    tasks: int
    """Tasks in the trace."""
    submissions: int
    """Pods in the submission order (before ``--limit``)."""
    figures: list[StrategyFigures] = Field(default_factory=list)
    paper: list[PaperPolicy] = Field(default_factory=list)
    runs: list[StrategyRun] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _ceiling(run: StrategyRun, order: Sequence[Submission]) -> SharingCeiling | None:
    failed = {f.pod for f in run.failures}
    shares = [s.task.gpu_milli for s in order[: run.pods] if s.task.shares_a_gpu and s.pod_name not in failed]
    return sharing_ceiling(shares, run.capacity_milli)


def _figures(run: StrategyRun, order: Sequence[Submission]) -> StrategyFigures:
    return StrategyFigures(
        strategy=run.strategy,
        allocation_at={m: _rounded(run.allocation_at(m)) for m in MARKS},
        arrived_percent=round(run.arrived_percent, 3),
        allocated_percent=round(run.allocated_percent, 3),
        failed_gpu_pods=run.failed_gpu_pods,
        failed_cpu_pods=run.failed_cpu_pods,
        gpu_pods=run.gpu_pods,
        cpu_pods=run.cpu_pods,
        pods_per_second=round(run.pods_per_second, 2),
        seconds=round(run.seconds, 1),
        cpu_ms_per_pod=round(run.cpu_ms_per_pod, 2),
        audited_pods=run.audit.pods if run.audit else 0,
        ceiling=_ceiling(run, order),
    )


async def run_benchmark(
    opts: OpenBOptions, progress: Callable[[str], None] | None = log_progress
) -> OpenBReport:
    """Every strategy of ``opts`` replayed on the same submission order; OverAllocationError from
    the first run whose audit fails."""
    nodes = load_nodes(opts.data / NODE_FILE)
    tasks = load_tasks(opts.data / pod_file(opts.workload))
    if opts.nodes is not None:
        nodes = sample_nodes(nodes, opts.nodes)
    capacity = gpu_capacity_milli(nodes)
    order = submission_order(tasks, opts.seed, capacity, TARGET_PERCENT / 100)
    cluster = cluster_description(nodes)
    paper = paper_file(opts.data, opts.workload)
    report = OpenBReport(
        options=opts,
        started_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        nodes=len(nodes),
        gpus=capacity // 1000,
        tasks=len(tasks),
        submissions=len(order),
        paper=load_paper(paper, opts.workload) if paper is not None else [],
    )
    for strategy in opts.strategies:
        if progress is not None:
            pods = min(len(order), opts.limit or len(order))
            progress(f"openb {strategy}: replaying {pods} pods on {len(nodes)} nodes")
        run = await replay(
            strategy,
            cluster,
            capacity,
            order,
            target_percent=TARGET_PERCENT,
            profile=opts.profile,
            limit=opts.limit,
            progress=progress,
        )
        report.runs.append(run)
        report.figures.append(_figures(run, order))
    return report


def write_outputs(report: OpenBReport, out: Path) -> list[Path]:
    """``openb.png`` and ``openb.json`` (which lists both) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    o = report.options
    title = f"openb replay, {report.nodes} nodes, seed {o.seed}"
    if o.workload != "default":
        title += f", workload {o.workload}"
    if o.limit:
        title += f", first {o.limit} pods"
    if o.profile != "default":
        title += f", {o.profile} profile"
    png = write_plot(out / "openb.png", report.runs, report.paper, f"{title} ({report.started_at})")
    path = out / "openb.json"
    report.files = [png.name, path.name]
    path.write_text(report.model_dump_json(indent=2) + "\n")
    return [png, path]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}%"


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def render(report: OpenBReport) -> str:
    o = report.options
    title = (
        f"openb replay: {report.nodes} nodes, {report.gpus} GPUs, {report.tasks} tasks -> "
        f"{report.submissions} pods (GPU request inflated to {TARGET_PERCENT:.0f}% of capacity), "
        f"seed {o.seed}"
    )
    if o.workload != "default":
        title += f", workload {o.workload}"
    if o.limit:
        title += f", first {o.limit} pods replayed"
    if o.profile == "deviceshare-only":
        title += ", DeviceShare the only score plugin"
    elif o.profile == "gpu-cluster":
        title += ", NodeResourcesFit packing cpu and memory (MostAllocated)"
    lines = [title]
    header = ("strategy", *(f"alloc@{m}%" for m in MARKS), "ceiling", "end: arrived / alloc")
    header += ("failed GPU pods",)
    header += ("failed CPU-only pods", "pods", "seconds", "pods/s", "CPU ms/pod")
    rows = [header]
    for f in report.figures:
        rows.append(
            (
                f.strategy,
                *(_pct(f.allocation_at.get(m)) for m in MARKS),
                _pct(f.ceiling.max_allocated_percent if f.ceiling else None),
                f"{f.arrived_percent:.1f}% / {f.allocated_percent:.2f}%",
                f"{f.failed_gpu_pods} / {f.gpu_pods}",
                f"{f.failed_cpu_pods} / {f.cpu_pods}",
                str(f.gpu_pods + f.cpu_pods),
                f"{f.seconds:.1f}",
                f"{f.pods_per_second:.1f}",
                f"{f.cpu_ms_per_pod:.1f}",
            )
        )
    lines += _table(rows)
    lines.append(
        "ceiling: the most any placement of the GPU-sharing pods the run placed could allocate (the "
        "fewest cards that hold them, CP-SAT; what those cards keep free is never allocated)"
    )
    lines.append("")
    if report.paper:
        lines.append(f"paper (FGD, ATC'23; workload {o.workload}, mean over its seeds, all 1,213 nodes):")
        paper_rows = [("policy", *(f"alloc@{m}%" for m in MARKS), "seeds")]
        for p in reversed(report.paper):
            paper_rows.append((p.name, *(_pct(p.at(m)) for m in MARKS), str(p.seeds)))
        lines += _table(paper_rows)
    else:
        lines.append(f"paper: no figures for workload {o.workload} in {o.data}")
    if report.nodes != 1213:
        lines.append(f"(ours ran on {report.nodes} nodes: the paper's figures are for the whole cluster)")
    audited = ", ".join(f"{f.strategy} {f.audited_pods} pods" for f in report.figures)
    lines.append(f"audit: nothing over-allocated (GPU core and memory, cpu, memory; {audited})")
    return "\n".join(lines)


def _parse(argv: list[str] | None) -> OpenBOptions:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.openb_replay", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--limit", type=int, help="replay only the first N pods")
    parser.add_argument("--nodes", type=int, help="N nodes spread over the node list, not all")
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default="default",
        help="deviceshare-only: no other score plugin; gpu-cluster: NodeResourcesFit MostAllocated",
    )
    parser.add_argument(
        "--workload", default="default", help="openb_pod_list_WORKLOAD.csv (gpushare40, multigpu50, ...)"
    )
    parser.add_argument("--data", type=Path, default=None, help="the CSVs' directory")
    parser.add_argument("--out", type=Path, default=OpenBOptions().out)
    args = parser.parse_args(argv)
    values = {
        "strategies": tuple(args.strategies),
        "seed": args.seed,
        "limit": args.limit,
        "nodes": args.nodes,
        "profile": args.profile,
        "workload": args.workload,
        "out": args.out,
    }
    if args.data is not None:
        values["data"] = args.data
    return OpenBOptions.model_validate(values)


def main(argv: list[str] | None = None) -> int:
    try:
        opts = _parse(argv)
        report = asyncio.run(run_benchmark(opts))
    except OverAllocationError as exc:
        print(f"ERROR: OVER-ALLOCATION: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    paths = write_outputs(report, opts.out)
    print(render(report), flush=True)
    log_progress(f"openb: {', '.join(str(p) for p in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
