"""koord-scheduler across terms of leadership, on the in-memory backend and Lease, in real (short) time.

A restarting API server answers 403 until its RBAC caches sync, which can outlast renewDeadline: the
leader then steps down. It must stop writing at once, stay up (not ready) and campaign again, and
schedule with a fresh app when it wins the Lease back; a standby that took the Lease meanwhile keeps
it, and the two never schedule at once.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import scheduler.__main__ as main_module
from apis.client.backend import NODES, PODS, BackendError, ClusterBackend
from apis.client.leader import InMemoryLeaseStore, LeaderElector, LeaseRecord
from apis.core import Pod
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

# renewDeadline 1s: a 403 outage of 2s outlasts it; leaseDuration 2s: a standby may take over 2s after
# it last saw a renewal.
LEASE, RENEW, RETRY = 2.0, 1.0, 0.2

CONFIG = f"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: {LEASE:g}s
  renewDeadline: {RENEW:g}s
  retryPeriod: {int(RETRY * 1000)}ms
  resourceName: koord-scheduler
  resourceNamespace: koordinator-system
"""


class ForbiddingStore:
    """One candidate's view of the shared Lease; ``forbidden`` answers 403 as a restarting API server
    does until its RBAC caches sync (kubernetes/kubernetes#121635)."""

    def __init__(self, inner: InMemoryLeaseStore) -> None:
        self.inner = inner
        self.forbidden = False

    def _check(self) -> None:
        if self.forbidden:
            raise BackendError('leases "koord-scheduler" is forbidden', status=403)

    async def get(self) -> LeaseRecord | None:
        self._check()
        return await self.inner.get()

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        return await self.inner.create(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        return await self.inner.update(record)

    def __str__(self) -> str:
        return "koordinator-system/koord-scheduler"


def node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {
        "metadata": {"name": name},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
        },
    }


def bound(backend: MemoryBackend) -> set[str]:
    return {p.metadata.name or "" for p in backend.list(PODS) if p.spec.node_name}


