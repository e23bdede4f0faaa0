"""The affinity benchmark's runs: one cluster, and per shape its init pods bound, its measured pods
pending for both schedulers, koord-scheduler measured, then kube-scheduler, then every pod deleted."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any

from apis.client.backend import BackendError
from apis.client.kubernetes import request_json
from e2e.bench.affinity_shapes_workload import (
    INIT_NAMESPACE,
    SHAPES,
    SINGLE_ZONE,
    ZONE,
    Shape,
    description,
    init_pods,
    measured_pods,
)
from e2e.bench.harness import BenchError, log_progress, phase
from e2e.bench.kube_api import Api, create_all, create_namespace, run_all
from e2e.bench.kwok_cluster import start_cluster, stop_cluster
from e2e.bench.nodes import wait_nodes_schedulable
from e2e.bench.processes import KOORD, KUBE, KUBE_PROFILE, kube_scheduler
from e2e.bench.throughput_model import Options, RunResult
from e2e.bench.throughput_runs import measure_scheduler
from e2e.bench.throughput_workload import pods_path, scheduler_config
from e2e.cluster.controlplane import ControlPlane
from e2e.components import koord_scheduler
from e2e.scheduler_process import free_port

__all__ = ["NAMESPACES", "ShapeOptions", "ShapeResult", "ShapesReport", "run_shapes"]

NAMESPACES = {KOORD: "aff-koord", KUBE: "aff-kube"}
SCHEDULER_NAMES = {KOORD: KOORD, KUBE: KUBE_PROFILE}


@dataclass(frozen=True)
class ShapeOptions:
    nodes: int = 1000
    shapes: tuple[str, ...] = tuple(name for name, s in SHAPES.items() if not s.memory)
    qps: float = 1000.0
    burst: int = 2000
    parallelism: int | None = None
    cluster_name: str = "bench-affinity"
    concurrency: int = 32
    stall_timeout: float = 120.0
    keep: bool = False

    def throughput(self, pods: int) -> Options:
        """The throughput benchmark's options for one shape's run (its harness measures it)."""
        return Options(
            nodes=self.nodes,
            pods=pods,
            qps=self.qps,
            burst=self.burst,
            parallelism=self.parallelism,
            cluster_name=self.cluster_name,
            concurrency=self.concurrency,
            stall_timeout=self.stall_timeout,
            keep=self.keep,
        )


@dataclass
class ShapeResult:
    shape: str
    init_pods: int
    measured_pods: int
    results: list[RunResult] = field(default_factory=list)

    def result(self, scheduler: str) -> RunResult | None:
        return next((r for r in self.results if r.scheduler == scheduler), None)

    @property
    def ratio(self) -> float | None:
        """koord-scheduler's pods/s over kube-scheduler's (both complete)."""
        koord, kube = self.result(KOORD), self.result(KUBE)
        if koord is None or kube is None or not koord.complete or not kube.complete:
            return None
        return koord.pods_per_second / kube.pods_per_second if kube.pods_per_second else None


@dataclass
class ShapesReport:
    nodes: int
    shapes: list[ShapeResult] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "shapes": [{**dataclasses.asdict(s), "ratio": s.ratio} for s in self.shapes],
            "phases": self.phases,
            "errors": self.errors,
        }


async def _label_single_zone(api: Api, node_names: list[str], concurrency: int) -> None:
    async def relabel(name: str) -> None:
        await request_json(
            api.client,
            "PATCH",
            f"/api/v1/nodes/{name}",
            what=f"relabel node {name}",
            body={"metadata": {"labels": {ZONE: SINGLE_ZONE}}},
            content_type="application/merge-patch+json",
        )

    await run_all([functools.partial(relabel, n) for n in node_names], concurrency)


async def _delete_all_pods(api: Api, namespaces: list[str], within: float = 600.0) -> None:
    """Delete every pod of ``namespaces`` (grace 0) and wait until they are gone. A delete of tens
    of thousands of pods outlives the API server's request timeout (504): it is asked again."""
    deadline = time.monotonic() + within
    for namespace in namespaces:
        path = pods_path({"metadata": {"namespace": namespace}})
        while (await api.list(path))[0]:
            if time.monotonic() > deadline:
                raise BenchError(f"{namespace}: pods still present {within:.0f}s after deleting them")
            try:
                await request_json(
                    api.client,
                    "DELETE",
                    path,
                    what=f"delete pods in {namespace}",
                    query=[("gracePeriodSeconds", "0")],
                    body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
                    seconds=120,
                )
            except BackendError as exc:
                if exc.status != 504:
                    raise
                log_progress(f"delete pods in {namespace}: {exc}; asking again")


