"""One object never stops a watch, and readiness holds only while the watches run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apis.client.backend import NODES, EventType, ResourceType, WatchEvent
from apis.core import Node
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.cache import Cache, NodeInfo
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.events import EventHandlers
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.status import Status
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.queue.scheduling_queue import SchedulingQueue


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}}


class _BrokenCache(Cache):
    """Raises on one node while ``broken``, as a bug in the cache would."""

    broken = True

    def upsert_node(self, node: Node) -> NodeInfo:
        if node.metadata.name == "poison" and self.broken:
            raise OverflowError("Python int too large to convert to C long")
        return super().upsert_node(node)


def handlers(backend: MemoryBackend, cache: Cache) -> EventHandlers:
    queue = SchedulingQueue(
        sort_key=lambda p: (p.key,),
        pre_enqueue=lambda p: Status(),
        plugin_events=lambda name: ClusterEvent.ALL,
    )
    return EventHandlers(backend=backend, cache=cache, queue=queue, scheduler_names=("koord-scheduler",))


async def test_a_node_whose_handling_raises_is_skipped_and_the_watch_goes_on() -> None:
    backend = MemoryBackend()
    for name in ("a", "poison", "b"):
        backend.apply(NODES, node(name))
    h = handlers(backend, _BrokenCache())
    task = asyncio.create_task(h.run_nodes())
    await asyncio.wait_for(h.synced_nodes.wait(), timeout=1)
    assert sorted(h.cache.nodes) == ["a", "b"]
    backend.apply(NODES, node("c"))
    await asyncio.sleep(0.02)
    assert sorted(h.cache.nodes) == ["a", "b", "c"]
    cache = h.cache
    assert isinstance(cache, _BrokenCache)
    cache.broken = False
    backend.apply(NODES, node("poison"))  # the same object again: not mistaken for a heartbeat
    await asyncio.sleep(0.02)
    assert sorted(h.cache.nodes) == ["a", "b", "c", "poison"]
    assert not task.done()
    await backend.close()
    await task


async def test_readiness_ends_with_the_watch() -> None:
    backend = MemoryBackend()
    h = handlers(backend, Cache())
    nodes, pods = asyncio.create_task(h.run_nodes()), asyncio.create_task(h.run_pods())
    await asyncio.sleep(0.02)
    assert h.synced
    await backend.close()
    await asyncio.gather(nodes, pods)
    assert not h.synced


class _FailingNodeWatch(MemoryBackend):
    def watch(self, resource: ResourceType[Any], *, field_selector: str | None = None) -> AsyncIterator[Any]:
        if resource is NODES:
            return self._fail()
        return super().watch(resource, field_selector=field_selector)

    async def _fail(self) -> AsyncIterator[WatchEvent[Node]]:
        raise RuntimeError("the node watch broke before its first list")
        yield  # pragma: no cover


async def test_a_watch_that_fails_before_the_first_list_ends_the_run_instead_of_hanging() -> None:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    settings = AppSettings(profiles=tuple(config.profiles))
    app = SchedulerApp(settings, _FailingNodeWatch(), DEFAULT_REGISTRY, SchedulerMetrics())
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RuntimeError, match="before its first list"):
        await asyncio.wait_for(app.run(asyncio.Event()), timeout=3)
    assert loop.time() - started < 1.0  # at once, not when the timeout cancelled the hang
    assert not app.ready


async def test_a_change_of_a_nodes_load_thresholds_reaches_the_cache_and_a_heartbeat_does_not() -> None:
    """LoadAwareScheduling reads ``scheduling.koordinator.sh/usage-thresholds`` from the node."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n"))
    h = handlers(backend, Cache())
    task = asyncio.create_task(h.run_nodes())
    await asyncio.wait_for(h.synced_nodes.wait(), timeout=1)
    generation = h.cache.generation
    backend.apply(NODES, {**node("n"), "metadata": {"name": "n", "annotations": {"heartbeat": "1"}}})
    await asyncio.sleep(0.02)
    assert h.cache.generation == generation
    custom = {"scheduling.koordinator.sh/usage-thresholds": '{"usageThresholds": {"cpu": 30}}'}
    backend.apply(NODES, {**node("n"), "metadata": {"name": "n", "annotations": custom}})
    await asyncio.sleep(0.02)
    assert h.cache.generation > generation
    info = h.cache.nodes["n"].node
    assert info is not None
    assert (info.metadata.annotations or {}) == custom
    await backend.close()
    await task


async def test_an_image_pulled_on_a_node_reaches_the_cache() -> None:
    """ImageLocality scores by the images a node reports: a pull is no heartbeat."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n"))
    h = handlers(backend, Cache())
    task = asyncio.create_task(h.run_nodes())
    await asyncio.wait_for(h.synced_nodes.wait(), timeout=1)
    pulled = {
        **node("n"),
        "status": {**node("n")["status"], "images": [{"names": ["app:1"], "sizeBytes": 10}]},
    }
    backend.apply(NODES, pulled)
    await asyncio.sleep(0.02)
    assert h.cache.images.rows("app:1").tolist() == [h.cache.table.row["n"]]
    await backend.close()
    await task


async def test_a_vendors_node_lock_reaches_the_cache() -> None:
    """DeviceShare's DevicePluginAdaption reads the Cambricon lock from the node at PreBind."""
    backend = MemoryBackend()
    backend.apply(NODES, node("n"))
    h = handlers(backend, Cache())
    task = asyncio.create_task(h.run_nodes())
    await asyncio.wait_for(h.synced_nodes.wait(), timeout=1)
    locked = {"cambricon.com/dsmlu.lock": "2026-01-01T00:00:00Z,ai,p"}
    backend.apply(NODES, {**node("n"), "metadata": {"name": "n", "annotations": locked}})
    await asyncio.sleep(0.02)
    info = h.cache.nodes["n"].node
    assert info is not None
    assert (info.metadata.annotations or {}) == locked
    backend.apply(NODES, node("n"))  # the device plugin lifts it
    await asyncio.sleep(0.02)
    info = h.cache.nodes["n"].node
    assert info is not None
    assert not info.metadata.annotations
    await backend.close()
    await task


async def test_the_first_pod_lists_steps_name_each_plugins_informer_apart() -> None:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    app = SchedulerApp(
        AppSettings(profiles=tuple(config.profiles)), MemoryBackend(), DEFAULT_REGISTRY, SchedulerMetrics()
    )
    app.handlers.handle_pod_event(WatchEvent(EventType.REPLACED, objects=()))
    steps = set(app.handlers.startup.seconds)
    # Three plugins' pod informers are a class named PodHandler: each step says whose.
    handlers = {"elastic_quota.PodHandler", "device_share.PodHandler", "reservation.PodHandler"}
    assert {f"plugin handlers: {name}" for name in handlers} <= steps
    assert "plugin handlers: coscheduling.Coscheduling" in steps
