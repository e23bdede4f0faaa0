"""The suite's benches: each runs an existing benchmark's harness and turns its report into figures
beside their baselines (``Figure``). Nothing here measures anything the benches do not."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from e2e.bench import (
    gang_placement,
    openb_replay,
    preemption,
    startup_latency,
    startup_time,
    victim_selection,
)
from e2e.bench.harness import log_progress
from e2e.bench.openb_paper import closest_policy
from e2e.bench.processes import KOORD, KUBE
from e2e.bench.suite_model import Better, Figure, SuiteOptions, SuiteResults
from e2e.bench.throughput_model import SIMULATE, SIMULATE_ALONE
from e2e.bench.throughput_model import Options as ThroughputOptions
from e2e.bench.throughput_model import Report as ThroughputReport
from e2e.bench.throughput_runs import run_benchmark as run_throughput

__all__ = ["RUNS"]

CPSAT, GREEDY = "CP-SAT", "greedy"


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _pct(values: list[float], q: float, scale: float = 1.0) -> float | None:
    """The benches' own percentile (``gang_placement.percentile``), None when nothing was measured."""
    return gang_placement.percentile(values, q) * scale if values else None


def _term(objectives: Sequence[tuple[int, ...] | None], index: int) -> float | None:
    """The mean of one term of the victim selections' objective tuples."""
    return _mean([o[index] for o in objectives if o is not None])


def _solver(
    bench: str, metric: str, size: str, unit: str, better: Better, ours: float | None, base: float | None
) -> Figure:
    """A figure of the CP-SAT solver beside Koordinator's greedy one, on the same problems."""
    return Figure(
        bench=bench,
        metric=metric,
        size=size,
        unit=unit,
        better=better,
        ours=ours,
        baseline=base,
        ours_label=CPSAT,
        baseline_label=GREEDY,
    )


def _throughput_figures(bench: str, report: ThroughputReport, size: str) -> list[Figure]:
    koord, kube = report.result(KOORD), report.result(KUBE)
    figures = []
    for metric, attr in (("pods/s", "pods_per_second"), ("sustained pods/s", "sustained_pods_per_second")):
        figures.append(
            Figure(
                bench=bench,
                metric=metric,
                size=size,
                unit="pods/s",
                better="higher",
                ours=None if koord is None else getattr(koord, attr),
                baseline=None if kube is None else getattr(kube, attr),
            )
        )
    return figures


async def _throughput_run(results: SuiteResults, key: str, opts: ThroughputOptions) -> ThroughputReport:
    report = await run_throughput(opts)
    results.details[key] = report.to_json()
    results.errors.extend(f"{key}: {e}" for e in report.errors)
    return report


def _size(nodes: int, pods: int) -> str:
    return f"{nodes} nodes / {pods} pods"


async def throughput(opts: SuiteOptions, results: SuiteResults) -> None:
    """Pods/s of koord-scheduler and kube-scheduler on the same KWOK cluster, one run per size."""
    for nodes in opts.throughput_nodes:
        run_opts = ThroughputOptions(
            nodes=nodes,
            pods=opts.throughput_pods,
            skip_simulate=True,
            cluster_name=f"{opts.cluster_prefix}-throughput",
        )
        report = await _throughput_run(results, f"throughput {nodes}", run_opts)
        results.figures.extend(_throughput_figures("throughput", report, _size(nodes, opts.throughput_pods)))


