"""One run of the gang-interference benchmark: koord-scheduler in this process on the in-memory
backend (as ``koordctl simulate`` runs it), plain pods arriving as a stream at a fixed rate, and
each gang submitted right after a given plain pod. Every binding is timed where the backend performs
it, and every solver call where the scheduler reports it (``SchedulerMetrics.solver_solve``).

The plain pods arrive over time rather than all at once because the scheduling loop only yields
the event loop once its active queue is empty: a backlog submitted at once is scheduled to the end
before anything else in the process runs (the binder, the informers, a gang submitted meanwhile).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apis.client.backend import NODES, PODGROUPS, PODS, TOPOLOGIES
from apis.core import Pod
from e2e.bench import gang_interference_cluster as workload
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

__all__ = ["GangFigures", "RunFigures", "SolverCall", "merge", "run_once"]

TICK = 0.01
"""Seconds between two submissions of the plain pods that are due."""


class TimedBackend(MemoryBackend):
    """The in-memory cluster, noting when (``time.perf_counter``) each pod was bound."""

    def __init__(self) -> None:
        super().__init__()
        self.bound_at: dict[str, dict[str, float]] = {}
        """namespace -> pod name -> seconds."""

    async def bind(self, pod: Pod, node_name: str, *, annotations: Mapping[str, str] | None = None) -> None:
        await super().bind(pod, node_name, annotations=annotations)
        bound = self.bound_at.setdefault(pod.metadata.namespace or "default", {})
        bound[pod.metadata.name or ""] = time.perf_counter()


@dataclass(frozen=True)
class SolverCall:
    solver: str
    status: str
    seconds: float


class RecordingMetrics(SchedulerMetrics):
    """The scheduler's metrics, keeping every solver call and fallback (a list append is safe from
    a worker thread too)."""

    def __init__(self) -> None:
        super().__init__()
        self.solver_calls: list[SolverCall] = []
        self.fallbacks = 0

    def solver_solve(self, solver: str, status: str, seconds: float) -> None:
        super().solver_solve(solver, status, seconds)
        self.solver_calls.append(SolverCall(solver, status, round(seconds, 3)))

    def solver_fallback(self, solver: str, reason: str) -> None:
        super().solver_fallback(solver, reason)
        self.fallbacks += 1


@dataclass
class GangFigures:
    name: str
    members: int
    submitted_after: int
    """Plain pods submitted before the gang."""
    submitted_at: float = 0.0
    """Seconds after the stream began."""
    bound: int = 0
    seconds_to_bind: float | None = None
    """From submitting the gang to its last member bound."""


@dataclass
class RunFigures:
    run: str
    plain_pods: int
    rate: float
    """Plain pods per second the stream was to submit."""
    arrival_rate: float = 0.0
    """Plain pods per second it did submit (lower when the scheduler held the event loop)."""
    plain_bound: int = 0
    gang_members: int = 0
    gang_members_bound: int = 0
    seconds: float = 0.0
    """From the first plain pod submitted to the last binding."""
    plain_pods_per_second: float = 0.0
    """Plain pods bound over the time from the first submission to the last plain binding."""
    all_pods_per_second: float = 0.0
    longest_plain_gap: float = 0.0
    """The longest time without a plain-pod binding (the stream's start counts as one)."""
    longest_plain_gap_at: float = 0.0
    """When that gap began, in seconds after the stream began."""
    gangs: list[GangFigures] = field(default_factory=list)
    solver_calls: list[SolverCall] = field(default_factory=list)
    fallbacks: int = 0
    error: str = ""
    plain_bound_at: list[float] = field(default_factory=list, repr=False)
    """Every plain binding, in seconds after the stream began (sorted)."""

    @property
    def complete(self) -> bool:
        return (
            not self.error
            and self.plain_bound == self.plain_pods
            and self.gang_members_bound == self.gang_members
        )

    def gang_windows(self) -> list[tuple[float, float]]:
        """When gangs were being placed: each gang's submission to its last member bound, merged."""
        return merge(
            [(g.submitted_at, g.submitted_at + g.seconds_to_bind) for g in self.gangs if g.seconds_to_bind]
        )

    def plain_rate_within(self, windows: Sequence[tuple[float, float]]) -> float | None:
        """Plain pods bound per second inside ``windows`` (None when they last no time)."""
        length = sum(end - start for start, end in windows)
        if length <= 0:
            return None
        inside = sum(1 for t in self.plain_bound_at if any(start <= t <= end for start, end in windows))
        return round(inside / length, 1)

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in vars(self).items() if k != "plain_bound_at"}
        data["gangs"] = [vars(g) for g in self.gangs]
        data["solver_calls"] = [vars(c) for c in self.solver_calls]
        return data


