"""The replays' in-memory scheduler keeps the cyclic collector as the koord-scheduler process does
(``e2e.bench.in_memory``): what it holds is frozen while it runs, and handed back on exit."""

from __future__ import annotations

import gc

from apis.client.backend import PODS
from apis.core import Pod
from e2e.bench.in_memory import in_memory_scheduler
from scheduler.config import DEFAULT_CONFIG_YAML
from scheduler.simulator.description import ClusterDescription, NodePool


def _pod(name: str) -> Pod:
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {
                "schedulerName": "koord-scheduler",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
        }
    )


async def test_the_replays_scheduler_freezes_what_it_holds_and_thaws_it_on_exit() -> None:
    cluster = ClusterDescription(node_pools=[NodePool(name="pool", count=3)])
    gc.unfreeze()
    try:
        async with in_memory_scheduler(DEFAULT_CONFIG_YAML, cluster) as scheduler:
            scheduler.backend.apply(PODS, _pod("p"))
            bound = await scheduler.outcome("default", "p")
            assert bound is not None
            assert bound.spec.node_name
            assert gc.get_freeze_count() > 0
            # The app's cache is out of the collector's reach, as in koord-scheduler.
            assert not any(o is scheduler.app.cache for gen in range(3) for o in gc.get_objects(gen))
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


async def test_it_leaves_objects_frozen_by_someone_else_alone() -> None:
    cluster = ClusterDescription(node_pools=[NodePool(name="pool", count=2)])
    gc.unfreeze()
    sentinel = _pod("frozen-before")
    gc.freeze()
    try:
        async with in_memory_scheduler(DEFAULT_CONFIG_YAML, cluster) as scheduler:
            scheduler.backend.apply(PODS, _pod("p"))
            assert await scheduler.outcome("default", "p") is not None
            # Something else froze objects: the app freezes nothing of its own.
            assert any(o is scheduler.app.cache for gen in range(3) for o in gc.get_objects(gen))
        # And what was frozen before is frozen still.
        assert not any(o is sentinel for gen in range(3) for o in gc.get_objects(gen))
    finally:
        gc.unfreeze()
