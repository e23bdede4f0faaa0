"""Start-up: time to ready and peak RSS of koord-scheduler and kube-scheduler with a backlog.

    python -m e2e.bench.startup_time [--nodes 5000] [--pending 25000] [--bound 25000] [-o table|json]
                                     [--keep] [--reuse] [--cluster-name bench-startup]
                                     [--first koord|kube|random]

Method
------

1. **Cluster.** A dedicated local cluster (``bench-startup`` or ``--cluster-name``) with the
   throughput benchmark's nodes (``throughput_workload.bench_description``). Their readiness is
   not waited for: a scheduler lists every node whatever its state, and KWOK on a loaded 2-core
   machine takes half an hour to make 5,000 nodes Ready (and lets some fall back).
2. **Backlog.** ``--bound`` pods already on the nodes (``spec.nodeName`` set at creation,
   round-robin; namespace ``bench-startup-bound``) and ``--pending`` pods of the throughput
   workload left pending (namespace ``bench-startup``), all created before any scheduler runs.
   The pending pods name ``schedulerName: bench-startup``, the one profile of both schedulers'
   configurations (the throughput benchmark's, qps/burst included, no leader election), so each
   scheduler starts with the same backlog of its own.
3. **One scheduler at a time**, koord-scheduler first unless ``--first`` says otherwise
   (``random``: a coin per run; the order is printed), each as a real process: the clock runs from
   the process's start to the first 200 of its ``/readyz`` (koord-scheduler: nodes and pods listed,
   cache and queue built, every plugin informer synced; kube-scheduler: its informers synced and
   their handlers run). Its peak RSS (``VmHWM``) is read at that moment and the process is
   stopped at once, so the next one finds the same backlog (but for the few pods bound in the
   moment between /readyz and the stop). The CPU seconds the scheduler and the API server spent
   from the start to ready are read from ``/proc`` alongside.
4. **Bytecode.** The packages koord-scheduler imports are compiled to ``__pycache__`` before it
   starts, as the image compiles them at build time (``docs/image.md``): a checkout run with
   ``PYTHONDONTWRITEBYTECODE=1`` would otherwise compile about 300 modules at every start, which
   no deployed scheduler does.
5. **Breakdown.** koord-scheduler's own start-up lines (``scheduler.startup_spans``): seconds from
   the process start to ``main`` (interpreter and imports), each list (and how much of it was
   decoding the objects), and each step of handling the first pod list (``pod info``: decoding
   the requests; ``plugin handlers: <plugin>.<class>``; ``cache and queue``).

Figures are printed, never asserted; the load average at the start is printed with them (other
work on the machine moves every figure). The exit code is 0 unless something failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from e2e.bench.harness import BenchError, log_progress, phase
from e2e.bench.kube_api import Api, create_all, create_namespace
from e2e.bench.kwok_cluster import start_cluster, stop_cluster
from e2e.bench.processes import (
    KOORD,
    KUBE,
    cluster_pids,
    cpu_seconds,
    kube_scheduler,
    peak_rss_mib,
    settle,
    wait_ready,
)
from e2e.bench.throughput_model import Options as ThroughputOptions
from e2e.bench.throughput_workload import bench_description, pods_path, scheduler_config, workload
from e2e.cluster.controlplane import ControlPlane, repo_root
from e2e.components import LocalComponent, koord_scheduler
from e2e.scheduler_process import free_port

__all__ = [
    "PROFILE",
    "StartupOptions",
    "StartupReport",
    "StartupResult",
    "koord_breakdown",
    "main",
    "render",
    "run_benchmark",
]

PROFILE = "bench-startup"
"""The schedulerName of both schedulers' one profile, and of the pending pods."""
PENDING_NAMESPACE = "bench-startup"
BOUND_NAMESPACE = "bench-startup-bound"
First = Literal["koord", "kube", "random"]
FIRST_CHOICES = get_args(First)
KOORD_PACKAGES = ("apis", "scheduler")
"""What koord-scheduler imports of this checkout (compiled before it starts)."""


