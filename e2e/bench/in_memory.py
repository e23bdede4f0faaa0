"""The real scheduler on the in-memory backend, fed one pod at a time (the GPU replay benches).

``koordctl simulate`` runs the same app (``SchedulerApp`` on ``MemoryBackend``) but submits a whole
workload at once; a replay instead submits a pod, waits until the scheduler has bound it or given up
on it, and only then submits the next, so that every pod sees exactly the cluster its predecessors
left. A pod given up on is deleted (and the scheduler seen to forget it), never retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from dataclasses import dataclass

from apis.client.backend import DEVICES, PODS
from apis.core import Pod
from apis.scheduling.device import Device
from scheduler.app import SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.simulator.description import ClusterDescription
from scheduler.simulator.run import cluster_backend, memory_app

__all__ = ["InMemoryScheduler", "in_memory_scheduler"]

POLL_SECONDS = 0.0005


@dataclass
class InMemoryScheduler:
    app: SchedulerApp
    backend: MemoryBackend
    devices: list[Device]
    """The Device objects of the cluster, as applied."""

    async def outcome(self, namespace: str, name: str) -> Pod | None:
        """The pod once bound, or None once the scheduler has given up on it (nothing else to try)."""
        app, backend = self.app, self.backend
        while True:
            await asyncio.sleep(POLL_SECONDS)
            pod = backend.get(PODS, namespace, name)
            if pod is not None and pod.spec.node_name:
                return pod
            counts = app.queue.counts()
            if (
                counts.unschedulable
                and not counts.active
                and not counts.backoff
                and not app.binder.in_flight
                and app.explanations.get(namespace, name) is not None
            ):
                return None

    async def withdraw(self, namespace: str, name: str) -> None:
        """Delete a pod the scheduler gave up on, and wait until the scheduler has seen it go (so it
        is not taken for the next one)."""
        self.backend.delete(PODS, namespace, name)
        while True:
            if not self.app.queue.counts().unschedulable:
                return
            await asyncio.sleep(POLL_SECONDS)


@contextlib.asynccontextmanager
async def in_memory_scheduler(
    config_text: str, cluster: ClusterDescription
) -> AsyncIterator[InMemoryScheduler]:
    """The app running on ``cluster``'s nodes and Devices with the configuration ``config_text``,
    its caches synced; stopped on exit.

    The app keeps the cyclic collector as the ``koord-scheduler`` process does: what is alive at
    its sync, and what survives each full collection after it, is frozen (``AppSettings.
    freeze_synced_objects``). Without it a replay paid full collections over every pod bound so
    far, which the real process does not pay. Only where nothing else froze objects, so that
    unfreezing on exit hands back exactly what this app froze."""
    backend = cluster_backend(cluster)
    devices = backend.list(DEVICES)
    freezing = gc.get_freeze_count() == 0
    # One pod at a time, nothing else is waiting: a retry may come at once.
    app = memory_app(config_text, backend, backoff_seconds=(0.001, 0.001), freeze_synced_objects=freezing)
    stop = asyncio.Event()
    runner = asyncio.create_task(app.run(stop))
    try:
        await app.handlers.synced_nodes.wait()
        await app.handlers.synced_pods.wait()
        yield InMemoryScheduler(app, backend, devices)
    finally:
        stop.set()
        try:
            await runner
        finally:
            if freezing:
                gc.unfreeze()
