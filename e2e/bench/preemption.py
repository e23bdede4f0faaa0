"""Preemption: koord-scheduler's job-level preemption against kube-scheduler's pod-level preemption.

    python -m e2e.bench.preemption [--nodes 8] [--timeout 60] [--scenario v1.7 ...] [--repeat 3]
                                   [-o table|json]

Method
------

1. **Cluster.** A dedicated local cluster (``ControlPlane(name="bench-preempt")`` or
   ``--cluster-name``) is started fresh with the CRDs installed, and stopped at the end (also on
   errors; its logs are kept in ``.cluster/<name>/cluster-logs/``). The harness creates the
   PriorityClasses ``low`` (1000) and ``high`` (1000000) and two identical fleets of ``--nodes``
   KWOK nodes (4 CPU / 8Gi / 110 pods): ``bp-koord-<i>`` labelled and tainted
   ``bench-scheduler=koord:NoSchedule``, ``bp-kube-<i>`` labelled and tainted
   ``bench-scheduler=kube:NoSchedule``. Each scheduler's pods select and tolerate only their own
   fleet and live in their own namespace (``bench-preempt-koord``, ``bench-preempt-kube``).
2. **Schedulers.** Both run for the whole run, side by side: koord-scheduler as a process
   (``python -m scheduler``) with the throughput benchmark's configuration plus
   ``Coscheduling.args.enablePreemption: true``; kube-scheduler (``.bin/kube-scheduler``) with
   one profile ``kube-bench`` and its default plugins (DefaultPreemption on).
3. **Fillers.** For each scenario, the low-priority filler pods are created **bound**
   (``spec.nodeName``), so both fleets hold exactly the same layout; low-priority gangs get a
   PodGroup in koord-scheduler's namespace (kube-scheduler gets the same pods, labels included,
   without gang semantics). The harness waits until every filler is seen bound.
4. **The job.** Then the high-priority job is created: for koord-scheduler a PodGroup
   (``minMember`` = members) and its members labelled ``pod-group.scheduling.sigs.k8s.io``; for
   kube-scheduler the same pods as plain pods. The koord job runs first; after it, its
   scenario's pods are deleted and the kube job is created (one scheduler works at a time, so the
   timings are not shared with the other). Each job is watched until all its members are bound
   (then ``--settle`` more seconds, for evictions still in flight) or ``--timeout`` passes.
5. **Observed** by one watch per namespace held by the harness: a *victim* is a filler of the
   scenario that got a ``deletionTimestamp`` or was deleted during the job's window (KWOK deletes
   terminating pods at once). *Wasted* victims: all of them when the job never had all its
   members bound; otherwise those on nodes where no member ended up. *Time to run*: from the
   moment the job's pods were created to the last member seen bound ("never" past the timeout).
   *Gangs broken*: low-priority gangs with at least one member evicted.
6. **Repeats.** With ``--repeat N`` each scenario runs N times per scheduler, the two alternating
   (koord, kube, koord, ...), its pods deleted between runs. One job's time to run is a fraction of
   a second and moves with whatever else the machine does: one run on a busy machine gave
   koord-scheduler 0.77 s against kube-scheduler's 0.89 s, quiet ones 0.41 s against 0.18-0.22 s.
   The table gives each scheduler's run of median time to run (a job that never ran counts as the
   slowest), with the spread of the times beside it, and every figure's range where the runs
   disagree; the JSON keeps every run (``attempt``).

Scenarios (at 8 nodes): ``v1.7`` every node holds four 1-CPU low pods, job of 2 x 3 CPU/4Gi;
``cannot-fit`` the same fleet, job of 12 x 3 CPU (``nodes + 4``; one fits per node): nothing
should be evicted; ``gang-victims`` two slots of each node hold members of 4-member low gangs
(each gang across four nodes), two hold single pods; job of 2 x 3 CPU.

Figures are printed, never asserted; the exit code is 0 unless something failed to run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

from apis.client.backend import BackendError
from apis.client.kubernetes import request_json
from e2e.bench.harness import BenchError, phase
from e2e.bench.kube_api import Api, create_all, create_namespace
from e2e.bench.kwok_cluster import start_cluster, stop_cluster
from e2e.bench.nodes import wait_nodes_schedulable
from e2e.bench.processes import KOORD, KUBE, KUBE_PROFILE, kube_scheduler, wait_ready
from e2e.bench.throughput_model import Options as ThroughputOptions
from e2e.bench.throughput_workload import scheduler_config
from e2e.cluster.controlplane import ControlPlane
from e2e.components import LocalComponent, koord_scheduler
from e2e.scheduler_process import free_port

__all__ = [
    "KOORD",
    "KUBE",
    "SCENARIOS",
    "Options",
    "Report",
    "Row",
    "main",
    "render",
    "run_benchmark",
]

SCENARIOS = ("v1.7", "cannot-fit", "gang-victims")
NAMESPACES = {KOORD: "bench-preempt-koord", KUBE: "bench-preempt-kube"}
SCHEDULER_NAMES = {KOORD: KOORD, KUBE: KUBE_PROFILE}
FLEETS = {KOORD: "koord", KUBE: "kube"}
FLEET_LABEL = "bench-scheduler"
SCENARIO_LABEL = "bench-scenario"
ROLE_LABEL = "bench-role"
GANG_LABEL = "pod-group.scheduling.sigs.k8s.io"
LOW, HIGH = "low", "high"
PRIORITIES = {LOW: 1000, HIGH: 1000000}
NODE_CPU, NODE_MEMORY = "4", "8Gi"
SLOTS = 4
"""1-CPU filler pods per node (fills its 4 CPU)."""
GANG_SIZE = 4


def _progress(message: str) -> None:
    print(f"[bench-preempt] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Options:
    nodes: int = 8
    """Nodes per fleet (one fleet per scheduler)."""
    timeout: float = 60.0
    """Seconds a job may take from creation to all members bound before it counts as "never"."""
    settle: float = 3.0
    """Seconds watched after a job is all bound, for evictions still in flight."""
    scenarios: tuple[str, ...] = SCENARIOS
    cluster_name: str = "bench-preempt"
    ready_timeout: float = 300.0
    keep: bool = False
    repeat: int = 1
    """Runs of each scenario per scheduler (see "Repeats")."""


@dataclass
class Row:
    scenario: str
    scheduler: str
    nodes: int
    members: int
    bound: int = 0
    victims: int = 0
    wasted: int = 0
    seconds_to_run: float | None = None
    """Job pods created -> last member bound; None: not within the timeout."""
    gangs_broken: int | None = None
    """Low-priority gangs with at least one member evicted (gang-victims only)."""
    victim_jobs: int = 0
    """Jobs hit: every gang with a member evicted counts once, every other victim on its own."""
    fillers: int = 0
    victim_nodes: list[str] = field(default_factory=list)
    member_nodes: list[str] = field(default_factory=list)
    error: str = ""
    attempt: int = 0
    """Which run of the scenario with this scheduler (0 .. ``--repeat`` - 1)."""

    @property
    def started(self) -> bool:
        return self.bound >= self.members


@dataclass
class Report:
    nodes: int
    timeout: float
    rows: list[Row] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def runs(self, scenario: str, scheduler: str) -> list[Row]:
        """Every run of ``scenario`` with ``scheduler``, in order."""
        return [r for r in self.rows if (r.scenario, r.scheduler) == (scenario, scheduler)]

    def row(self, scenario: str, scheduler: str) -> Row | None:
        """The run of median time to run (the lower median of an even count; a job that never ran,
        or a run that failed, counts as the slowest)."""
        runs = sorted(self.runs(scenario, scheduler), key=_slowness)
        return runs[(len(runs) - 1) // 2] if runs else None

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "timeout": self.timeout,
            "rows": [{**asdict(r), "started": r.started} for r in self.rows],
            "phases": self.phases,
            "errors": self.errors,
        }


def _slowness(row: Row) -> tuple[int, float]:
    if row.error:
        return (2, 0.0)
    return (1, 0.0) if row.seconds_to_run is None else (0, row.seconds_to_run)


# ---- objects ------------------------------------------------------------------------------------


def _slug(scenario: str) -> str:
    return scenario.replace(".", "")


def node_name(scheduler: str, index: int) -> str:
    return f"bp-{FLEETS[scheduler]}-{index}"


def fleet(scheduler: str, count: int) -> list[dict[str, Any]]:
    fleet_value = FLEETS[scheduler]
    nodes = []
    for i in range(count):
        name = node_name(scheduler, i)
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "type": "kwok",
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        FLEET_LABEL: fleet_value,
                    },
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                },
                "spec": {"taints": [_fleet_taint(scheduler)]},
                "status": {
                    "allocatable": _capacity(),
                    "capacity": _capacity(),
                },
            }
        )
    return nodes


def _capacity() -> dict[str, str]:
    return {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": "110", "ephemeral-storage": "1Ti"}


def _fleet_taint(scheduler: str) -> dict[str, str]:
    return {"key": FLEET_LABEL, "value": FLEETS[scheduler], "effect": "NoSchedule"}


def pod(
    scheduler: str,
    scenario: str,
    name: str,
    *,
    cpu: str,
    memory: str,
    priority_class: str,
    role: str,
    node: str | None = None,
    gang: str | None = None,
) -> dict[str, Any]:
    labels = {SCENARIO_LABEL: _slug(scenario), ROLE_LABEL: role}
    if gang is not None:
        labels[GANG_LABEL] = gang
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAMES[scheduler],
        "priorityClassName": priority_class,
        "nodeSelector": {FLEET_LABEL: FLEETS[scheduler]},
        "tolerations": [{"operator": "Equal", **_fleet_taint(scheduler)}],
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACES[scheduler], "labels": labels},
        "spec": spec,
    }


def pod_group(scheduler: str, scenario: str, name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": NAMESPACES[scheduler],
            "labels": {SCENARIO_LABEL: _slug(scenario)},
        },
        "spec": {"minMember": size, "scheduleTimeoutSeconds": 600},
    }


def fillers(scheduler: str, scenario: str, nodes: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(PodGroups, bound low-priority pods) of ``scenario``: every node full of 1-CPU/1Gi pods.

    ``gang-victims``: slots 0 and 1 of every full group of four nodes hold members of two
    4-member gangs (gang ``2k + s`` has slot ``s`` of nodes ``4k..4k+3``); the rest are single pods.
    """
    slug = _slug(scenario)
    groups: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    for i in range(nodes):
        for slot in range(SLOTS):
            gang = None
            if scenario == "gang-victims" and slot < 2 and i < nodes - nodes % GANG_SIZE:
                gang = f"{slug}-gang-{2 * (i // GANG_SIZE) + slot}"
            pods.append(
                pod(
                    scheduler,
                    scenario,
                    f"{slug}-low-{i}-{slot}",
                    cpu="1",
                    memory="1Gi",
                    priority_class=LOW,
                    role="filler",
                    node=node_name(scheduler, i),
                    gang=gang,
                )
            )
    if scheduler == KOORD:
        gangs = sorted(
            {p["metadata"]["labels"][GANG_LABEL] for p in pods if GANG_LABEL in p["metadata"]["labels"]}
        )
        groups = [pod_group(scheduler, scenario, g, GANG_SIZE) for g in gangs]
    return groups, pods


