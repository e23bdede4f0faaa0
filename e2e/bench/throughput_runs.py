"""The throughput benchmark's runs: the cluster set up once, each scheduler measured on its own
namespace, then ``koordctl simulate`` in process; the figures land in a ``Report``."""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Sequence
from typing import Any

from apis.client.backend import RESERVATIONS
from apis.core import Pod
from apis.quantity import Quantity
from apis.scheduling.reservation import Reservation
from e2e.bench.bindings import BindWatcher, binding_profile, sustained_rate
from e2e.bench.harness import BenchError, log_progress, phase
from e2e.bench.kube_api import Api, create_all, create_namespace
from e2e.bench.kwok_cluster import start_cluster, stop_cluster
from e2e.bench.node_metrics import report_node_metrics
from e2e.bench.nodes import wait_nodes_schedulable
from e2e.bench.processes import (
    KOORD,
    KUBE,
    KUBE_PROFILE,
    CpuMeter,
    cluster_pids,
    kube_scheduler,
    peak_rss_mib,
    save_metrics,
    wait_ready,
)
from e2e.bench.throughput_model import (
    KOORD_NAMESPACE,
    KUBE_NAMESPACE,
    SIMULATE,
    SIMULATE_ALONE,
    Options,
    Report,
    RunResult,
)
from e2e.bench.throughput_reservations import (
    RESERVATIONS_PATH,
    count_allocated,
    place_reservations,
    placed_reservations,
    reservations,
)
from e2e.bench.throughput_workload import (
    bench_description,
    check_fits,
    controller_manager_args,
    pods_path,
    scheduler_config,
    workload,
)
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koord_scheduler
from e2e.scheduler_process import free_port
from scheduler.simulator.description import ClusterDescription
from scheduler.simulator.run import simulate

__all__ = ["measure_scheduler", "measure_simulate", "run_benchmark"]


async def measure_scheduler(
    api: Api,
    cp: ControlPlane,
    opts: Options,
    *,
    scheduler: str,
    component: LocalComponent,
    ready_url: str,
    namespace: str,
    metrics_url: str | None = None,
) -> RunResult:
    result = RunResult(scheduler=scheduler, nodes=opts.nodes, pods=opts.pods, log=str(component.log_file))
    watcher = BindWatcher(api, namespace, opts.pods)
    await watcher.start()
    if watcher.bound:
        raise BenchError(f"{namespace}: {len(watcher.bound)} pods were bound before {scheduler} started")
    pids = cluster_pids(cp)
    meter: CpuMeter | None = None
    component.log_file.unlink(missing_ok=True)
    started = time.monotonic()
    component.start()
    pid = component.pid()
    try:
        if pid is not None:
            pids = {scheduler: pid, **pids, "harness": os.getpid()}
        ready_at = await wait_ready(component, ready_url, opts.ready_timeout)
        meter = CpuMeter(pids)
        meter.start()
        result.startup_seconds = round(ready_at - started, 2)
        log_progress(f"{scheduler}: ready {ready_at - started:.1f}s after start; measuring")
        first = watcher.times[0] if watcher.times else math.inf
        clock = min(ready_at, first)
        result.clock_started_at = "readyz" if ready_at <= first else "first binding"

        def progress(count: int) -> None:
            elapsed = time.monotonic() - clock
            log_progress(
                f"{scheduler}: {count}/{opts.pods} bound in {elapsed:.1f}s ({count / elapsed:.0f} pods/s)"
            )

        try:
            await watcher.wait(opts.stall_timeout, progress)
        except BenchError as exc:
            result.error = str(exc)
        result.cpu_percent = meter.stop()
        times = watcher.times
        result.bound = len(times)
        if times:
            clock = min(clock, times[0])
            result.first_binding_seconds = round(min(times) - clock, 2)
            result.seconds = round(max(times) - clock, 3)
            result.pods_per_second = round(result.bound / max(max(times) - clock, 1e-9), 1)
            sustained = sustained_rate(times)
            result.sustained_pods_per_second = None if sustained is None else round(sustained, 1)
            result.profile = binding_profile(times, clock)
        if metrics_url is not None:
            await save_metrics(metrics_url, cp.state_dir / f"{component.name}-metrics.txt")
    finally:
        if pid is not None:
            result.peak_rss_mib = peak_rss_mib(pid)
        component.stop()
        await watcher.close()
    log_progress(
        f"{scheduler}: {result.bound}/{opts.pods} bound in {result.seconds:.1f}s "
        f"({result.pods_per_second:.0f} pods/s, sustained {result.sustained_pods_per_second or 0:.0f})"
    )
    return result


async def measure_simulate(
    description: ClusterDescription,
    pods: Sequence[dict[str, Any]],
    config_text: str,
    opts: Options,
    *,
    classes: bool = True,
) -> RunResult:
    models = [Pod.model_validate(p) for p in pods]
    nodes = [node["metadata"]["name"] for node in description.nodes()]
    placed = [
        (RESERVATIONS, Reservation.model_validate(r))
        for r in placed_reservations(reservations(opts.reservations), nodes)
    ]
    meter = CpuMeter({"harness (simulate)": os.getpid()})
    meter.start()
    simulated = await simulate(
        description, models, config_text=config_text, custom_resources=placed, equivalence_classes=classes
    )
    name = SIMULATE if classes else SIMULATE_ALONE
    result = RunResult(
        scheduler=name,
        nodes=simulated.nodes,
        pods=opts.pods,
        bound=len(simulated.scheduled),
        seconds=round(simulated.seconds, 3),
        pods_per_second=round(simulated.pods_per_second, 1),
        clock_started_at="pods submitted",
        cpu_percent=meter.stop(),
    )
    if result.bound < opts.pods:
        result.error = f"{opts.pods - result.bound} pods left pending"
    log_progress(f"{name}: {result.bound}/{opts.pods} bound in {result.seconds:.1f}s")
    return result