class StartupOptions(BaseModel, frozen=True):
    nodes: int = Field(default=200, ge=1)
    pending: int = Field(default=2000, ge=0)
    bound: int = Field(default=0, ge=0)
    qps: float = 1000.0
    burst: int = 2000
    cluster_name: str = "bench-startup"
    concurrency: int = 32
    """Create requests in flight while creating nodes and pods."""
    ready_timeout: float = 900.0
    skip_upstream: bool = False
    keep: bool = False
    first: First = "koord"
    """Which scheduler runs first; ``random``: a coin per run. The second one lists from an API
    server that has just served the first one's lists, and may find it warmer or still busy."""
    reuse: bool = False
    """Measure on the cluster of that name left running (``keep``) by an earlier run: only what
    it lacks is created, and it is left running (it took minutes to fill). Runs of two versions
    of the scheduler then share one backlog."""

    def throughput(self) -> ThroughputOptions:
        """The throughput benchmark's options for the same cluster shape and client settings."""
        return ThroughputOptions(
            nodes=self.nodes,
            pods=max(self.pending, 1),
            qps=self.qps,
            burst=self.burst,
            cluster_name=self.cluster_name,
        )

    @property
    def size(self) -> str:
        return f"{self.nodes} nodes / {self.pending} pending + {self.bound} bound pods"


class StartupResult(BaseModel):
    scheduler: str
    ready_seconds: float | None = None
    """Process start to the first 200 of /readyz."""
    peak_rss_mib: float | None = None
    """``VmHWM`` when ready."""
    cpu_seconds: float | None = None
    """The scheduler's own CPU seconds (all threads) from its start to ready."""
    apiserver_cpu_seconds: float | None = None
    """kube-apiserver's CPU seconds over the same span."""
    breakdown: dict[str, float] = Field(default_factory=dict)
    """koord-scheduler's own start-up steps, in seconds (``koord_breakdown``)."""
    log: str = ""
    error: str = ""


class StartupReport(BaseModel):
    options: StartupOptions
    load_average: tuple[float, float, float]
    """At the start of the run."""
    order: list[str] = Field(default_factory=list)
    """The schedulers in the order they ran."""
    results: list[StartupResult] = Field(default_factory=list)
    phases: dict[str, float] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)

    def result(self, scheduler: str) -> StartupResult | None:
        return next((r for r in self.results if r.scheduler == scheduler), None)


def koord_breakdown(log_lines: Sequence[str]) -> dict[str, float]:
    """The start-up steps koord-scheduler logged (JSON lines with a ``startup`` or ``list`` field):
    ``imports`` (those before the first pod list is asked for), ``plugins, app and config`` (the
    rest, and the configuration, imported and loaded after), ``leader``, ``list <resource>`` and
    ``decode <resource>`` (part of the list), each step of the first pod list's handling, ``sync``
    (the app's start to synced) and ``ready after start`` (seconds since the process started, by
    its own clock); for a streamed list, when it was asked for (since the process started, by the
    log lines' times) and its body's first and last bytes (since it was asked for)."""
    steps: dict[str, float] = {}
    started: float | None = None
    """The process's start, by the log's clock (the imports line's time less its seconds)."""
    for line in log_lines:
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        listed = record.get("list")
        # The many empty lists of custom resources run concurrently and cost nothing to decode.
        if isinstance(listed, dict) and listed["objects"] and f"list {listed['resource']}" not in steps:
            steps[f"list {listed['resource']}"] = listed["seconds"]
            steps[f"decode {listed['resource']}"] = listed["decode_seconds"]
            if started is not None and listed.get("streamed"):
                began = _log_time(record) - listed["seconds"] - started
                asked = began - listed.get("asked_ahead_seconds", 0.0)
                steps[f"{listed['resource']} asked after start"] = round(asked, 3)
            for end in ("first", "last"):  # of the body, since the list was asked for (streamed)
                if listed.get(f"{end}_byte_seconds") is not None:
                    steps[f"{end} byte of {listed['resource']}"] = listed[f"{end}_byte_seconds"]
            if listed.get("pages_ahead"):  # a count, not seconds: pages handled before the list ended
                steps[f"pages of {listed['resource']} handled ahead"] = listed["pages_ahead"]
        startup = record.get("startup")
        if not isinstance(startup, dict):
            continue
        if "imports_seconds" in startup:
            steps["imports"] = startup["imports_seconds"]
            started = _log_time(record) - startup["imports_seconds"]
        if "imports_after_asking_seconds" in startup:  # the first pod list asked for meanwhile
            steps["plugins, app and config"] = startup["imports_after_asking_seconds"]
        if "leader_seconds" in startup:
            steps.setdefault("leader", startup["leader_seconds"])
        if "spans" in startup and "sync" not in steps:
            steps.update(startup["spans"])
            steps["sync"] = startup["sync_seconds"]
            if startup.get("since_process_start") is not None:
                steps["ready after start"] = startup["since_process_start"]
    return steps