def job_size(scenario: str, nodes: int) -> int:
    return nodes + 4 if scenario == "cannot-fit" else 2


def job(scheduler: str, scenario: str, nodes: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(PodGroup for koord-scheduler or nothing, the members): high priority, 3 CPU / 4Gi each."""
    slug, size = _slug(scenario), job_size(scenario, nodes)
    name = f"{slug}-job"
    gang = name if scheduler == KOORD else None
    members = [
        pod(
            scheduler,
            scenario,
            f"{name}-{i}",
            cpu="3",
            memory="4Gi",
            priority_class=HIGH,
            role="member",
            gang=gang,
        )
        for i in range(size)
    ]
    groups = [pod_group(scheduler, scenario, name, size)] if scheduler == KOORD else []
    return groups, members


# ---- watching -----------------------------------------------------------------------------------


@dataclass
class PodState:
    labels: dict[str, str]
    node: str = ""
    bound_at: float | None = None
    gone_at: float | None = None
    """First seen with a deletionTimestamp, or deleted."""
    deleted: bool = False


class PodWatcher:
    """Every pod of one namespace: where it is bound and when, when it started terminating."""

    def __init__(self, api: Api, namespace: str) -> None:
        self.api = api
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.pods: dict[str, PodState] = {}
        self.changed = asyncio.Event()
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

    def _observe(self, obj: dict[str, Any], deleted: bool, at: float) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        state = self.pods.get(name)
        if state is None or (state.deleted and not deleted):
            state = self.pods[name] = PodState(labels=dict(meta.get("labels") or {}))
        node = (obj.get("spec") or {}).get("nodeName") or ""
        if node and state.bound_at is None:
            state.node, state.bound_at = node, at
        if (deleted or meta.get("deletionTimestamp")) and state.gone_at is None:
            state.gone_at = at
        state.deleted = state.deleted or deleted
        self.changed.set()

    async def _relist(self) -> None:
        items, self._rv = await self.api.list(self.path)
        now = time.monotonic()
        names = set()
        for item in items:
            names.add(item["metadata"]["name"])
            self._observe(item, False, now)
        for name, state in self.pods.items():
            if name not in names and not state.deleted:
                state.deleted = True
                state.gone_at = state.gone_at or now

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                async for line in self.api.watch_lines(self.path, self._rv):
                    failures = 0
                    at = time.monotonic()
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    kind = event.get("type")
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            await self._relist()
                            break
                        raise BackendError(f"watch {self.path}: {obj.get('message')}", status=obj.get("code"))
                    self._rv = (obj.get("metadata") or {}).get("resourceVersion") or self._rv
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        self._observe(obj, kind == "DELETED", at)
            except (aiohttp.ClientError, BackendError, TimeoutError, ValueError) as exc:
                failures += 1
                _progress(f"watch {self.path} interrupted ({exc}); resuming")
                if isinstance(exc, BackendError) and exc.status == 410:
                    await self._relist()
                await asyncio.sleep(min(5.0, 0.2 * 2**failures))

    def select(self, scenario: str, role: str) -> dict[str, PodState]:
        slug = _slug(scenario)
        return {
            name: s
            for name, s in self.pods.items()
            if s.labels.get(SCENARIO_LABEL) == slug and s.labels.get(ROLE_LABEL) == role
        }

    async def until(self, condition: Callable[[], bool], within: float) -> bool:
        """Whether ``condition`` held before ``within`` seconds passed (checked on every event)."""
        deadline = time.monotonic() + within
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(left, 1.0))
        return True


# ---- cluster set-up -----------------------------------------------------------------------------


def koord_config(cp: ControlPlane) -> str:
    """The throughput benchmark's configuration, with job-level preemption on."""
    base = scheduler_config(ThroughputOptions(), cp.kubeconfig, KOORD)
    return base + (
        "  pluginConfig:\n"
        "  - name: Coscheduling\n"
        "    args:\n"
        "      apiVersion: kubescheduler.config.k8s.io/v1\n"
        "      kind: CoschedulingArgs\n"
        "      enablePreemption: true\n"
    )


async def _start(component: LocalComponent, url: str, within: float) -> None:
    component.log_file.unlink(missing_ok=True)
    began = time.monotonic()
    component.start()
    ready = await wait_ready(component, url, within)
    _progress(f"{component.name}: ready {ready - began:.1f}s after start")


# ---- one scenario -------------------------------------------------------------------------------


def _pods_path(obj: dict[str, Any]) -> str:
    return f"/api/v1/namespaces/{obj['metadata']['namespace']}/pods"


def _groups_path(obj: dict[str, Any]) -> str:
    return f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{obj['metadata']['namespace']}/podgroups"


async def _create(api: Api, groups: list[dict[str, Any]], pods: list[dict[str, Any]], what: str) -> None:
    if groups:
        await create_all(api, _groups_path, groups, f"{what} podgroups", 8)
    await create_all(api, _pods_path, pods, what, 16)


async def _clean(api: Api, watcher: PodWatcher, scheduler: str, scenario: str, within: float = 120.0) -> None:
    """Delete the scenario's pods (grace 0) and PodGroups; until the watch has seen every pod go."""
    namespace, slug = NAMESPACES[scheduler], _slug(scenario)
    query = [("labelSelector", f"{SCENARIO_LABEL}={slug}"), ("gracePeriodSeconds", "0")]
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    await request_json(
        api.client,
        "DELETE",
        f"/api/v1/namespaces/{namespace}/pods",
        what="delete pods",
        query=query,
        body=body,
    )
    if scheduler == KOORD:
        await request_json(
            api.client,
            "DELETE",
            f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{namespace}/podgroups",
            what="delete podgroups",
            query=query[:1],
        )

    def gone() -> bool:
        return all(s.deleted for s in watcher.pods.values() if s.labels.get(SCENARIO_LABEL) == slug)

    if not await watcher.until(gone, within):
        raise BenchError(f"{namespace}: pods of {scenario} still present {within:.0f}s after deleting them")


async def run_scenario(
    api: Api, watcher: PodWatcher, opts: Options, scheduler: str, scenario: str, attempt: int = 0
) -> Row:
    groups, low = fillers(scheduler, scenario, opts.nodes)
    job_groups, members = job(scheduler, scenario, opts.nodes)
    row = Row(
        scenario=scenario,
        scheduler=scheduler,
        nodes=opts.nodes,
        members=len(members),
        fillers=len(low),
        attempt=attempt,
    )
    await _create(api, groups, low, f"{scenario}/{scheduler} fillers")
    filler_names = {p["metadata"]["name"] for p in low}

    def fillers_bound() -> bool:
        states = watcher.select(scenario, "filler")
        return len([n for n in filler_names if n in states and states[n].bound_at is not None]) == len(
            filler_names
        )

    if not await watcher.until(fillers_bound, 120.0):
        raise BenchError(f"{scenario}/{scheduler}: fillers not all bound after 120s")
    began = time.monotonic()
    await _create(api, job_groups, members, f"{scenario}/{scheduler} job")
    member_names = {p["metadata"]["name"] for p in members}

    def members_bound() -> list[PodState]:
        states = watcher.select(scenario, "member")
        return [states[n] for n in member_names if n in states and states[n].bound_at is not None]

    started = await watcher.until(lambda: len(members_bound()) == len(member_names), opts.timeout)
    if started:
        await asyncio.sleep(opts.settle)
    bound = members_bound()
    row.bound = len(bound)
    row.member_nodes = sorted(s.node for s in bound)
    if started:
        row.seconds_to_run = round(max(s.bound_at or began for s in bound) - began, 2)
    victims = [s for s in watcher.select(scenario, "filler").values() if s.gone_at is not None]
    row.victims = len(victims)
    row.victim_nodes = sorted(s.node for s in victims)
    row.wasted = len([s for s in victims if s.node not in row.member_nodes]) if started else len(victims)
    row.victim_jobs = len({s.labels.get(GANG_LABEL) or id(s) for s in victims})
    if scenario == "gang-victims":
        row.gangs_broken = len({s.labels[GANG_LABEL] for s in victims if GANG_LABEL in s.labels})
    when = "never" if row.seconds_to_run is None else f"{row.seconds_to_run:.1f}s"
    run = f" (run {attempt + 1}/{opts.repeat})" if opts.repeat > 1 else ""
    _progress(
        f"{scenario}/{scheduler}{run}: {row.bound}/{row.members} members bound, started {when}; "
        f"{row.victims} victims, {row.wasted} wasted"
    )
    return row


# ---- the run ------------------------------------------------------------------------------------


async def _set_up(api: Api, *, schedulers: list[str], nodes_per_fleet: int) -> None:
    """PriorityClasses, namespaces and both fleets, Ready and rid of the ``not-ready`` taint (their
    fleet taints stay)."""
    for klass, value in PRIORITIES.items():
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": klass},
            "value": value,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        await api.create("/apis/scheduling.k8s.io/v1/priorityclasses", body)
    for scheduler in schedulers:
        await create_namespace(api, NAMESPACES[scheduler])
    nodes = [n for s in schedulers for n in fleet(s, nodes_per_fleet)]
    await create_all(api, lambda _: "/api/v1/nodes", nodes, "nodes", 16)
    await wait_nodes_schedulable(api, nodes_per_fleet * len(schedulers), 8, within=90.0)


async def run_benchmark(opts: Options) -> Report:
    """Every scenario with both schedulers; failures go to ``report.errors``; the cluster is stopped."""
    if opts.nodes < 1:
        raise BenchError("--nodes must be positive")
    if opts.repeat < 1:
        raise BenchError("--repeat must be positive")
    unknown = [s for s in opts.scenarios if s not in SCENARIOS]
    if unknown:
        raise BenchError(f"unknown scenarios: {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    report = Report(nodes=opts.nodes, timeout=opts.timeout)
    cp = ControlPlane(name=opts.cluster_name)
    schedulers = [KOORD, KUBE]
    api: Api | None = None
    components: list[LocalComponent] = []
    watchers: dict[str, PodWatcher] = {}
    try:
        api = await start_cluster(
            cp,
            functools.partial(_set_up, schedulers=schedulers, nodes_per_fleet=opts.nodes),
            connections=16,
            phases=report.phases,
            nodes_phase="set-up",
            progress=_progress,
        )
        with phase(report.phases, progress=_progress, name="watch"):
            for scheduler in schedulers:
                watchers[scheduler] = PodWatcher(api, NAMESPACES[scheduler])
                await watchers[scheduler].start()
        with phase(report.phases, progress=_progress, name="schedulers start"):
            config = cp.state_dir / "koord-scheduler-preempt.yaml"
            config.write_text(koord_config(cp))
            port = free_port()
            koord = koord_scheduler(
                cp, kubeconfig=cp.kubeconfig, port=port, config=config, leader_elect=False
            )
            components.append(koord)
            await _start(koord, f"http://127.0.0.1:{port}/readyz", opts.ready_timeout)
            config = cp.state_dir / "kube-scheduler-preempt.yaml"
            config.write_text(scheduler_config(ThroughputOptions(), cp.kubeconfig, KUBE_PROFILE))
            port = free_port()
            kube = kube_scheduler(cp, config, port)
            components.append(kube)
            await _start(kube, f"https://127.0.0.1:{port}/readyz", opts.ready_timeout)
        for scenario in opts.scenarios:
            with phase(report.phases, progress=_progress, name=scenario):
                for attempt in range(opts.repeat):
                    for scheduler in schedulers:
                        await _run_and_clean(
                            api, watchers[scheduler], opts, report, scheduler, scenario, attempt
                        )
        for component in components:
            if component.pid() is None:
                report.errors.append(f"{component.name} exited during the run:\n{component.log_tail(10)}")
    except (Exception, asyncio.CancelledError) as exc:
        report.errors.append(f"{type(exc).__name__}: {exc}")
        _progress(f"failed: {type(exc).__name__}: {exc}")
    finally:
        for watcher in watchers.values():
            await watcher.close()
        for component in components:
            component.stop()
        await stop_cluster(cp, api, phases=report.phases, keep=opts.keep, progress=_progress)
    report.errors.extend(f"{r.scenario}/{r.scheduler}: {r.error}" for r in report.rows if r.error)
    return report


async def _run_and_clean(
    api: Api, watcher: PodWatcher, opts: Options, report: Report, scheduler: str, scenario: str, attempt: int
) -> None:
    """One run of ``scenario`` with ``scheduler`` into ``report`` (its failure as a row), then its
    pods deleted."""
    try:
        report.rows.append(await run_scenario(api, watcher, opts, scheduler, scenario, attempt))
    except (BenchError, BackendError) as exc:
        members = job_size(scenario, opts.nodes)
        report.rows.append(Row(scenario, scheduler, opts.nodes, members, error=str(exc), attempt=attempt))
        _progress(f"{scenario}/{scheduler} failed: {exc}")
    await _clean(api, watcher, scheduler, scenario)


# ---- output -------------------------------------------------------------------------------------


def render(report: Report, output: str = "table") -> str:
    if output == "json":
        return json.dumps(report.to_json(), indent=2)
    header = [
        "SCENARIO",
        "SCHEDULER",
        "NODES",
        "MEMBERS",
        "BOUND",
        "VICTIMS",
        "VICTIM JOBS",
        "WASTED",
        "GANGS BROKEN",
        "TIME TO RUN",
    ]
    rows = []
    for scenario, scheduler in dict.fromkeys((r.scenario, r.scheduler) for r in report.rows):
        runs, r = report.runs(scenario, scheduler), report.row(scenario, scheduler)
        assert r is not None
        rows.append(
            [
                r.scenario,
                r.scheduler,
                str(r.nodes),
                str(r.members),
                _spread(runs, "bound"),
                _spread(runs, "victims"),
                _spread(runs, "victim_jobs"),
                _spread(runs, "wasted"),
                "-" if r.gangs_broken is None else _spread(runs, "gangs_broken"),
                _time_to_run(r, runs),
            ]
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]
    ]
    lines.append("")
    lines.append(
        f"nodes per scheduler: {report.nodes} x {NODE_CPU} CPU/{NODE_MEMORY}; "
        f"job timeout {report.timeout:g}s; fillers bound with spec.nodeName"
    )
    repeats = max((r.attempt + 1 for r in report.rows), default=1)
    if repeats > 1:
        lines.append(
            f"{repeats} runs per scheduler and scenario: each row is the run of median time to run, "
            "with the times' range and every other figure's range where the runs disagree"
        )
    lines.append("phases: " + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in report.phases.items()))
    for error in report.errors:
        lines.append(f"ERROR: {error}")
    return "\n".join(lines)


