"""Scheduler throughput: koord-scheduler against the upstream kube-scheduler, same cluster, same run.

    python -m e2e.bench.scheduler_throughput [--nodes 1000] [--pods 10000] [--qps 1000 --burst 2000]
                                             [--skip-upstream] [--skip-simulate] [-o table|json]

Method
------

1. **Cluster.** A dedicated local cluster ``bench`` (``ControlPlane(name="bench")``: kube-apiserver,
   etcd, kube-controller-manager and KWOK, ``.cluster/bench/``) is started fresh, the CRDs are
   installed, and ``--nodes`` KWOK nodes are created from a cluster description (four node pools,
   one per zone label, 32 CPU / 128Gi / 110 pods each by default). The run waits until every node is
   Ready and carries no taint: the API server's admission taints new nodes
   ``node.kubernetes.io/not-ready``, and the harness lifts that taint itself from the nodes KWOK has
   marked Ready (kube-controller-manager does it at only ~5 nodes/s). The cluster is stopped at the
   end, also on errors or ^C; its logs are kept in ``.cluster/bench/cluster-logs/``.
2. **Workload.** ``--pods`` pods with mixed requests (cpu cycling 250m/500m/1/2, memory cycling
   256Mi/512Mi/768Mi/1Gi/2Gi, no limits) are created *pending* in namespace ``bench-koord``
   (``schedulerName: koord-scheduler``) and the same pods in ``bench-kube`` (``schedulerName:
   kube-bench``), both before any scheduler runs, so the cluster holds both workloads at once and
   creation never overlaps a measurement. Creation uses one kubernetes_asyncio client with
   ``--concurrency`` (32) requests in flight; progress goes to stderr. The nodes are sized for both
   workloads (the run refuses a size where they would not fit comfortably).
3. **koord-scheduler** runs as a real process (``e2e.components.koord_scheduler``, log in
   ``.cluster/bench/koord-scheduler.log``) with a KubeSchedulerConfiguration v1: no leader
   election, ``clientConnection.qps/burst`` from the flags, one profile ``koord-scheduler``. The
   clock starts when its ``/readyz`` answers 200 (informers synced: every node and every pending pod
   is in its cache), or at the first binding if that is seen earlier, and stops when the last pod of
   ``bench-koord`` is seen bound. Bindings are seen by a watch on the namespace held by this process
   (listed and watching before the scheduler starts); the time of a binding is when the harness
   receives the event that first shows ``spec.nodeName``. The scheduler is stopped afterwards.
4. **kube-scheduler** (``.bin/kube-scheduler``, built from the same Go modules as the API server)
   runs the same way on ``bench-kube``: ``--config`` with ``clientConnection.kubeconfig`` the
   cluster's kubeconfig, the same qps/burst, no leader election, one profile ``kube-bench`` with
   the default plugins, serving on a free port. Its clock starts at its ``/readyz`` (HTTPS, which
   includes the scheduler's informer-handler sync) or its first binding, whichever is earlier.
   Both schedulers run with their default ``percentageOfNodesToScore`` (adaptive) and parallelism.
5. **koordctl simulate**: ``scheduler.simulator.run.simulate`` (the same app and plugins on the
   in-memory backend) on the same node description and the same pods, in this process, after the
   cluster has been stopped; its clock covers submitting the pods to the last binding.

Figures: ``seconds`` is start of the clock to the last binding; ``pods/s`` = bound / seconds;
``sustained pods/s`` is the rate over the middle 80% of the bindings (from the 10th to the 90th
percentile binding), which leaves out the ramp-up and the tail. ``ratio`` is koord-scheduler's
pods/s over kube-scheduler's. ``startup s`` is process start to ready (not measured). ``cpu %`` is
each process's CPU time over the measured window as a share of one core (the machine's cores are
shared by every process of the cluster, the scheduler and the harness).

Targets (printed, never asserted): koord-scheduler at least as fast as kube-scheduler on the same
cluster in the same run (ratio >= 1.0), and at least 300 pods/s sustained at 5,000 nodes. The exit
code is 0 unless something failed to run (a process did not start, pods were left unbound).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from apis.core import Pod
from apis.quantity import Quantity
from e2e.cluster.__main__ import install_crds
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koord_scheduler
from e2e.scheduler_process import free_port
from scheduler.backend.base import BackendError, Conflict
from scheduler.backend.kubernetes import request_json
from scheduler.simulator.description import ClusterDescription, NodePool
from scheduler.simulator.run import simulate

__all__ = [
    "KOORD",
    "KUBE",
    "SIMULATE",
    "BenchError",
    "Options",
    "Report",
    "RunResult",
    "bench_description",
    "main",
    "render",
    "run_benchmark",
    "workload",
]

KOORD = "koord-scheduler"
KUBE = "kube-scheduler"
SIMULATE = "koordctl simulate"
KOORD_NAMESPACE = "bench-koord"
KUBE_NAMESPACE = "bench-kube"
KUBE_PROFILE = "kube-bench"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
CPU_SIZES = ("250m", "500m", "1", "2")
MEMORY_SIZES = ("256Mi", "512Mi", "768Mi", "1Gi", "2Gi")
ZONES = ("a", "b", "c", "d")
FILL_LIMIT = 0.8
"""Both workloads together may use at most this share of the cluster's cpu, memory and pod slots."""
TARGET_RATIO = 1.0
TARGET_SUSTAINED = 300.0
TARGET_NODES = 5000


