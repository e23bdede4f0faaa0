"""Pod startup latency under a steady arrival rate: koord-scheduler against kube-scheduler.

    python -m e2e.bench.startup_latency [--nodes 100] [--pods 300] [--rate 20] [-o table|json]

Method
------

1. **Cluster.** A dedicated local cluster (``bench-latency`` or ``--cluster-name``: kube-apiserver,
   etcd, kube-controller-manager, KWOK) with the throughput benchmark's nodes
   (``throughput_workload.bench_description``: four zones, 32 CPU / 128Gi / 110 pods each), made
   Ready and untainted; stopped at the end, also on errors.
2. **One scheduler at a time**, koord-scheduler first, each as a real process with the throughput
   benchmark's configuration (same qps/burst), on its own namespace (``bench-latency-koord``,
   ``bench-latency-kube``). The scheduler is started and waited for (``/readyz``) with no pod
   pending, then the harness creates ``--pods`` pods of the throughput workload (cycling requests)
   at ``--rate`` pods per second, evenly paced; it is stopped when every pod is seen bound.
3. **Latency** of a pod: from the moment the harness sends its create request to the moment a
   watch on the namespace (opened before the scheduler started) delivers the event that first
   shows its ``spec.nodeName``; both on the harness's monotonic clock. That is create -> bound as
   the API server reports it, including the create request itself and the watch delivery (the
   same for both schedulers). ``creationTimestamp`` is not used: it has one-second resolution.

Figures per scheduler: pods bound, the achieved creation rate, latency p50 / p90 / p99 / max in
ms, and every latency (sorted) for a CDF. The pods of the first run stay bound during the second
(the nodes are sized for both). Printed, never asserted; the exit code is 0 unless something failed
to run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from e2e.bench.bindings import BindWatcher
from e2e.bench.harness import BenchError, log_progress, phase
from e2e.bench.kube_api import Api, create_all, create_namespace
from e2e.bench.kwok_cluster import start_cluster, stop_cluster
from e2e.bench.nodes import wait_nodes_schedulable
from e2e.bench.processes import KOORD, KUBE, KUBE_PROFILE, kube_scheduler, wait_ready
from e2e.bench.throughput_model import Options as ThroughputOptions
from e2e.bench.throughput_workload import bench_description, check_fits, pods_path, scheduler_config, workload
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koord_scheduler
from e2e.scheduler_process import free_port

__all__ = [
    "LatencyOptions",
    "LatencyReport",
    "LatencyResult",
    "main",
    "percentile",
    "render",
    "run_benchmark",
]

NAMESPACES = {KOORD: "bench-latency-koord", KUBE: "bench-latency-kube"}


class LatencyOptions(BaseModel, frozen=True):
    nodes: int = Field(default=100, ge=1)
    pods: int = Field(default=300, ge=1)
    """Pods per scheduler."""
    rate: float = Field(default=20.0, gt=0)
    """Pods created per second, evenly paced."""
    qps: float = 1000.0
    burst: int = 2000
    cluster_name: str = "bench-latency"
    concurrency: int = 32
    """Create requests in flight while creating the nodes."""
    ready_timeout: float = 300.0
    stall_timeout: float = 60.0
    """Seconds without a new binding after which a run is given up."""
    skip_upstream: bool = False
    keep: bool = False

    def throughput(self) -> ThroughputOptions:
        """The throughput benchmark's options for the same cluster shape and client settings."""
        return ThroughputOptions(
            nodes=self.nodes, pods=self.pods, qps=self.qps, burst=self.burst, cluster_name=self.cluster_name
        )


class LatencyResult(BaseModel):
    scheduler: str
    pods: int
    bound: int = 0
    rate: float
    achieved_rate: float | None = None
    """Pods created per second, first to last create request."""
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    latencies_ms: list[float] = Field(default_factory=list)
    """Every bound pod's create -> bound latency, sorted."""
    error: str = ""


class LatencyReport(BaseModel):
    options: LatencyOptions
    results: list[LatencyResult] = Field(default_factory=list)
    phases: dict[str, float] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)

    def result(self, scheduler: str) -> LatencyResult | None:
        return next((r for r in self.results if r.scheduler == scheduler), None)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


class _TimedBindWatcher(BindWatcher):
    """A BindWatcher that keeps when each pod was first seen bound."""

    def __init__(self, api: Api, namespace: str, expected: int) -> None:
        super().__init__(api, namespace, expected)
        self.bound_at: dict[str, float] = {}

    def _seen(self, name: str, at: float) -> None:
        self.bound_at.setdefault(name, at)
        super()._seen(name, at)


async def create_paced(api: Api, pods: Sequence[dict[str, Any]], rate: float) -> dict[str, float]:
    """Create ``pods`` at ``rate`` per second; the monotonic time each create request was sent."""
    sent: dict[str, float] = {}
    tasks: list[asyncio.Task[None]] = []
    began = time.monotonic()
    for i, pod in enumerate(pods):
        delay = began + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        sent[pod["metadata"]["name"]] = time.monotonic()
        tasks.append(asyncio.create_task(api.create(pods_path(pod), pod)))
    await asyncio.gather(*tasks)
    return sent


def _component(cp: ControlPlane, opts: LatencyOptions, scheduler: str) -> tuple[LocalComponent, str]:
    """The scheduler's process (not started) and its readiness URL."""
    port = free_port()
    if scheduler == KOORD:
        config = cp.state_dir / "koord-scheduler-latency.yaml"
        config.write_text(scheduler_config(opts.throughput(), cp.kubeconfig, KOORD))
        component = koord_scheduler(
            cp, kubeconfig=cp.kubeconfig, port=port, config=config, leader_elect=False
        )
        return component, f"http://127.0.0.1:{port}/readyz"
    config = cp.state_dir / "kube-scheduler-latency.yaml"
    config.write_text(scheduler_config(opts.throughput(), cp.kubeconfig, KUBE_PROFILE))
    return kube_scheduler(cp, config, port), f"https://127.0.0.1:{port}/readyz"