async def identical(opts: SuiteOptions, results: SuiteResults) -> None:
    """Pods/s on the identical-pods workload (issue 32: every pod a replica of one Deployment), of
    koord-scheduler and of ``koordctl simulate`` in process, each beside kube-scheduler's from the
    same run."""
    nodes, pods = opts.identical_nodes, opts.identical_pods
    run_opts = ThroughputOptions(
        nodes=nodes, pods=pods, workload="identical", cluster_name=f"{opts.cluster_prefix}-identical"
    )
    report = await _throughput_run(results, "identical", run_opts)
    size = _size(nodes, pods)
    results.figures.extend(_throughput_figures("identical", report, size))
    simulate, kube = report.result(SIMULATE), report.result(KUBE)
    results.figures.append(
        Figure(
            bench="identical",
            metric="pods/s in process",
            size=size,
            unit="pods/s",
            better="higher",
            ours=None if simulate is None else simulate.pods_per_second,
            baseline=None if kube is None else kube.pods_per_second,
            ours_label=SIMULATE,
        )
    )
    alone = report.result(SIMULATE_ALONE)
    results.figures.append(
        Figure(
            bench="identical",
            metric="pods/s in process, classes against pod by pod",
            size=size,
            unit="pods/s",
            better="higher",
            ours=None if simulate is None else simulate.pods_per_second,
            baseline=None if alone is None else alone.pods_per_second,
            ours_label=SIMULATE,
            baseline_label=SIMULATE_ALONE,
        )
    )


async def perf_harness(opts: SuiteOptions, results: SuiteResults) -> None:
    """Koordinator's perf-harness shape: 100 nodes, 1,000 pods, the client capped at 100 QPS."""
    qps = opts.perf_qps
    run_opts = ThroughputOptions(
        nodes=opts.perf_nodes,
        pods=opts.perf_pods,
        qps=qps,
        burst=int(qps),
        skip_simulate=True,
        cluster_name=f"{opts.cluster_prefix}-perf",
    )
    report = await _throughput_run(results, "perf-harness", run_opts)
    size = f"{_size(opts.perf_nodes, opts.perf_pods)}, {qps:g} QPS"
    results.figures.extend(_throughput_figures("perf-harness", report, size))


async def rss(opts: SuiteOptions, results: SuiteResults) -> None:
    """Peak resident memory of both scheduler processes at the end of a throughput run."""
    key = f"throughput {opts.rss_nodes}"
    details = results.details.get(key)
    if details is None or details["pods"] != opts.rss_pods:
        run_opts = ThroughputOptions(
            nodes=opts.rss_nodes,
            pods=opts.rss_pods,
            skip_simulate=True,
            cluster_name=f"{opts.cluster_prefix}-rss",
        )
        key = "rss"
        report = await _throughput_run(results, key, run_opts)
        details = report.to_json()
    else:
        log_progress(f"rss: from the throughput run at {opts.rss_nodes} nodes")
    peaks = {r["scheduler"]: r["peak_rss_mib"] for r in (details or {}).get("results", [])}
    results.figures.append(
        Figure(
            bench="rss",
            metric="peak RSS",
            size=_size(opts.rss_nodes, opts.rss_pods),
            unit="MiB",
            better="lower",
            ours=peaks.get(KOORD),
            baseline=peaks.get(KUBE),
        )
    )


async def latency(opts: SuiteOptions, results: SuiteResults) -> None:
    """Create -> bound latency under a steady arrival rate (``startup_latency``)."""
    run_opts = startup_latency.LatencyOptions(
        nodes=opts.latency_nodes,
        pods=opts.latency_pods,
        rate=opts.latency_rate,
        cluster_name=f"{opts.cluster_prefix}-latency",
    )
    report = await startup_latency.run_benchmark(run_opts)
    results.details["latency"] = report.model_dump(
        mode="json", exclude={"results": {"__all__": {"latencies_ms"}}}
    )
    results.errors.extend(f"latency: {e}" for e in report.errors)
    koord, kube = report.result(KOORD), report.result(KUBE)
    for r in report.results:
        results.latency_ms[r.scheduler] = r.latencies_ms
    size = f"{opts.latency_nodes} nodes, {opts.latency_pods} pods at {opts.latency_rate:g}/s"
    for metric, attr in (("p50", "p50_ms"), ("p99", "p99_ms")):
        results.figures.append(
            Figure(
                bench="latency",
                metric=f"startup latency {metric}",
                size=size,
                unit="ms",
                better="lower",
                ours=None if koord is None else getattr(koord, attr),
                baseline=None if kube is None else getattr(kube, attr),
            )
        )