class BenchError(RuntimeError):
    """The benchmark could not run as asked (sizes that do not fit, a scheduler that did not start)."""


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ---- what is measured -------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    nodes: int = 1000
    pods: int = 10000
    qps: float = 1000.0
    burst: int = 2000
    parallelism: int | None = None
    """KubeSchedulerConfiguration.parallelism of both schedulers; None: their default (16)."""
    skip_upstream: bool = False
    skip_simulate: bool = False
    cluster_name: str = "bench"
    concurrency: int = 32
    """Create requests in flight while creating nodes and pods."""
    node_cpu: str = "32"
    node_memory: str = "128Gi"
    node_pods: int = 110
    ready_timeout: float = 600.0
    """Seconds a scheduler may take from process start to ready."""
    stall_timeout: float = 120.0
    """Seconds without a new binding after which a run is given up (its pods left unbound)."""
    keep: bool = False
    """Leave the cluster running at the end (for looking around)."""


@dataclass
class RunResult:
    scheduler: str
    nodes: int
    pods: int
    bound: int = 0
    seconds: float = 0.0
    pods_per_second: float = 0.0
    sustained_pods_per_second: float | None = None
    startup_seconds: float | None = None
    clock_started_at: str = ""
    """What started the clock: ``readyz``, ``first binding`` or ``pods submitted`` (simulate)."""
    cpu_percent: dict[str, float] = field(default_factory=dict)
    log: str = ""
    error: str = ""

    @property
    def complete(self) -> bool:
        return not self.error and self.bound >= self.pods


@dataclass
class Report:
    nodes: int
    pods: int
    qps: float
    burst: int
    parallelism: int | None = None
    results: list[RunResult] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def result(self, scheduler: str) -> RunResult | None:
        return next((r for r in self.results if r.scheduler == scheduler), None)

    def _ratio(self, attr: str) -> float | None:
        koord, kube = self.result(KOORD), self.result(KUBE)
        if koord is None or kube is None or not koord.complete or not kube.complete:
            return None
        a, b = getattr(koord, attr), getattr(kube, attr)
        return a / b if a and b else None

    @property
    def ratio(self) -> float | None:
        """koord-scheduler's pods/s over kube-scheduler's."""
        return self._ratio("pods_per_second")

    @property
    def sustained_ratio(self) -> float | None:
        return self._ratio("sustained_pods_per_second")

    def targets(self) -> dict[str, bool | None]:
        koord = self.result(KOORD)
        sustained = koord.sustained_pods_per_second if koord is not None and koord.complete else None
        at_least = None if sustained is None else sustained >= TARGET_SUSTAINED
        return {
            "ratioAtLeast1": None if self.ratio is None else self.ratio >= TARGET_RATIO,
            "sustainedAtLeast300": at_least,
            "sustainedAtLeast300At5000Nodes": at_least if self.nodes >= TARGET_NODES else None,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "pods": self.pods,
            "qps": self.qps,
            "burst": self.burst,
            "parallelism": self.parallelism,
            "results": [asdict(r) for r in self.results],
            "ratio": self.ratio,
            "sustainedRatio": self.sustained_ratio,
            "targets": self.targets(),
            "phases": self.phases,
            "errors": self.errors,
        }


