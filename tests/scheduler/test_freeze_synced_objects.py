"""koord-scheduler moves what its synced caches hold out of the cyclic collector's reach, so that
full collections stop walking every cached pod (``AppSettings.freeze_synced_objects``)."""

from __future__ import annotations

import asyncio
import gc

from apis.client.backend import NODES, PODS
from apis.gcpause import list_paused
from scheduler.__main__ import parse_args, settings_of
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY


async def test_each_terms_synced_caches_are_frozen() -> None:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    assert settings_of(config, parse_args([]).feature_gates).freeze_synced_objects
    backend = MemoryBackend()
    backend.apply(NODES, {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}})
    for i in range(50):
        backend.apply(
            PODS, {"metadata": {"name": f"p{i}", "namespace": "default"}, "spec": {"nodeName": "n0"}}
        )
    settings = AppSettings(profiles=tuple(config.profiles), freeze_synced_objects=True)
    gc.unfreeze()
    try:
        for _term in range(2):
            app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
            stop = asyncio.Event()
            task = asyncio.create_task(app.run(stop))
            await app.handlers.synced_pods.wait()  # after the term's start unfroze the last one's
            for _ in range(200):
                if gc.get_freeze_count():
                    break
                await asyncio.sleep(0.01)
            frozen = gc.get_freeze_count()
            assert frozen > 0
            assert app.cache.node_count() == 1
            # Frozen: the cache's objects are in no generation the collector walks.
            assert all(not any(o is app.cache for o in gen) for gen in (gc.get_objects(g) for g in range(3)))
            # And what is made since, once a full collection has seen it alive (the pods bound).
            for _ in range(200):
                if app.ready:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # past the sync
            since = SchedulerMetrics()
            gc.collect()
            assert all(not any(o is since for o in gen) for gen in (gc.get_objects(g) for g in range(3)))
            stop.set()
            await task
            after = SchedulerMetrics()
            gc.collect()  # the term is over: its freezer is gone
            assert any(o is after for o in gc.get_objects(2))
    finally:
        gc.unfreeze()


async def test_an_app_of_a_test_freezes_nothing() -> None:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    gc.unfreeze()
    app = SchedulerApp(
        AppSettings(profiles=tuple(config.profiles)), MemoryBackend(), DEFAULT_REGISTRY, SchedulerMetrics()
    )
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)
    assert gc.get_freeze_count() == 0
    stop.set()
    await task


async def test_the_first_lists_are_frozen_as_handled_and_later_ones_are_not() -> None:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    backend = MemoryBackend()
    backend.apply(NODES, {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}})
    settings = AppSettings(profiles=tuple(config.profiles), freeze_synced_objects=True)
    gc.unfreeze()
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        await app.handlers.synced_nodes.wait()
        # The node list's handling ended frozen, before the sync's own freeze.
        generations = [gc.get_objects(g) for g in range(3)]
        assert not any(o is app.cache for gen in generations for o in gen)
        await app.handlers.synced_pods.wait()
        for _ in range(200):
            if app.ready:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # past the sync
        with list_paused():  # a relist's bulk, after the sync
            relisted = SchedulerMetrics()
        generations = [gc.get_objects(g) for g in range(3)]
        assert any(o is relisted for gen in generations for o in gen)
    finally:
        stop.set()
        await task
        gc.unfreeze()