def _workload(namespace: str, scheduler_name: str, opts: Options) -> list[dict[str, Any]]:
    return workload(
        namespace,
        scheduler_name,
        opts.pods,
        kind=opts.workload,
        reservations=opts.reservations,
        owner_share=opts.owner_share,
    )


def _koord_component(cp: ControlPlane, config_text: str) -> tuple[LocalComponent, int]:
    """A fresh koord-scheduler process (not started) with the benchmark's configuration."""
    config = cp.state_dir / "koord-scheduler-bench.yaml"
    config.write_text(config_text)
    port = free_port()
    return koord_scheduler(cp, kubeconfig=cp.kubeconfig, port=port, config=config, leader_elect=False), port


async def run_benchmark(opts: Options) -> Report:
    """Run every phase; a failure is recorded in ``report.errors`` and the cluster is still stopped."""
    report = Report(
        nodes=opts.nodes,
        pods=opts.pods,
        qps=opts.qps,
        burst=opts.burst,
        parallelism=opts.parallelism,
        workload=opts.workload,
        load_aware=opts.load_aware,
        reservations=opts.reservations,
        owner_share=opts.owner_share,
    )
    check_fits(opts, 1 if opts.skip_upstream else 2)
    description = bench_description(opts)
    koord_pods = _workload(KOORD_NAMESPACE, KOORD, opts)
    cp = ControlPlane(name=opts.cluster_name, controller_manager_args=controller_manager_args(opts))
    config_text = scheduler_config(opts, cp.kubeconfig, KOORD)
    api: Api | None = None

    async def create_nodes(client: Api) -> None:
        await create_all(client, lambda _: "/api/v1/nodes", description.nodes(), "nodes", opts.concurrency)
        await wait_nodes_schedulable(client, opts.nodes, opts.concurrency)

    try:
        api = await start_cluster(cp, create_nodes, connections=opts.concurrency, phases=report.phases)
        if opts.reservations:
            with phase(report.phases, "place reservations"):
                objects = reservations(opts.reservations)
                await create_all(api, lambda _: RESERVATIONS_PATH, objects, "reservations", opts.concurrency)
                component, port = _koord_component(cp, config_text)
                report.placement = await place_reservations(
                    api, opts, component, f"http://127.0.0.1:{port}/readyz"
                )
                if report.placement.error:
                    raise BenchError(f"reservations: {report.placement.error}")
        namespaces = [KOORD_NAMESPACE] + ([] if opts.skip_upstream else [KUBE_NAMESPACE])
        with phase(report.phases, "create pods"):
            for namespace in namespaces:
                await create_namespace(api, namespace)
            await create_all(api, pods_path, koord_pods, f"pods {KOORD_NAMESPACE}", opts.concurrency)
            if not opts.skip_upstream:
                kube_pods = _workload(KUBE_NAMESPACE, KUBE_PROFILE, opts)
                await create_all(api, pods_path, kube_pods, f"pods {KUBE_NAMESPACE}", opts.concurrency)
        if opts.load_aware:
            with phase(report.phases, "node metrics"):
                names = [node["metadata"]["name"] for node in description.nodes()]
                cpu, memory = Quantity.parse(opts.node_cpu), Quantity.parse(opts.node_memory)
                await report_node_metrics(api, names, cpu.milli_value(), memory.value(), opts.concurrency)
        with phase(report.phases, KOORD):
            component, port = _koord_component(cp, config_text)
            report.results.append(
                await measure_scheduler(
                    api,
                    cp,
                    opts,
                    scheduler=KOORD,
                    component=component,
                    ready_url=f"http://127.0.0.1:{port}/readyz",
                    namespace=KOORD_NAMESPACE,
                    metrics_url=f"http://127.0.0.1:{port}/metrics",
                )
            )
            if opts.reservations:
                report.owners_allocated = await count_allocated(api, KOORD_NAMESPACE)
        if not opts.skip_upstream:
            with phase(report.phases, KUBE):
                config = cp.state_dir / "kube-scheduler-bench.yaml"
                config.write_text(scheduler_config(opts, cp.kubeconfig, KUBE_PROFILE))
                port = free_port()
                report.results.append(
                    await measure_scheduler(
                        api,
                        cp,
                        opts,
                        scheduler=KUBE,
                        component=kube_scheduler(cp, config, port),
                        ready_url=f"https://127.0.0.1:{port}/readyz",
                        namespace=KUBE_NAMESPACE,
                    )
                )
    except (Exception, asyncio.CancelledError) as exc:
        report.errors.append(f"{type(exc).__name__}: {exc}")
        log_progress(f"failed: {type(exc).__name__}: {exc}")
    finally:
        await stop_cluster(cp, api, phases=report.phases, keep=opts.keep)
    if not opts.skip_simulate:
        with phase(report.phases, "simulate"):
            try:
                report.results.append(await measure_simulate(description, koord_pods, config_text, opts))
                if opts.workload == "identical":  # the baseline of the equivalence classes
                    report.results.append(
                        await measure_simulate(description, koord_pods, config_text, opts, classes=False)
                    )
            except Exception as exc:
                report.errors.append(f"simulate: {type(exc).__name__}: {exc}")
    report.errors.extend(f"{r.scheduler}: {r.error}" for r in report.results if r.error)
    return report