# ---- cluster and workload -----------------------------------------------------------------------


def bench_description(opts: Options) -> ClusterDescription:
    """``opts.nodes`` nodes in four pools (one per zone), ``bench-<zone>-<i>``."""
    pools = []
    for i, zone in enumerate(ZONES):
        count = opts.nodes // len(ZONES) + (1 if i < opts.nodes % len(ZONES) else 0)
        if count == 0:
            continue
        pools.append(
            NodePool(
                name=f"bench-{zone}",
                count=count,
                cpu=Quantity.parse(opts.node_cpu),
                memory=Quantity.parse(opts.node_memory),
                pods=opts.node_pods,
                labels={
                    "topology.kubernetes.io/zone": f"zone-{zone}",
                    "node.kubernetes.io/instance-type": "bench.8xlarge",
                },
            )
        )
    return ClusterDescription(name=opts.cluster_name, node_pools=pools)


def workload(namespace: str, scheduler_name: str, count: int) -> list[dict[str, Any]]:
    """``count`` pending pods ``bench-00000`` ... with cycling cpu and memory requests."""
    width = max(5, len(str(count - 1)))
    pods = []
    for i in range(count):
        requests = {"cpu": CPU_SIZES[i % len(CPU_SIZES)], "memory": MEMORY_SIZES[i % len(MEMORY_SIZES)]}
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"bench-{i:0{width}d}",
                    "namespace": namespace,
                    "labels": {"app": "bench"},
                },
                "spec": {
                    "schedulerName": scheduler_name,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": requests},
                        }
                    ],
                },
            }
        )
    return pods


def check_fits(opts: Options, workloads: int) -> None:
    """Refuse sizes where the workloads together would fill more than FILL_LIMIT of the cluster."""
    pods = workload("x", "x", opts.pods)
    cpu = sum(
        Quantity.parse(p["spec"]["containers"][0]["resources"]["requests"]["cpu"]).milli_value() for p in pods
    )
    memory = sum(
        Quantity.parse(p["spec"]["containers"][0]["resources"]["requests"]["memory"]).value() for p in pods
    )
    demand = {"cpu": cpu * workloads, "memory": memory * workloads, "pods": opts.pods * workloads}
    per_node = {
        "cpu": Quantity.parse(opts.node_cpu).milli_value(),
        "memory": Quantity.parse(opts.node_memory).value(),
        "pods": opts.node_pods,
    }
    for resource, needed in demand.items():
        fits = per_node[resource] * opts.nodes * FILL_LIMIT
        if needed > fits:
            minimum = math.ceil(needed / (per_node[resource] * FILL_LIMIT))
            raise BenchError(
                f"{workloads} x {opts.pods} pods need {resource} of at least {minimum} nodes "
                f"(at most {FILL_LIMIT:.0%} full); got --nodes {opts.nodes}"
            )


def scheduler_config(opts: Options, kubeconfig: Path, scheduler_name: str) -> str:
    """The KubeSchedulerConfiguration both schedulers run with, but for the profile's name."""
    parallelism = "" if opts.parallelism is None else f"parallelism: {opts.parallelism}\n"
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "leaderElection:\n"
        "  leaderElect: false\n"
        "clientConnection:\n"
        f"  kubeconfig: {kubeconfig}\n"
        f"  qps: {opts.qps:g}\n"
        f"  burst: {opts.burst}\n"
        f"{parallelism}"
        "profiles:\n"
        f"- schedulerName: {scheduler_name}\n"
    )


# ---- the API client -----------------------------------------------------------------------------