def _log_time(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(record["time"]).replace("Z", "+00:00")).timestamp()


async def _missing(api: Api, path: str, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects of ``objects`` that ``path`` does not list yet (by name)."""
    present = {item["metadata"]["name"] for item in (await api.list(path))[0]}
    return [o for o in objects if o["metadata"]["name"] not in present]


def compile_bytecode(root: Path) -> None:
    """The packages koord-scheduler imports compiled to ``__pycache__``, as the image has them."""
    for package in KOORD_PACKAGES:
        if not compileall.compile_dir(root / package, quiet=1):
            raise BenchError(f"compiling {root / package} failed")


def _backlog(opts: StartupOptions, nodes: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pending = workload(PENDING_NAMESPACE, PROFILE, opts.pending)
    bound = workload(BOUND_NAMESPACE, PROFILE, opts.bound)
    for i, pod in enumerate(bound):
        pod["spec"]["nodeName"] = nodes[i % len(nodes)]
    return pending, bound


def _spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else round(after - before, 2)


async def _measure(
    component: LocalComponent, scheduler: str, ready_url: str, within: float, apiserver: int | None
) -> StartupResult:
    result = StartupResult(scheduler=scheduler, log=str(component.log_file))
    component.log_file.unlink(missing_ok=True)
    apiserver_before = cpu_seconds(apiserver) if apiserver is not None else None
    started = time.monotonic()
    component.start()
    pid = component.pid()
    try:
        ready_at = await wait_ready(component, ready_url, within)
        result.ready_seconds = round(ready_at - started, 2)
        if apiserver is not None:
            result.apiserver_cpu_seconds = _spent(apiserver_before, cpu_seconds(apiserver))
        if pid is not None:
            result.peak_rss_mib = peak_rss_mib(pid)
            result.cpu_seconds = cpu_seconds(pid)
    except BenchError as exc:
        result.error = str(exc)
    finally:
        component.stop()
    log_progress(f"{scheduler}: ready in {result.ready_seconds}s, peak RSS {result.peak_rss_mib} MiB")
    return result


async def run_benchmark(opts: StartupOptions) -> StartupReport:
    """Every phase; a failure is recorded in ``report.errors`` and the cluster is still stopped."""
    report = StartupReport(options=opts, load_average=os.getloadavg())
    description = bench_description(opts.throughput())
    names = [node["metadata"]["name"] for node in description.nodes()]
    pending, bound = _backlog(opts, names)
    cp = ControlPlane(name=opts.cluster_name)
    api: Api | None = None

    async def create_nodes(client: Api) -> None:
        nodes = await _missing(client, "/api/v1/nodes", description.nodes())
        await create_all(client, lambda _: "/api/v1/nodes", nodes, "nodes", opts.concurrency)

    try:
        if opts.reuse:
            api = await Api.connect(cp.kubeconfig, opts.concurrency)
            with phase(report.phases, "create nodes"):
                await create_nodes(api)
        else:
            api = await start_cluster(cp, create_nodes, connections=opts.concurrency, phases=report.phases)
        with phase(report.phases, "create pods"):
            for namespace, pods in ((BOUND_NAMESPACE, bound), (PENDING_NAMESPACE, pending)):
                await create_namespace(api, namespace)
                missing = await _missing(api, f"/api/v1/namespaces/{namespace}/pods", pods)
                await create_all(api, pods_path, missing, f"pods {namespace}", opts.concurrency)
        config_text = scheduler_config(opts.throughput(), cp.kubeconfig, PROFILE)
        with phase(report.phases, "compile bytecode"):
            compile_bytecode(repo_root())
        schedulers = [KOORD] if opts.skip_upstream else _order(opts.first)
        report.order = schedulers
        for scheduler in schedulers:
            with phase(report.phases, f"settle before {scheduler}"):
                # Each scheduler lists from an API server done with the creation and the other's list.
                await settle(cluster_pids(cp))
            apiserver = cluster_pids(cp).get("kube-apiserver")
            with phase(report.phases, scheduler):
                port = free_port()
                config = cp.state_dir / f"{scheduler}-startup.yaml"
                config.write_text(config_text)
                if scheduler == KOORD:
                    component = koord_scheduler(
                        cp, kubeconfig=cp.kubeconfig, port=port, config=config, leader_elect=False
                    )
                    url = f"http://127.0.0.1:{port}/readyz"
                else:
                    component = kube_scheduler(cp, config, port)
                    url = f"https://127.0.0.1:{port}/readyz"
                result = await _measure(component, scheduler, url, opts.ready_timeout, apiserver)
                if scheduler == KOORD:
                    result.breakdown = koord_breakdown(_lines(component.log_file))
                report.results.append(result)
    except (Exception, asyncio.CancelledError) as exc:
        report.errors.append(f"{type(exc).__name__}: {exc}")
        log_progress(f"failed: {type(exc).__name__}: {exc}")
    finally:
        await stop_cluster(cp, api, phases=report.phases, keep=opts.keep or opts.reuse)
    report.errors.extend(f"{r.scheduler}: {r.error}" for r in report.results if r.error)
    return report


def _order(first: First) -> list[str]:
    """Both schedulers, ``first`` first (``random``: a coin for this run)."""
    if first == "random":
        first = random.choice(("koord", "kube"))
    return [KOORD, KUBE] if first == "koord" else [KUBE, KOORD]


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def _value(value: float | None, unit: str) -> str:
    return "-" if value is None else f"{value:,.1f} {unit}"


def render(report: StartupReport, output: str = "table") -> str:
    if output == "json":
        return report.model_dump_json(indent=2)
    opts = report.options
    one, five, fifteen = report.load_average
    lines = [f"start-up at {opts.size}; load average {one:.2f} {five:.2f} {fifteen:.2f} at the start"]
    lines += [f"order: {', '.join(report.order)}", ""]
    lines.append(f"{'SCHEDULER':<16}{'READY':>12}{'PEAK RSS':>14}{'CPU':>10}{'APISERVER CPU':>16}")
    for r in report.results:
        lines.append(
            f"{r.scheduler:<16}{_value(r.ready_seconds, 's'):>12}{_value(r.peak_rss_mib, 'MiB'):>14}"
            f"{_value(r.cpu_seconds, 's'):>10}{_value(r.apiserver_cpu_seconds, 's'):>16}"
        )
    koord, kube = report.result(KOORD), report.result(KUBE)
    if koord and kube and koord.ready_seconds and kube.ready_seconds:
        lines.append(
            f"ready ratio koord/kube: {koord.ready_seconds / kube.ready_seconds:.2f} (target <= 1.5)"
        )
    if koord and kube and koord.peak_rss_mib and kube.peak_rss_mib:
        lines.append(
            f"peak RSS ratio koord/kube: {koord.peak_rss_mib / kube.peak_rss_mib:.2f} (target <= 1.0)"
        )
    if koord and koord.breakdown:
        lines.append("\nkoord-scheduler's start-up, by its own log (s; pages handled ahead: a count):")
        lines.extend(
            f"  {name:<40}{value:>8.0f}" if name.startswith("pages ") else f"  {name:<40}{value:>8.2f}"
            for name, value in koord.breakdown.items()
        )
    lines.extend(f"ERROR: {e}" for e in report.errors)
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> tuple[StartupOptions, str]:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.startup_time", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pending", type=int, default=2000, help="pending pods both schedulers start with")
    parser.add_argument("--bound", type=int, default=0, help="pods already on the nodes")
    parser.add_argument("--qps", type=float, default=1000.0)
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32, help="create requests in flight")
    parser.add_argument("--cluster-name", default="bench-startup")
    parser.add_argument("--skip-upstream", action="store_true", help="do not run kube-scheduler")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="measure on the running cluster --cluster-name (left by --keep); it stays running",
    )
    parser.add_argument(
        "--first",
        choices=FIRST_CHOICES,
        default="koord",
        help="which scheduler runs first (random: a coin per run)",
    )
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args(argv)
    opts = StartupOptions(
        nodes=args.nodes,
        pending=args.pending,
        bound=args.bound,
        qps=args.qps,
        burst=args.burst,
        concurrency=args.concurrency,
        cluster_name=args.cluster_name,
        skip_upstream=args.skip_upstream,
        keep=args.keep,
        reuse=args.reuse,
        first=args.first,
    )
    return opts, args.output


def main(argv: list[str] | None = None) -> int:
    opts, output = parse_args(argv)
    report = asyncio.run(run_benchmark(opts))
    print(render(report, output), flush=True)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
