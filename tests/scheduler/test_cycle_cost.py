"""What one pod costs the running scheduler: each pod version is decoded once for every informer,
and plugins are timed in a sample of the cycles (kube-scheduler's ``metricsSamplePercent``) while
every extension point is timed in every cycle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from apis.client.backend import NODES, PODS
from apis.core import Pod
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend, copy_wire
from scheduler.cache.pod_info import PodInfo, decoding_once
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.framework.runtime import PLUGIN_METRICS_SAMPLE_PERCENT, MetricsSample
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

PODS_SCHEDULED = 30


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}},
    }


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
        },
    }


@pytest_asyncio.fixture(loop_scope="function")
async def app() -> AsyncIterator[tuple[MemoryBackend, SchedulerApp]]:
    """koord-scheduler with the default profile on the in-memory API server, three nodes."""
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    backend = MemoryBackend()
    for name in ("n0", "n1", "n2"):
        backend.apply(NODES, node(name))
    app = SchedulerApp(
        AppSettings(profiles=tuple(config.profiles)), backend, DEFAULT_REGISTRY, SchedulerMetrics()
    )
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        yield backend, app
    finally:
        stop.set()
        await task


async def all_bound(backend: MemoryBackend, count: int) -> None:
    for _ in range(500):
        if sum(1 for p in backend.list(PODS) if p.spec.node_name) == count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not every one of {count} pods was bound")


def sample_count(app: SchedulerApp, name: str, **labels: str) -> float:
    total = 0.0
    for family in app.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


async def test_plugins_are_timed_in_one_cycle_of_ten_and_extension_points_in_every_cycle(
    app: tuple[MemoryBackend, SchedulerApp],
) -> None:
    backend, scheduler = app
    for i in range(PODS_SCHEDULED):
        backend.apply(PODS, pod(f"p{i}"))
    await all_bound(backend, PODS_SCHEDULED)

    filter_points = sample_count(
        scheduler,
        "scheduler_framework_extension_point_duration_seconds_count",
        extension_point="Filter",
        profile="koord-scheduler",
    )
    fit_filters = sample_count(
        scheduler,
        "scheduler_plugin_execution_duration_seconds_count",
        plugin="NodeResourcesFit",
        extension_point="Filter",
    )
    assert filter_points == PODS_SCHEDULED
    assert fit_filters == PODS_SCHEDULED * PLUGIN_METRICS_SAMPLE_PERCENT // 100


def test_the_sample_takes_the_first_cycle_then_one_in_every_hundred_over_percent() -> None:
    sample = MetricsSample(10)
    taken = [sample.take() for _ in range(30)]
    assert [i for i, t in enumerate(taken) if t] == [0, 10, 20]
    assert all(MetricsSample(100).take() for _ in range(5))
    with pytest.raises(ValueError, match="sample percent"):
        MetricsSample(0)


async def test_one_pod_event_is_decoded_once_for_every_informer(
    app: tuple[MemoryBackend, SchedulerApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache's informer, Coscheduling's, ElasticQuota's, DeviceShare's, NodeNUMAResource's and
    Reservation's all read the pod: one decode per pod version serves them all, and the bound
    version is not decoded at all (its PodInfo is made from the assumed one, PodInfo.successor)."""
    backend, scheduler = app
    decoded: list[str] = []
    decode = PodInfo._decode

    def counting(pod: Pod) -> PodInfo:
        decoded.append(pod.metadata.resource_version or "")
        return decode(pod)

    monkeypatch.setattr(PodInfo, "_decode", staticmethod(counting))
    backend.apply(PODS, pod("once"))
    await all_bound(backend, 1)
    await asyncio.sleep(0.05)  # the bound version's event reaches every informer
    bound = backend.get(PODS, "default", "once")
    assert bound is not None
    assert bound.metadata.resource_version not in decoded
    assert len(decoded) == 1, f"a pod version was decoded more than once: {decoded}"
    counted = scheduler.cache.pod(bound.metadata.uid or "")
    assert counted is not None
    assert counted.pod is bound  # the bound version's event reached the cache's informer


def test_outside_an_event_each_call_decodes_and_inside_one_pod_object_is_decoded_once() -> None:
    obj = Pod.model_validate(pod("p"))
    assert PodInfo.of(obj) is not PodInfo.of(obj)
    with decoding_once():
        first = PodInfo.of(obj)
        assert PodInfo.of(obj) is first
        other = Pod.model_validate(pod("p"))
        assert PodInfo.of(other) is not first  # another object (another version) is decoded anew
    assert PodInfo.of(obj) is not first  # nothing outlives the event


def test_a_copied_wire_shares_nothing_mutable_with_the_original() -> None:
    wire = {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "c", "ports": [{"p": 1}]}]}}
    copied = copy_wire(wire)
    assert copied == wire
    copied["metadata"]["labels"]["a"] = "2"
    copied["spec"]["containers"][0]["ports"].append({"p": 2})
    assert wire == {
        "metadata": {"labels": {"a": "1"}},
        "spec": {"containers": [{"name": "c", "ports": [{"p": 1}]}]},
    }