class Api:
    """A kubernetes_asyncio ApiClient used raw (JSON in, JSON out) for creating, listing, watching."""

    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    async def connect(cls, kubeconfig: Path, connections: int) -> Api:
        configuration = k8s_client.Configuration()
        await k8s_config.load_kube_config(
            config_file=str(kubeconfig), client_configuration=configuration, persist_config=False
        )
        configuration.connection_pool_maxsize = connections + 4
        client = k8s_client.ApiClient(configuration)
        client.user_agent = "koordinator-py-bench"
        return cls(client)

    async def close(self) -> None:
        await self.client.close()

    async def create(self, path: str, body: dict[str, Any]) -> None:
        """POST ``body``; an object that already exists counts as created; overload is retried."""
        for attempt in range(8):
            try:
                await request_json(self.client, "POST", path, what=f"create {path}", body=body, seconds=60)
                return
            except Conflict:
                return
            except BackendError as exc:
                if attempt == 7 or exc.status not in (None, 429, 500, 503, 504):
                    raise
                await asyncio.sleep(0.2 * 2**attempt)

    async def list(self, path: str) -> tuple[list[dict[str, Any]], str]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = [("limit", "500")] + ([("continue", token)] if token else [])
            page = await request_json(self.client, "GET", path, what=f"list {path}", query=query, seconds=120)
            items.extend(page.get("items") or [])
            metadata = page.get("metadata") or {}
            token = metadata.get("continue") or ""
            if not token:
                return items, str(metadata.get("resourceVersion", ""))

    async def watch_lines(self, path: str, resource_version: str) -> AsyncIterator[bytes]:
        """The raw lines of one watch from ``resource_version`` (bookmarks on; ends when the server
        closes it)."""
        query = [
            ("watch", "1"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "600"),
        ]
        response: aiohttp.ClientResponse = await self.client.call_api(
            path,
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=None),
        )
        async with response:
            if response.status != 200:
                text = (await response.read()).decode(errors="replace")
                raise BackendError(f"watch {path}: HTTP {response.status}: {text}", status=response.status)
            async for line in response.content:
                yield line


async def create_all(
    api: Api,
    path_of: Callable[[dict[str, Any]], str],
    objects: Sequence[dict[str, Any]],
    what: str,
    concurrency: int,
) -> None:
    """Create ``objects`` with ``concurrency`` requests in flight, reporting progress on stderr."""
    done = 0
    pending = iter(objects)
    began = time.monotonic()

    async def worker() -> None:
        nonlocal done
        for obj in pending:
            await api.create(path_of(obj), obj)
            done += 1

    async def report() -> None:
        while True:
            await asyncio.sleep(2)
            rate = done / (time.monotonic() - began)
            _progress(f"{what}: {done}/{len(objects)} created ({rate:.0f}/s)")

    reporter = asyncio.create_task(report())
    try:
        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
    elapsed = time.monotonic() - began
    _progress(f"{what}: {len(objects)} created in {elapsed:.1f}s ({len(objects) / max(elapsed, 1e-9):.0f}/s)")


async def wait_nodes_schedulable(api: Api, expected: int, concurrency: int, within: float = 900.0) -> None:
    """Until ``expected`` nodes are Ready and untainted.

    The API server's admission taints every new node ``node.kubernetes.io/not-ready:NoSchedule``;
    KWOK marks the nodes Ready within seconds, but kube-controller-manager's node lifecycle controller
    lifts the taint at only about 5 nodes/s (its client QPS is 20). So the harness lifts it itself
    from the nodes that are Ready and carry no other taint, as that controller would.
    """
    deadline = time.monotonic() + within
    while True:
        nodes, _ = await api.list("/api/v1/nodes")
        ready = [n for n in nodes if _node_ready(n)]
        schedulable = sum(1 for n in ready if not (n.get("spec") or {}).get("taints"))
        _progress(f"nodes: {len(ready)}/{expected} Ready, {schedulable}/{expected} untainted")
        if schedulable >= expected:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"only {schedulable}/{expected} nodes Ready and untainted after {within:.0f}s")
        tainted = [n for n in ready if _only_not_ready_taint(n)]
        if tainted:
            await _run_all([functools.partial(lift_not_ready, api, n) for n in tainted], concurrency)
        else:
            await asyncio.sleep(2)


