"""The binder's latency metrics read as kube-scheduler's: the wait for a binding slot is not
binding latency (kube-scheduler binds every pod in a goroutine of its own)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from apis.client.backend import NODES, PODS
from apis.core import Pod
from scheduler.backend.memory import MemoryBackend
from scheduler.binder import Binder
from scheduler.cache.cache import Cache
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.explain import ExplanationStore
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.profile import ResolvedProfile
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Status
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.queue.scheduling_queue import QueuedPodInfo, SchedulingQueue


class Timer:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowBinds(MemoryBackend):
    """Each bind waits for ``release``, then takes one second of ``timer``."""

    def __init__(self, timer: Timer) -> None:
        super().__init__()
        self.timer = timer
        self.release = asyncio.Event()

    async def bind(self, pod: Pod, node_name: str, *, annotations: Mapping[str, str] | None = None) -> None:
        await self.release.wait()
        self.timer.now += 1.0
        await super().bind(pod, node_name, annotations=annotations)


async def test_binding_latency_leaves_out_the_wait_for_a_binding_slot() -> None:
    timer = Timer()
    backend = SlowBinds(timer)
    backend.apply(NODES, {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}})
    for name in ("a", "b"):
        backend.apply(PODS, {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": []}})
    cache = Cache()
    for node in backend.list(NODES):
        cache.upsert_node(node)
    fwk = Framework(
        ResolvedProfile("koord-scheduler", dict(DEFAULT_PLUGINS)),
        DEFAULT_REGISTRY,
        Handle(backend=backend, snapshot=lambda: Snapshot(cache)),
    )
    queue = SchedulingQueue(
        sort_key=fwk.queue_sort_key,
        pre_enqueue=lambda pod: Status.success(),
        plugin_events=lambda name: ClusterEvent.ALL,
    )
    metrics = SchedulerMetrics()
    binder = Binder(
        backend=backend,
        cache=cache,
        queue=queue,
        explanations=ExplanationStore(),
        parallelism=1,
        timer=timer,
        metrics=metrics,
    )
    for pod in backend.list(PODS):
        info = PodInfo.of(pod)
        cache.assume(info, "n0")
        binder.submit(fwk, fwk.cycle_state(), QueuedPodInfo(info), "n0")
    await asyncio.sleep(0.01)  # "a" holds the one slot, "b" waits for it
    assert len(backend.bindings) == 0
    backend.release.set()
    await binder.drain(grace_seconds=5.0)

    assert sorted(node for _, node in backend.bindings) == ["n0", "n0"]
    sample = metrics.registry.get_sample_value
    assert sample("scheduler_binding_duration_seconds_count", {"result": "scheduled"}) == 2.0
    # One second each: "b" waited a second for the slot, which is not binding latency.
    assert sample("scheduler_binding_duration_seconds_sum", {"result": "scheduled"}) == 2.0