async def startup(opts: SuiteOptions, results: SuiteResults) -> None:
    """Process start to ready, and peak RSS then, with a backlog of pending and bound pods
    (``startup_time``)."""
    run_opts = startup_time.StartupOptions(
        nodes=opts.startup_nodes,
        pending=opts.startup_pending,
        bound=opts.startup_bound,
        cluster_name=f"{opts.cluster_prefix}-startup",
    )
    report = await startup_time.run_benchmark(run_opts)
    results.details["startup"] = report.model_dump(mode="json")
    results.errors.extend(f"startup: {e}" for e in report.errors)
    koord, kube = report.result(KOORD), report.result(KUBE)
    for metric, unit, attr in (
        ("time to ready", "s", "ready_seconds"),
        ("peak RSS at ready", "MiB", "peak_rss_mib"),
    ):
        results.figures.append(
            Figure(
                bench="startup",
                metric=metric,
                size=run_opts.size,
                unit=unit,
                better="lower",
                ours=None if koord is None else getattr(koord, attr),
                baseline=None if kube is None else getattr(kube, attr),
            )
        )


async def gang(opts: SuiteOptions, results: SuiteResults) -> None:
    """Gang placement, CP-SAT against the greedy planner on the same clusters (in process)."""
    for nodes in opts.gang_nodes:
        for size in opts.gang_sizes:
            log_progress(f"gang: {nodes} nodes, {size} members, {opts.gang_trials} trials")
            rows, broken = gang_placement.measure(
                nodes, size, trials=opts.gang_trials, time_limit=opts.solver_seconds
            )
            if broken:
                results.errors.append(f"gang: {broken} plans broke a rule at {nodes} nodes x {size}")
            cpsat, greedy = rows["cpsat"], rows["greedy"]
            label = f"{nodes} nodes x {size}"

            proven = 100 * cpsat.statuses["OPTIMAL"] / cpsat.trials if cpsat.trials else None
            results.figures.extend(
                [
                    _solver(
                        "gang", "latency p50", label, "ms", "lower", _pct(cpsat.ms, 50), _pct(greedy.ms, 50)
                    ),
                    _solver(
                        "gang", "latency p99", label, "ms", "lower", _pct(cpsat.ms, 99), _pct(greedy.ms, 99)
                    ),
                    _solver(
                        "gang",
                        "blocks used",
                        label,
                        "blocks",
                        "lower",
                        _mean(cpsat.blocks),
                        _mean(greedy.blocks),
                    ),
                    _solver(
                        "gang",
                        "score per member",
                        label,
                        "0..100",
                        "higher",
                        _mean(cpsat.score),
                        _mean(greedy.score),
                    ),
                    _solver("gang", "gangs placed", label, "gangs", "higher", cpsat.placed, greedy.placed),
                    _solver("gang", "proven optimal", label, "%", "higher", proven, None),
                ]
            )


async def victims(opts: SuiteOptions, results: SuiteResults) -> None:
    """Victim selection, CP-SAT against Koordinator's greedy on the same problems (in process)."""
    for size in opts.victim_sizes:
        nodes, members = (int(x) for x in size.split("x"))
        log_progress(f"victims: {size}, {opts.victim_trials} trials")
        measured = victim_selection.measure(
            nodes, members, trials=opts.victim_trials, seconds=opts.solver_seconds
        )

        label = f"{nodes} nodes x {members} members"
        seconds = measured.seconds
        objectives = measured.objectives
        results.figures.extend(
            [
                _solver(
                    "victims",
                    "victim jobs",
                    label,
                    "jobs",
                    "lower",
                    _term(objectives["cpsat"], 2),
                    _term(objectives["greedy"], 2),
                ),
                _solver(
                    "victims",
                    "pods evicted",
                    label,
                    "pods",
                    "lower",
                    _term(objectives["cpsat"], 4),
                    _term(objectives["greedy"], 4),
                ),
                _solver(
                    "victims",
                    "decision p50",
                    label,
                    "ms",
                    "lower",
                    _pct(seconds["cpsat"], 50, 1000),
                    _pct(seconds["greedy"], 50, 1000),
                ),
                _solver(
                    "victims",
                    "decision p99",
                    label,
                    "ms",
                    "lower",
                    _pct(seconds["cpsat"], 99, 1000),
                    _pct(seconds["greedy"], 99, 1000),
                ),
            ]
        )