def _only_not_ready_taint(node: dict[str, Any]) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return bool(taints) and all(t.get("key") == NOT_READY_TAINT for t in taints)


async def lift_not_ready(api: Api, node: dict[str, Any]) -> None:
    """Remove the ``not-ready`` taint from ``node`` and keep its other taints."""
    name = node["metadata"]["name"]
    kept = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != NOT_READY_TAINT]
    await request_json(
        api.client,
        "PATCH",
        f"/api/v1/nodes/{name}",
        what=f"untaint node {name}",
        body={"spec": {"taints": kept or None}},
        content_type="application/merge-patch+json",
    )


async def _run_all(calls: Sequence[Callable[[], Awaitable[None]]], concurrency: int) -> None:
    pending = iter(calls)

    async def worker() -> None:
        for call in pending:
            await call()

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))


def _node_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


# ---- watching bindings --------------------------------------------------------------------------


class BindWatcher:
    """Counts the pods of one namespace whose ``spec.nodeName`` is set, with the time each was first
    seen bound. ``start`` lists (pods bound already count at that moment) and keeps watching."""

    def __init__(self, api: Api, namespace: str, expected: int) -> None:
        self.api = api
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.expected = expected
        self.times: list[float] = []
        self.bound: set[str] = set()
        self.all_bound = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rv = ""

    async def start(self) -> None:
        await self._relist()
        self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _seen(self, name: str, at: float) -> None:
        if name not in self.bound:
            self.bound.add(name)
            self.times.append(at)
            if len(self.bound) >= self.expected:
                self.all_bound.set()

    async def _relist(self) -> None:
        items, self._rv = await self.api.list(self.path)
        now = time.monotonic()
        for pod in items:
            if (pod.get("spec") or {}).get("nodeName"):
                self._seen(pod["metadata"]["name"], now)

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                async for line in self.api.watch_lines(self.path, self._rv):
                    failures = 0
                    # Only events that can carry a binding (or a resourceVersion to resume from) are
                    # decoded: the pods' creation events are skipped cheaply.
                    if b'"nodeName"' not in line and b'"BOOKMARK"' not in line and b'"ERROR"' not in line:
                        continue
                    at = time.monotonic()
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        if obj.get("code") == 410:
                            await self._relist()
                            break
                        raise BackendError(f"watch {self.path}: {obj.get('message')}", status=obj.get("code"))
                    self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
                    if event.get("type") in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
                        self._seen(obj["metadata"]["name"], at)
            except (aiohttp.ClientError, BackendError, TimeoutError) as exc:
                failures += 1
                _progress(f"watch {self.path} interrupted ({exc}); resuming")
                if isinstance(exc, BackendError) and exc.status == 410:
                    await self._relist()
                await asyncio.sleep(min(5.0, 0.2 * 2**failures))

    async def wait(self, stall_timeout: float, on_progress: Callable[[int], None]) -> None:
        """Until every expected pod is bound; BenchError after ``stall_timeout`` s without progress."""
        last_count, last_change = len(self.bound), time.monotonic()
        while not self.all_bound.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.all_bound.wait(), timeout=2.0)
            count = len(self.bound)
            on_progress(count)
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            elif time.monotonic() - last_change > stall_timeout:
                raise BenchError(
                    f"{self.path}: no new binding for {stall_timeout:.0f}s, {count}/{self.expected} bound"
                )


def sustained_rate(times: Sequence[float]) -> float | None:
    """Bindings per second between the 10th and the 90th percentile binding."""
    n = len(times)
    if n < 10:
        return None
    ordered = sorted(times)
    lo, hi = int(n * 0.1), math.ceil(n * 0.9) - 1
    span = ordered[hi] - ordered[lo]
    return (hi - lo) / span if span > 0 else None