def merge(windows: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping (start, end) windows joined, in order."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(windows):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


async def run_once(
    run: str,
    cluster: workload.Cluster,
    *,
    plain_pods: int,
    rate: float,
    gangs: int,
    gang_size: int,
    solver_time_limit_seconds: float,
    stall_timeout: float,
) -> RunFigures:
    """Stream ``plain_pods`` plain pods at ``rate`` per second, submitting gang ``k`` (of ``gangs``)
    right after plain pod ``(k + 1) * plain_pods // (gangs + 1)``; until every pod is bound or
    nothing was bound for ``stall_timeout`` seconds."""
    backend = TimedBackend()
    for node in cluster.nodes:
        backend.apply(NODES, node)
    for filler in cluster.fillers:
        backend.apply(PODS, filler)
    backend.apply(TOPOLOGIES, workload.topology())
    config = load_config(
        workload.scheduler_config(solver_time_limit_seconds), DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements
    )
    settings = AppSettings(
        profiles=tuple(config.profiles),
        parallelism=config.parallelism,
        pod_initial_backoff_seconds=0.01,  # as koordctl simulate: backoff changes no placement
        pod_max_backoff_seconds=0.05,
        percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
    )
    metrics = RecordingMetrics()
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, metrics)
    stop = asyncio.Event()
    runner = asyncio.create_task(app.run(stop), name="koord-scheduler")
    figures = RunFigures(run=run, plain_pods=plain_pods, rate=rate, gang_members=gangs * gang_size)
    started = time.perf_counter()
    try:
        while not app.ready:
            if runner.done():
                await runner  # raises what stopped it
                raise RuntimeError("the scheduler stopped before its caches synced")
            await asyncio.sleep(0.01)
        started = time.perf_counter()
        gang_after = {(k + 1) * plain_pods // (gangs + 1): k for k in range(gangs)}
        stream = asyncio.create_task(
            _stream(backend, figures, started, gang_after, gang_size), name="plain stream"
        )
        figures.error = await _wait_all_bound(backend, plain_pods + gangs * gang_size, stall_timeout, runner)
        stream.cancel()
    finally:
        stop.set()
        await runner
    _fill(figures, backend, started)
    figures.solver_calls = list(metrics.solver_calls)
    figures.fallbacks = metrics.fallbacks
    return figures


async def _stream(
    backend: TimedBackend, figures: RunFigures, started: float, gang_after: dict[int, int], gang_size: int
) -> None:
    """Submit the plain pods as they fall due at ``figures.rate``, each gang right after its pod."""
    plain = workload.plain_pods(figures.plain_pods)
    submitted = 0
    while True:
        due = min(len(plain), int((time.perf_counter() - started) * figures.rate) + 1)
        for pod in plain[submitted:due]:
            backend.apply(PODS, pod)
            submitted += 1
            if submitted in gang_after:
                _submit_gang(backend, figures, started, f"gang-{gang_after[submitted]}", gang_size, submitted)
        if submitted == len(plain):
            break
        await asyncio.sleep(TICK)
    figures.arrival_rate = round(len(plain) / max(time.perf_counter() - started, 1e-9), 1)


def _submit_gang(
    backend: TimedBackend, figures: RunFigures, started: float, name: str, size: int, after: int
) -> None:
    pod_group, members = workload.gang(name, size)
    figures.gangs.append(GangFigures(name, size, after, round(time.perf_counter() - started, 3)))
    backend.apply(PODGROUPS, pod_group)
    for member in members:
        backend.apply(PODS, member)


async def _wait_all_bound(
    backend: TimedBackend, expected: int, stall_timeout: float, runner: asyncio.Task[None]
) -> str:
    """Until ``expected`` pods are bound: "" then, or why not."""
    last_count, last_change = 0, time.perf_counter()
    while True:
        await asyncio.sleep(0.02)
        count = sum(len(b) for b in backend.bound_at.values())
        if count >= expected:
            return ""
        if runner.done():
            return f"the scheduler stopped with {count}/{expected} pods bound"
        if count != last_count:
            last_count, last_change = count, time.perf_counter()
        elif time.perf_counter() - last_change > stall_timeout:
            return f"no binding for {stall_timeout:.0f}s, {count}/{expected} pods bound"


def _fill(figures: RunFigures, backend: TimedBackend, started: float) -> None:
    plain = sorted(t - started for t in backend.bound_at.get(workload.PLAIN_NAMESPACE, {}).values())
    members = {name: t - started for name, t in backend.bound_at.get(workload.GANG_NAMESPACE, {}).items()}
    figures.plain_bound_at = [round(t, 4) for t in plain]
    figures.plain_bound = len(plain)
    figures.gang_members_bound = len(members)
    everything = plain + list(members.values())
    if everything:
        figures.seconds = round(max(everything), 3)
        figures.all_pods_per_second = round(len(everything) / max(figures.seconds, 1e-9), 1)
    if plain:
        figures.plain_pods_per_second = round(len(plain) / max(plain[-1], 1e-9), 1)
        gap, at = max((b - a, a) for a, b in itertools.pairwise([0.0, *plain]))
        figures.longest_plain_gap = round(gap, 3)
        figures.longest_plain_gap_at = round(at, 3)
    for gang in figures.gangs:
        times = [t for name, t in members.items() if name.startswith(f"{gang.name}-")]
        gang.bound = len(times)
        if gang.bound == gang.members:
            gang.seconds_to_bind = round(max(times) - gang.submitted_at, 3)