def _seconds(row: Row) -> str:
    if row.error:
        return "error"
    return "never" if row.seconds_to_run is None else f"{row.seconds_to_run:.2f}s"


def _time_to_run(median: Row, runs: list[Row]) -> str:
    """The median run's time to run, and with several runs the fastest and the slowest."""
    if len(runs) == 1:
        return _seconds(median)
    ordered = sorted(runs, key=_slowness)
    return f"{_seconds(median)} ({_seconds(ordered[0])}-{_seconds(ordered[-1])} of {len(runs)})"


def _spread(runs: list[Row], name: str) -> str:
    """A count of the runs: one number where they agree, else its range (runs that failed left out)."""
    values = sorted({int(getattr(r, name)) for r in runs if not r.error and getattr(r, name) is not None})
    if not values:
        return "-"
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


# ---- command line -------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> tuple[Options, str]:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.bench.preemption", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--nodes", type=int, default=8, help="nodes per scheduler (4 CPU / 8Gi each)")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="s a job may take to have all members bound"
    )
    parser.add_argument("--settle", type=float, default=3.0, help="s watched after a job started")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="run only these (repeatable)")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each scenario per scheduler (the median is shown)"
    )
    parser.add_argument("--cluster-name", default="bench-preempt")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error("--nodes must be positive")
    if args.repeat < 1:
        parser.error("--repeat must be positive")
    return Options(
        nodes=args.nodes,
        timeout=args.timeout,
        settle=args.settle,
        scenarios=tuple(args.scenario or SCENARIOS),
        cluster_name=args.cluster_name,
        keep=args.keep,
        repeat=args.repeat,
    ), args.output


def main(argv: list[str] | None = None) -> int:
    opts, output = parse_args(argv)
    try:
        report = asyncio.run(run_benchmark(opts))
    except BenchError as exc:
        print(f"[bench-preempt] {exc}", file=sys.stderr)
        return 2
    print(render(report, output), flush=True)
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