# ---- processes ----------------------------------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of ``pid`` (all its threads) so far."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def cluster_pids(cp: ControlPlane) -> dict[str, int]:
    pids: dict[str, int] = {}
    pid_dir = cp.kwok_workdir / "clusters" / cp.name / "pids"
    for pid_file in sorted(pid_dir.glob("*.pid")) if pid_dir.exists() else []:
        with contextlib.suppress(ValueError, OSError):
            pids[pid_file.stem] = int(pid_file.read_text().strip())
    return pids


class CpuMeter:
    """CPU share of one core used by each process between ``start`` and ``stop``."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._began = 0.0
        self._before: dict[str, float] = {}

    def start(self) -> None:
        self._began = time.monotonic()
        self._before = {name: s for name, pid in self.pids.items() if (s := cpu_seconds(pid)) is not None}

    def stop(self) -> dict[str, float]:
        elapsed = max(time.monotonic() - self._began, 1e-9)
        usage = {}
        for name, before in self._before.items():
            after = cpu_seconds(self.pids[name])
            if after is not None:
                usage[name] = round(100 * (after - before) / elapsed, 1)
        return usage


async def _http_ok(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url, ssl=False, timeout=aiohttp.ClientTimeout(total=2)) as response:
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError, OSError):
        return False


async def wait_ready(component: LocalComponent, url: str, within: float) -> float:
    """The monotonic time at which ``url`` first answered 200 (polled every 50ms)."""
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if component.pid() is None:
                raise BenchError(f"{component.name} exited:\n{component.log_tail()}")
            if await _http_ok(session, url):
                return time.monotonic()
            await asyncio.sleep(0.05)
    raise BenchError(f"{component.name} was not ready in {within:.0f}s:\n{component.log_tail()}")


# ---- the runs -----------------------------------------------------------------------------------


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
    try:
        pid = component.pid()
        if pid is not None:
            pids = {scheduler: pid, **pids, "harness": os.getpid()}
        ready_at = await wait_ready(component, ready_url, opts.ready_timeout)
        meter = CpuMeter(pids)
        meter.start()
        result.startup_seconds = round(ready_at - started, 2)
        _progress(f"{scheduler}: ready {ready_at - started:.1f}s after start; measuring")
        first = watcher.times[0] if watcher.times else math.inf
        clock = min(ready_at, first)
        result.clock_started_at = "readyz" if ready_at <= first else "first binding"

        def progress(count: int) -> None:
            elapsed = time.monotonic() - clock
            _progress(
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
            result.seconds = round(max(times) - clock, 3)
            result.pods_per_second = round(result.bound / max(max(times) - clock, 1e-9), 1)
            sustained = sustained_rate(times)
            result.sustained_pods_per_second = None if sustained is None else round(sustained, 1)
        if metrics_url is not None:
            await _save_metrics(metrics_url, cp.state_dir / f"{component.name}-metrics.txt")
    finally:
        component.stop()
        await watcher.close()
    _progress(
        f"{scheduler}: {result.bound}/{opts.pods} bound in {result.seconds:.1f}s "
        f"({result.pods_per_second:.0f} pods/s, sustained {result.sustained_pods_per_second or 0:.0f})"
    )
    return result


async def _save_metrics(url: str, path: Path) -> None:
    """Keep the scheduler's /metrics at the end of its run, for looking into where its time went."""
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as r,
        ):
            data = await r.read()
        await asyncio.to_thread(path.write_bytes, data)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        _progress(f"could not save {url}: {exc}")


def kube_scheduler(cp: ControlPlane, config: Path, port: int) -> LocalComponent:
    return LocalComponent(
        name=KUBE,
        argv=(
            cp.tool("kube-scheduler"),
            f"--config={config}",
            f"--authentication-kubeconfig={cp.kubeconfig}",
            f"--authorization-kubeconfig={cp.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={cp.state_dir / 'kube-scheduler-certs'}",
        ),
        cluster=cp,
    )