async def preemption_cluster(opts: SuiteOptions, results: SuiteResults) -> None:
    """Job-level preemption against kube-scheduler's pod-level preemption on a KWOK cluster."""
    run_opts = preemption.Options(
        nodes=opts.preemption_nodes,
        timeout=opts.preemption_timeout,
        cluster_name=f"{opts.cluster_prefix}-preempt",
        repeat=opts.preemption_repeat,
    )
    report = await preemption.run_benchmark(run_opts)
    results.details["preemption"] = report.to_json()
    results.errors.extend(f"preemption: {e}" for e in report.errors)
    for scenario in preemption.SCENARIOS:
        koord, kube = report.row(scenario, KOORD), report.row(scenario, KUBE)
        for metric, unit, attr in (
            ("victims", "pods", "victims"),
            ("wasted evictions", "pods", "wasted"),
            ("victim jobs", "jobs", "victim_jobs"),
            ("time to run", "s", "seconds_to_run"),
        ):
            results.figures.append(
                Figure(
                    bench="preemption",
                    metric=metric,
                    size=f"{scenario}, {opts.preemption_nodes} nodes",
                    unit=unit,
                    better="lower",
                    ours=None if koord is None else getattr(koord, attr),
                    baseline=None if kube is None else getattr(kube, attr),
                )
            )


async def openb(opts: SuiteOptions, results: SuiteResults) -> None:
    """The OpenB trace replayed per DeviceShare strategy in process (``openb_replay``): GPU
    allocation at 100% and 130% arrived beside the paper's policy nearest to the strategy."""
    run_opts = openb_replay.OpenBOptions(
        strategies=opts.openb_strategies,
        seed=opts.openb_seed,
        limit=opts.openb_limit,
        nodes=opts.openb_nodes,
        out=opts.out / "openb",
    )
    report = await openb_replay.run_benchmark(run_opts)
    paths = openb_replay.write_outputs(report, run_opts.out)
    results.plots.extend(f"openb/{p.name}" for p in paths if p.suffix == ".png")
    results.details["openb"] = report.model_dump(mode="json", include={"options", "nodes", "gpus", "figures"})
    paper = {p.name: p for p in report.paper}
    for f in report.figures:
        policy = paper.get(closest_policy(f.strategy) or "")
        beside = f" vs {policy.name}" if policy is not None else ""
        size = f"{f.strategy}{beside}, {report.nodes} nodes, seed {opts.openb_seed}"
        for mark in openb_replay.MARKS:
            results.figures.append(
                Figure(
                    bench="openb",
                    metric=f"GPU allocation at {mark}% arrived",
                    size=size,
                    unit="%",
                    better="higher",
                    ours=f.allocation_at[mark],
                    baseline=None if policy is None else policy.at(mark),
                    baseline_label="FGD paper, mean of its seeds",
                )
            )
        results.figures.append(
            Figure(
                bench="openb",
                metric="failed GPU pods",
                size=size,
                unit="pods",
                better="lower",
                ours=f.failed_gpu_pods,
                baseline=None,
            )
        )
        results.figures.append(
            Figure(
                bench="openb",
                metric="replay pods/s",
                size=size,
                unit="pods/s",
                better="higher",
                ours=f.pods_per_second,
                baseline=None,
            )
        )


RUNS = {
    "throughput": throughput,
    "identical": identical,
    "perf-harness": perf_harness,
    "rss": rss,
    "latency": latency,
    "startup": startup,
    "gang": gang,
    "victims": victims,
    "preemption": preemption_cluster,
    "openb": openb,
}