async def eventually(check: Callable[[], bool], what: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _ProcessBackend(MemoryBackend):
    """What ``KubernetesBackend.connect`` gives ``__main__``: the in-memory cluster, plus the
    ``api_client`` the Lease store is built on (unused: the store is replaced too)."""

    api_client: object = None


async def test_the_process_survives_a_403_outage_longer_than_renew_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real ``koord-scheduler`` main coroutine, on the in-memory cluster and Lease: it steps down,
    binds nothing while not leading and says so on /readyz, then leads again and binds what waited."""
    backend = _ProcessBackend()
    backend.apply(NODES, node("n0"))
    view = ForbiddingStore(InMemoryLeaseStore())

    async def connect(*args: Any, **kwargs: Any) -> _ProcessBackend:
        return backend

    monkeypatch.setattr(main_module.KubernetesBackend, "connect", connect)
    monkeypatch.setattr(main_module, "KubernetesLeaseStore", lambda *a, **k: view)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(CONFIG)
    port = free_port()
    args = main_module.parse_args(["--config", str(config_file), "--port", str(port)])
    process = asyncio.create_task(main_module.run(args, main_module.load(args)))

    async with aiohttp.ClientSession() as http:

        async def readyz() -> int:
            async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                return response.status

        async def metric(name: str) -> float:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
                text = await response.text()
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))

        try:
            await eventually(lambda: process.done() or view.inner.record is not None, "the lease")
            assert not process.done()
            backend.apply(PODS, pod("before"))
            await eventually(lambda: bound(backend) == {"before"}, "the leader to bind")
            assert await readyz() == 200

            view.forbidden = True  # the API server restarts: 403 for longer than renewDeadline
            await asyncio.sleep(RENEW + 2 * RETRY + 0.3)
            assert not process.done(), "koord-scheduler must not exit on losing the lease"
            assert await readyz() == 503, "not ready while not leading"
            backend.apply(PODS, pod("during"))
            await asyncio.sleep(1.0)
            assert bound(backend) == {"before"}, "nothing is bound while not leading"
            assert len(backend.bindings) == 1
            assert await readyz() == 503
            assert await metric("leader_election_master_status") == 0
            assert await metric("koord_scheduler_leadership_losses_total") == 1

            view.forbidden = False  # RBAC synced: the same process wins the lease again
            await eventually(lambda: bound(backend) == {"before", "during"}, "the pending pod bound")
            assert not process.done()
            assert await readyz() == 200
            assert await metric("leader_election_master_status") == 1
            backend.apply(PODS, pod("after"))
            await eventually(lambda: "after" in bound(backend), "a new pod bound")
            assert sorted(backend.bindings) == sorted(
                [("default/before", "n0"), ("default/during", "n0"), ("default/after", "n0")]
            )
        finally:
            process.cancel()
            await asyncio.gather(process, return_exceptions=True)


def build_on(metrics: SchedulerMetrics) -> Callable[[ClusterBackend], SchedulerApp]:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    return lambda backend: SchedulerApp(settings, backend, DEFAULT_REGISTRY, metrics)


class WriterView:
    """``ClusterBackend`` over the shared cluster that logs which candidate bound what, and when."""

    def __init__(self, inner: MemoryBackend, name: str, log: list[tuple[float, str, str]]) -> None:
        self._inner = inner
        self._name = name
        self._log = log

    def watch(self, resource: Any, *, field_selector: str | None = None) -> Any:
        return self._inner.watch(resource, field_selector=field_selector)

    async def bind(self, pod: Pod, node_name: str, *, annotations: Any = None) -> None:
        self._log.append((time.monotonic(), self._name, pod.metadata.name or ""))
        await self._inner.bind(pod, node_name, annotations=annotations)

    async def patch_pod(self, pod: Pod, patch: dict[str, Any]) -> None:
        await self._inner.patch_pod(pod, patch)

    async def patch_pod_status(self, pod: Pod, patch: dict[str, Any]) -> None:
        await self._inner.patch_pod_status(pod, patch)

    async def patch_custom(self, *args: Any, **kwargs: Any) -> None:
        await self._inner.patch_custom(*args, **kwargs)

    async def evict(self, pod: Pod, *, grace_period_seconds: int | None = None) -> None:
        await self._inner.evict(pod, grace_period_seconds=grace_period_seconds)

    async def delete_pod(self, pod: Pod) -> None:
        await self._inner.delete_pod(pod)

    async def record_event(self, event: Any) -> None:
        await self._inner.record_event(event)

    async def close(self) -> None:
        pass


async def test_a_standby_that_took_the_lease_keeps_it_and_the_two_never_schedule_at_once() -> None:
    from scheduler.elected import ElectedScheduler

    cluster = MemoryBackend()
    cluster.apply(NODES, node("n0"))
    shared = InMemoryLeaseStore()
    a_view = ForbiddingStore(shared)
    writes: list[tuple[float, str, str]] = []
    leading: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}

    def candidate(name: str, store: Any) -> ElectedScheduler:
        elector = LeaderElector(
            store, identity=name, lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY
        )
        metrics = SchedulerMetrics()
        return ElectedScheduler(build_on(metrics), WriterView(cluster, name, writes), metrics, elector)

    a, b = candidate("a", a_view), candidate("b", shared)
    stop = asyncio.Event()
    a_task = asyncio.create_task(a.run(stop))
    await eventually(lambda: a.ready, "a to lead")
    b_task = asyncio.create_task(b.run(stop))

    async def watch_leaders() -> None:
        since: dict[str, float | None] = {"a": None, "b": None}
        while True:
            for name, who in (("a", a), ("b", b)):
                start = since[name]
                if who.is_leader and start is None:
                    since[name] = time.monotonic()
                elif not who.is_leader and start is not None:
                    leading[name].append((start, time.monotonic()))
                    since[name] = None
            await asyncio.sleep(0.005)

    watcher = asyncio.create_task(watch_leaders())
    try:
        cluster.apply(PODS, pod("p0"))
        await eventually(lambda: bound(cluster) == {"p0"}, "a to bind")

        a_view.forbidden = True  # a cannot reach the Lease; b can, and takes it once it expires
        lost_at = time.monotonic()
        await eventually(lambda: b.ready, "b to take over", within=LEASE + 5)
        assert time.monotonic() - lost_at >= LEASE - RETRY  # not before the lease expired
        assert not a.is_leader
        assert not a.ready
        assert a.losses == 1
        assert not a_task.done()

        a_view.forbidden = False  # a can reach the Lease again, but b holds and renews it
        cluster.apply(PODS, pod("p1"))
        await eventually(lambda: "p1" in bound(cluster), "b to bind")
        await asyncio.sleep(LEASE + 1.0)
        assert b.is_leader, "the standby keeps the lease it renews"
        assert not a.is_leader
        assert shared.record is not None
        assert shared.record.holder_identity == "b"
        assert [name for _, name, pod_name in writes if pod_name == "p1"] == ["b"]
        assert not a_task.done()

        b_task.cancel()  # b shuts down and releases the lease: a leads again, with a fresh app
        await asyncio.gather(b_task, return_exceptions=True)
        await eventually(lambda: a.ready, "a to lead again")
        assert a.terms == 2
        cluster.apply(PODS, pod("p2"))
        await eventually(lambda: "p2" in bound(cluster), "a to bind again")
        assert [name for _, name, pod_name in writes if pod_name == "p2"] == ["a"]
    finally:
        stop.set()
        for task in (a_task, b_task, watcher):
            task.cancel()
        await asyncio.gather(a_task, b_task, watcher, return_exceptions=True)

    for when, name, pod_name in writes:  # every binding was written by the one leader of the time
        other = "b" if name == "a" else "a"
        assert not any(start <= when <= end for start, end in leading[other]), (when, name, pod_name)
    terms = sorted((start, end, name) for name, spans in leading.items() for start, end in spans)
    for (_, end, _), (start, _, _) in itertools.pairwise(terms):
        assert end <= start, terms  # never two leaders at once