async def measure_simulate(
    description: ClusterDescription, pods: Sequence[dict[str, Any]], config_text: str, opts: Options
) -> RunResult:
    models = [Pod.model_validate(p) for p in pods]
    meter = CpuMeter({"harness (simulate)": os.getpid()})
    meter.start()
    simulated = await simulate(description, models, config_text=config_text)
    result = RunResult(
        scheduler=SIMULATE,
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
    _progress(f"{SIMULATE}: {result.bound}/{opts.pods} bound in {result.seconds:.1f}s")
    return result


@contextlib.contextmanager
def phase(phases: dict[str, float], name: str, progress: Callable[[str], None] = _progress) -> Iterator[None]:
    """Time one phase of a benchmark run into ``phases`` and say when it starts and ends."""
    progress(f"phase {name} ...")
    began = time.monotonic()
    try:
        yield
    finally:
        phases[name] = round(time.monotonic() - began, 1)
        progress(f"phase {name}: {phases[name]:.1f}s")


async def run_benchmark(opts: Options) -> Report:
    """Run every phase; a failure is recorded in ``report.errors`` and the cluster is still stopped."""
    report = Report(
        nodes=opts.nodes, pods=opts.pods, qps=opts.qps, burst=opts.burst, parallelism=opts.parallelism
    )
    check_fits(opts, 1 if opts.skip_upstream else 2)
    description = bench_description(opts)
    koord_pods = workload(KOORD_NAMESPACE, KOORD, opts.pods)
    cp = ControlPlane(name=opts.cluster_name)
    config_text = scheduler_config(opts, cp.kubeconfig, KOORD)
    api: Api | None = None
    try:
        with phase(report.phases, "cluster start"):
            cp.stop(quiet=True)
            cp.start()
            install_crds(cp)
        api = await Api.connect(cp.kubeconfig, opts.concurrency)
        with phase(report.phases, "create nodes"):
            await create_all(api, lambda _: "/api/v1/nodes", description.nodes(), "nodes", opts.concurrency)
            await wait_nodes_schedulable(api, opts.nodes, opts.concurrency)
        namespaces = [KOORD_NAMESPACE] + ([] if opts.skip_upstream else [KUBE_NAMESPACE])
        with phase(report.phases, "create pods"):
            for namespace in namespaces:
                body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                await api.create("/api/v1/namespaces", body)
            await create_all(api, _pods_path, koord_pods, f"pods {KOORD_NAMESPACE}", opts.concurrency)
            if not opts.skip_upstream:
                kube_pods = workload(KUBE_NAMESPACE, KUBE_PROFILE, opts.pods)
                await create_all(api, _pods_path, kube_pods, f"pods {KUBE_NAMESPACE}", opts.concurrency)
        with phase(report.phases, KOORD):
            config = cp.state_dir / "koord-scheduler-bench.yaml"
            config.write_text(config_text)
            port = free_port()
            component = koord_scheduler(
                cp, kubeconfig=cp.kubeconfig, port=port, config=config, leader_elect=False
            )
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
        _progress(f"failed: {type(exc).__name__}: {exc}")
    finally:
        if api is not None:
            await api.close()
        if not opts.keep:
            with phase(report.phases, "cluster stop"):
                _keep_cluster_logs(cp)
                cp.stop()
    if not opts.skip_simulate:
        with phase(report.phases, "simulate"):
            try:
                report.results.append(await measure_simulate(description, koord_pods, config_text, opts))
            except Exception as exc:
                report.errors.append(f"simulate: {type(exc).__name__}: {exc}")
    report.errors.extend(f"{r.scheduler}: {r.error}" for r in report.results if r.error)
    return report


def _keep_cluster_logs(cp: ControlPlane) -> None:
    """Copy the control plane's logs to ``.cluster/<name>/cluster-logs/`` (stopping deletes them)."""
    logs = cp.kwok_workdir / "clusters" / cp.name / "logs"
    if logs.exists():
        target = cp.state_dir / "cluster-logs"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(logs, target)


def _pods_path(pod: dict[str, Any]) -> str:
    return f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods"


# ---- output -------------------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _verdict(value: bool | None) -> str:
    return "n/a" if value is None else ("met" if value else "NOT met")


def render(report: Report, output: str = "table") -> str:
    if output == "json":
        return json.dumps(report.to_json(), indent=2)
    header = [
        "SCHEDULER",
        "NODES",
        "PODS",
        "BOUND",
        "SECONDS",
        "PODS/S",
        "SUSTAINED PODS/S",
        "STARTUP S",
        "CLOCK FROM",
    ]
    rows = [
        [
            r.scheduler,
            str(r.nodes),
            str(r.pods),
            str(r.bound),
            _fmt(r.seconds, 2),
            _fmt(r.pods_per_second),
            _fmt(r.sustained_pods_per_second),
            _fmt(r.startup_seconds),
            r.clock_started_at,
        ]
        for r in report.results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]
    ]
    lines.append("")
    parallelism = "default" if report.parallelism is None else str(report.parallelism)
    lines.append(f"client qps/burst: {report.qps:g}/{report.burst}, parallelism: {parallelism}")
    lines.append(
        f"ratio koord-scheduler/kube-scheduler: {_fmt(report.ratio, 2)} "
        f"(sustained: {_fmt(report.sustained_ratio, 2)})"
    )
    targets = report.targets()
    koord = report.result(KOORD)
    sustained = koord.sustained_pods_per_second if koord is not None else None
    verdict = _verdict(targets["ratioAtLeast1"])
    lines.append(f"target koord-scheduler >= kube-scheduler (ratio >= {TARGET_RATIO:g}): {verdict}")
    at_5000 = targets["sustainedAtLeast300At5000Nodes"]
    if at_5000 is None and targets["sustainedAtLeast300"] is not None:
        note = (
            f"n/a at {report.nodes} nodes (the target is set at {TARGET_NODES:,}); "
            f"{_fmt(sustained, 0)} pods/s here would have {_verdict(targets['sustainedAtLeast300'])} it"
        )
    else:
        note = f"{_verdict(at_5000)} ({_fmt(sustained, 0)} pods/s)"
    lines.append(f"target >= {TARGET_SUSTAINED:g} pods/s sustained at {TARGET_NODES:,} nodes: {note}")
    lines.append("")
    lines.append("phases: " + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in report.phases.items()))
    for r in report.results:
        if r.cpu_percent:
            usage = ", ".join(
                f"{name} {pct:.0f}%" for name, pct in sorted(r.cpu_percent.items(), key=lambda x: -x[1])
            )
            lines.append(f"cpu during {r.scheduler} (% of one core): {usage}")
    for error in report.errors:
        lines.append(f"ERROR: {error}")
    return "\n".join(lines)