async def measure(api: Api, cp: ControlPlane, opts: LatencyOptions, scheduler: str) -> LatencyResult:
    namespace = NAMESPACES[scheduler]
    name = KOORD if scheduler == KOORD else KUBE_PROFILE
    pods = workload(namespace, name, opts.pods)
    result = LatencyResult(scheduler=scheduler, pods=opts.pods, rate=opts.rate)
    watcher = _TimedBindWatcher(api, namespace, opts.pods)
    await watcher.start()
    component, ready_url = _component(cp, opts, scheduler)
    component.log_file.unlink(missing_ok=True)
    component.start()
    try:
        await wait_ready(component, ready_url, opts.ready_timeout)
        log_progress(f"{scheduler}: ready; creating {opts.pods} pods at {opts.rate:g}/s")
        sent = await create_paced(api, pods, opts.rate)
        if len(sent) > 1:
            span = max(sent.values()) - min(sent.values())
            result.achieved_rate = round((len(sent) - 1) / span, 1) if span > 0 else None
        try:
            await watcher.wait(
                opts.stall_timeout, lambda n: log_progress(f"{scheduler}: {n}/{opts.pods} bound")
            )
        except BenchError as exc:
            result.error = str(exc)
        latencies = sorted(
            round((at - sent[pod]) * 1000, 2) for pod, at in watcher.bound_at.items() if pod in sent
        )
        result.bound = len(latencies)
        result.latencies_ms = latencies
        result.p50_ms, result.p90_ms, result.p99_ms = (percentile(latencies, q) for q in (50, 90, 99))
        result.max_ms = latencies[-1] if latencies else None
    finally:
        component.stop()
        await watcher.close()
    log_progress(
        f"{scheduler}: {result.bound}/{opts.pods} bound, p50 {result.p50_ms} ms, p99 {result.p99_ms} ms"
    )
    return result


async def run_benchmark(opts: LatencyOptions) -> LatencyReport:
    """Every phase; a failure lands in ``report.errors`` and the cluster is still stopped."""
    report = LatencyReport(options=opts)
    schedulers = [KOORD] + ([] if opts.skip_upstream else [KUBE])
    check_fits(opts.throughput(), len(schedulers))
    description = bench_description(opts.throughput())
    cp = ControlPlane(name=opts.cluster_name)
    api: Api | None = None

    async def create_nodes(client: Api) -> None:
        await create_all(client, lambda _: "/api/v1/nodes", description.nodes(), "nodes", opts.concurrency)
        await wait_nodes_schedulable(client, opts.nodes, opts.concurrency)
        for scheduler in schedulers:
            await create_namespace(client, NAMESPACES[scheduler])

    try:
        api = await start_cluster(cp, create_nodes, connections=opts.concurrency, phases=report.phases)
        for scheduler in schedulers:
            with phase(report.phases, scheduler):
                report.results.append(await measure(api, cp, opts, scheduler))
    except (Exception, asyncio.CancelledError) as exc:
        report.errors.append(f"{type(exc).__name__}: {exc}")
        log_progress(f"failed: {type(exc).__name__}: {exc}")
    finally:
        await stop_cluster(cp, api, phases=report.phases, keep=opts.keep)
    report.errors.extend(f"{r.scheduler}: {r.error}" for r in report.results if r.error)
    return report


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render(report: LatencyReport, output: str = "table") -> str:
    if output == "json":
        return report.model_dump_json(indent=2)
    opts = report.options
    lines = [
        f"pod startup latency (create -> bound), {opts.nodes} nodes, {opts.pods} pods per scheduler "
        f"created at {opts.rate:g}/s",
        f"{'SCHEDULER':<16} {'BOUND':>7} {'RATE/S':>7} "
        f"{'P50 MS':>8} {'P90 MS':>8} {'P99 MS':>8} {'MAX MS':>8}",
    ]
    for r in report.results:
        rate = "-" if r.achieved_rate is None else f"{r.achieved_rate:.1f}"
        lines.append(
            f"{r.scheduler:<16} {r.bound:>3}/{r.pods:<3} {rate:>7} {_ms(r.p50_ms):>8} {_ms(r.p90_ms):>8} "
            f"{_ms(r.p99_ms):>8} {_ms(r.max_ms):>8}"
        )
    lines.extend(f"ERROR: {e}" for e in report.errors)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench.startup_latency", description=__doc__)
    defaults = LatencyOptions()
    parser.add_argument("--nodes", type=int, default=defaults.nodes)
    parser.add_argument("--pods", type=int, default=defaults.pods, help="pods per scheduler")
    parser.add_argument("--rate", type=float, default=defaults.rate, help="pods created per second")
    parser.add_argument("--qps", type=float, default=defaults.qps)
    parser.add_argument("--burst", type=int, default=defaults.burst)
    parser.add_argument("--skip-upstream", action="store_true", help="do not run kube-scheduler")
    parser.add_argument("--cluster-name", default=defaults.cluster_name)
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args(argv)
    opts = LatencyOptions(
        nodes=args.nodes,
        pods=args.pods,
        rate=args.rate,
        qps=args.qps,
        burst=args.burst,
        skip_upstream=args.skip_upstream,
        cluster_name=args.cluster_name,
        keep=args.keep,
    )
    try:
        report = asyncio.run(run_benchmark(opts))
    except BenchError as exc:
        print(f"[bench] {exc}", file=sys.stderr)
        return 2
    print(render(report, args.output), flush=True)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