async def _run_shape(
    api: Api, cp: ControlPlane, opts: ShapeOptions, shape: Shape, node_names: list[str]
) -> ShapeResult:
    init = init_pods(shape, node_names, list(NAMESPACES.values()))
    result = ShapeResult(shape.name, len(init), shape.counts(opts.nodes)[1])
    await create_all(api, pods_path, init, f"{shape.name} init pods (bound)", opts.concurrency)
    for scheduler, namespace in NAMESPACES.items():
        pods = measured_pods(shape, opts.nodes, namespace, SCHEDULER_NAMES[scheduler])
        await create_all(api, pods_path, pods, f"{shape.name} pods {namespace}", opts.concurrency)
    run_opts = opts.throughput(result.measured_pods)
    for scheduler, namespace in NAMESPACES.items():
        config = cp.state_dir / f"{scheduler}-affinity.yaml"
        config.write_text(scheduler_config(run_opts, cp.kubeconfig, SCHEDULER_NAMES[scheduler]))
        port = free_port()
        if scheduler == KOORD:
            component = koord_scheduler(
                cp, kubeconfig=cp.kubeconfig, port=port, config=config, leader_elect=False
            )
            ready_url, metrics_url = f"http://127.0.0.1:{port}/readyz", f"http://127.0.0.1:{port}/metrics"
        else:
            component = kube_scheduler(cp, config, port)
            ready_url, metrics_url = f"https://127.0.0.1:{port}/readyz", None
        row = await measure_scheduler(
            api,
            cp,
            run_opts,
            scheduler=scheduler,
            component=component,
            ready_url=ready_url,
            namespace=namespace,
            metrics_url=metrics_url,
        )
        result.results.append(row)
        log_progress(f"{scheduler}: peak RSS {row.peak_rss_mib} MiB")
    return result


async def run_shapes(opts: ShapeOptions) -> ShapesReport:
    """Every shape of ``opts`` in ``SHAPES`` order; a failure lands in ``report.errors`` and the
    cluster is stopped in any case (unless ``opts.keep``)."""
    unknown = [s for s in opts.shapes if s not in SHAPES]
    if unknown:
        raise BenchError(f"unknown shapes: {', '.join(unknown)} (known: {', '.join(SHAPES)})")
    report = ShapesReport(nodes=opts.nodes)
    cp = ControlPlane(name=opts.cluster_name)
    nodes = description(opts.nodes, opts.cluster_name).nodes()
    node_names = [n["metadata"]["name"] for n in nodes]
    api: Api | None = None

    async def create_nodes(client: Api) -> None:
        await create_all(client, lambda _: "/api/v1/nodes", nodes, "nodes", opts.concurrency)
        await wait_nodes_schedulable(client, opts.nodes, opts.concurrency)
        for namespace in [INIT_NAMESPACE, *NAMESPACES.values()]:
            await create_namespace(client, namespace)

    try:
        api = await start_cluster(cp, create_nodes, connections=opts.concurrency, phases=report.phases)
        relabelled = False
        chosen = [n for n in SHAPES if n in opts.shapes]
        for i, name in enumerate(chosen):
            shape = SHAPES[name]
            with phase(report.phases, name):
                if shape.single_zone and not relabelled:
                    await _label_single_zone(api, node_names, opts.concurrency)
                    relabelled = True
                report.shapes.append(await _run_shape(api, cp, opts, shape, node_names))
                if i < len(chosen) - 1:  # after the last, the cluster is stopped (or kept) as it is
                    await _delete_all_pods(api, [INIT_NAMESPACE, *NAMESPACES.values()])
    except (Exception, asyncio.CancelledError) as exc:
        report.errors.append(f"{type(exc).__name__}: {exc}")
        log_progress(f"failed: {type(exc).__name__}: {exc}")
    finally:
        await stop_cluster(cp, api, phases=report.phases, keep=opts.keep)
    report.errors.extend(
        f"{s.shape} {r.scheduler}: {r.error}" for s in report.shapes for r in s.results if r.error
    )
    return report
