"""A gang group (``gang.scheduling.koordinator.sh/groups``) meets ElasticQuota as one job, on the
in-memory backend with the default profile: every gang of the group charged to the same quota is
summed at PreFilter, so the group is admitted or rejected as a whole."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest_asyncio

from apis.client.backend import ELASTICQUOTAS, NODES, PODGROUPS, PODS
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from tests.scheduler.test_gang_scheduling import bound, member, node, pod_group

GROUPS = {"gang.scheduling.koordinator.sh/groups": '["default/master", "default/worker"]'}


def team_quota(cpu: str) -> dict[str, object]:
    return {
        "metadata": {"name": "default", "namespace": "default"},
        "spec": {"min": {"cpu": cpu, "memory": "64Gi"}, "max": {"cpu": cpu, "memory": "64Gi"}},
    }


@pytest_asyncio.fixture(loop_scope="function")
async def cluster() -> AsyncIterator[MemoryBackend]:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    backend = MemoryBackend()
    for i in range(3):
        backend.apply(NODES, node(f"n{i}"))
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)
    yield backend
    stop.set()
    await task


async def until(condition: Callable[[], bool], seconds: float = 3.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


def submit_group(backend: MemoryBackend) -> None:
    """master (1 pod of 1 cpu) + worker (2 pods of 1 cpu): 3 cpu for the group."""
    backend.apply(PODGROUPS, pod_group("master", 1, GROUPS))
    backend.apply(PODGROUPS, pod_group("worker", 2, GROUPS))
    backend.apply(PODS, member("m0", group="master", cpu="1"))
    backend.apply(PODS, member("w0", group="worker", cpu="1"))
    backend.apply(PODS, member("w1", group="worker", cpu="1"))


async def test_a_gang_group_over_its_quota_is_rejected_as_one_job(cluster: MemoryBackend) -> None:
    """Each gang fits the 2-cpu quota alone (1 and 2 cpu); the group's 3 cpu does not. Koordinator
    checks the group: the master is refused too, with the group's sum, never admitted alone."""
    backend = cluster
    backend.apply(ELASTICQUOTAS, team_quota("2"))
    submit_group(backend)
    expected = (
        "quota default cpu used 0 + request 3 of gang group default/master,default/worker "
        "(3 pending members) > runtime 2"
    )
    await until(
        lambda: {e.regarding.name for e in backend.events if expected in e.message} >= {"m0", "w0", "w1"}
    )
    await asyncio.sleep(0.3)
    assert bound(backend) == {}
    master_messages = [e.message for e in backend.events if e.regarding.name == "m0"]
    assert all(expected in m for m in master_messages if "quota" in m), master_messages


async def test_a_gang_group_within_its_quota_binds_whole(cluster: MemoryBackend) -> None:
    backend = cluster
    backend.apply(ELASTICQUOTAS, team_quota("3"))
    submit_group(backend)
    await until(lambda: len(bound(backend)) == 3)
    assert sorted(bound(backend)) == ["m0", "w0", "w1"]