# ---- command line -------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> tuple[Options, str]:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.scheduler_throughput", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000, help="pods per scheduler")
    parser.add_argument("--qps", type=float, default=1000.0, help="clientConnection.qps of both schedulers")
    parser.add_argument("--burst", type=int, default=2000, help="clientConnection.burst of both schedulers")
    parser.add_argument(
        "--parallelism", type=int, help="parallelism of both schedulers' configurations (default: theirs, 16)"
    )
    parser.add_argument("--skip-upstream", action="store_true", help="do not run kube-scheduler")
    parser.add_argument("--skip-simulate", action="store_true", help="do not run koordctl simulate")
    parser.add_argument("--concurrency", type=int, default=32, help="create requests in flight")
    parser.add_argument(
        "--stall-timeout", type=float, default=120.0, help="give up after s without a binding"
    )
    parser.add_argument("--cluster-name", default="bench")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 1:
        parser.error("--nodes and --pods must be positive")
    return Options(
        nodes=args.nodes,
        pods=args.pods,
        qps=args.qps,
        burst=args.burst,
        parallelism=args.parallelism,
        skip_upstream=args.skip_upstream,
        skip_simulate=args.skip_simulate,
        cluster_name=args.cluster_name,
        concurrency=args.concurrency,
        stall_timeout=args.stall_timeout,
        keep=args.keep,
    ), args.output


def main(argv: list[str] | None = None) -> int:
    opts, output = parse_args(argv)
    try:
        report = asyncio.run(run_benchmark(opts))
    except BenchError as exc:
        print(f"[bench] {exc}", file=sys.stderr)
        return 2
    print(render(report, output), flush=True)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
