"""Koordinator's shipped KubeSchedulerConfiguration (tests/data, verbatim) run by the scheduler process
on the in-memory backend: what SchedulingHint, DefaultPreemption and ElasticQuota's PostFilter do
there, through the loop, the framework and the eviction service."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio

from apis.client.backend import ELASTICQUOTAS, NODES, PDBS, PODS
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

SHIPPED = Path(__file__).parent.parent / "data" / "koordinator_scheduler_config.yaml"
HINT = "internal.scheduling.koordinator.sh/scheduling-hint"
QUOTA = "quota.scheduling.koordinator.sh/name"


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


def pod(
    name: str,
    *,
    cpu: str,
    priority: int = 0,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    metadata = {
        "name": name,
        "namespace": "default",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    return {"metadata": metadata, "spec": spec}


def hinted(name: str, hint: object, cpu: str = "1") -> dict[str, Any]:
    raw = hint if isinstance(hint, str) else json.dumps(hint)
    return pod(name, cpu=cpu, annotations={HINT: raw})


def bound(backend: MemoryBackend) -> dict[str, str]:
    return {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}


def names(backend: MemoryBackend) -> set[str]:
    return {p.metadata.name or "" for p in backend.list(PODS)}


async def until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out after 10 s")


@pytest_asyncio.fixture(loop_scope="function")
async def backend() -> AsyncIterator[MemoryBackend]:
    yield MemoryBackend()


async def start(backend: MemoryBackend) -> tuple[SchedulerApp, asyncio.Event, asyncio.Task[None]]:
    config = load_config(SHIPPED, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)
    return app, stop, task


def three_nodes(backend: MemoryBackend) -> None:
    """n0 empty; n1 and n2 half full, so that scoring alone would pick n0."""
    for name in ("n0", "n1", "n2"):
        backend.apply(NODES, node(name))
    backend.apply(PODS, pod("filler-1", cpu="2", node_name="n1"))
    backend.apply(PODS, pod("filler-2", cpu="2", node_name="n2"))


# ---- SchedulingHint ------------------------------------------------------------------------------


async def test_a_hints_node_names_confine_the_pod(backend: MemoryBackend) -> None:
    three_nodes(backend)
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, hinted("confined", {"nodeNames": ["n2"]}))
        backend.apply(PODS, pod("free", cpu="1"))
        await until(lambda: {"confined", "free"} <= set(bound(backend)))
        assert bound(backend)["confined"] == "n2"
        assert bound(backend)["free"] == "n0"
    finally:
        stop.set()
        await task


async def test_the_first_preferred_node_that_fits_is_taken_unscored(backend: MemoryBackend) -> None:
    three_nodes(backend)
    backend.apply(PODS, pod("filler-3", cpu="2", node_name="n2"))  # n2 full: preferred but no room
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, hinted("preferring", {"preferredNodeNames": ["n2", "n1", "n0"]}))
        await until(lambda: "preferring" in bound(backend))
        assert bound(backend)["preferring"] == "n1"
    finally:
        stop.set()
        await task


async def test_preferred_nodes_outside_the_node_names_are_not_tried(backend: MemoryBackend) -> None:
    three_nodes(backend)
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, hinted("both", {"nodeNames": ["n1", "n2"], "preferredNodeNames": ["n0", "n2"]}))
        await until(lambda: "both" in bound(backend))
        assert bound(backend)["both"] == "n2"
    finally:
        stop.set()
        await task


async def test_a_malformed_hint_leaves_the_pod_pending_with_an_event_saying_why(
    backend: MemoryBackend,
) -> None:
    three_nodes(backend)
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, hinted("broken", '{"nodeNames": "n1"'))
        backend.apply(PODS, pod("after", cpu="1"))
        await until(lambda: any("invalid scheduling hint" in e.message for e in backend.events))
        await until(lambda: "after" in bound(backend))
        assert "broken" not in bound(backend)
        event = next(e for e in backend.events if "invalid scheduling hint" in e.message)
        assert event.reason == "FailedScheduling"
        assert HINT in event.message
    finally:
        stop.set()
        await task


# ---- DefaultPreemption ---------------------------------------------------------------------------


async def test_a_high_priority_pod_preempts_the_cheapest_node_by_kube_schedulers_rules(
    backend: MemoryBackend,
) -> None:
    """n0's pods have priority 100, n1's 50: n1's are the cheaper victims (lowest highest priority);
    only as many as the pod needs go."""
    for name in ("n0", "n1"):
        backend.apply(NODES, node(name))
    for i in range(4):
        backend.apply(PODS, pod(f"a-{i}", cpu="1", priority=100, node_name="n0"))
        backend.apply(PODS, pod(f"b-{i}", cpu="1", priority=50 + i, node_name="n1"))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("high", cpu="2", priority=1000))
        await until(lambda: "high" in bound(backend))
        assert bound(backend)["high"] == "n1"
        assert names(backend) >= {f"a-{i}" for i in range(4)} | {"b-2", "b-3"}
        assert not {"b-0", "b-1"} & names(backend)  # the two least important of n1
        preempted = [e for e in backend.events if e.reason == "Preempted"]
        assert len(preempted) == 2
        assert all("default/high" in e.message for e in preempted)
    finally:
        stop.set()
        await task


async def test_preemption_avoids_violating_a_pod_disruption_budget(backend: MemoryBackend) -> None:
    """n1's victims would be cheaper, but a budget allowing no disruption protects them."""
    for name in ("n0", "n1"):
        backend.apply(NODES, node(name))
    for i in range(2):
        backend.apply(PODS, pod(f"a-{i}", cpu="2", priority=100, node_name="n0"))
        backend.apply(PODS, pod(f"b-{i}", cpu="2", priority=50, node_name="n1", labels={"app": "b"}))
    backend.apply(
        PDBS,
        {
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "b"}}, "maxUnavailable": 0},
            "status": {"disruptionsAllowed": 0},
        },
    )
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("high", cpu="2", priority=1000))
        await until(lambda: "high" in bound(backend))
        assert bound(backend)["high"] == "n0"
        assert {"b-0", "b-1"} <= names(backend)
    finally:
        stop.set()
        await task


async def test_a_pod_that_may_not_preempt_evicts_nothing(backend: MemoryBackend) -> None:
    backend.apply(NODES, node("n0"))
    backend.apply(PODS, pod("low", cpu="4", priority=10, node_name="n0"))
    _app, stop, task = await start(backend)
    try:
        never = pod("never", cpu="2", priority=1000)
        never["spec"]["preemptionPolicy"] = "Never"
        backend.apply(PODS, never)
        await until(lambda: any("preemptionPolicy=Never" in e.message for e in backend.events))
        assert "low" in names(backend)
    finally:
        stop.set()
        await task


async def test_when_no_node_helps_nothing_is_evicted_and_the_message_counts_why(
    backend: MemoryBackend,
) -> None:
    """n0 holds only more important pods; on n1 evicting the one less important pod frees too little."""
    for name in ("n0", "n1"):
        backend.apply(NODES, node(name))
    backend.apply(PODS, pod("important-0", cpu="4", priority=5000, node_name="n0"))
    backend.apply(PODS, pod("important-1", cpu="3", priority=5000, node_name="n1"))
    backend.apply(PODS, pod("small", cpu="1", priority=10, node_name="n1"))
    app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("big", cpu="2", priority=1000))
        expected = (
            "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
            "1 Preemption is not helpful for scheduling."
        )
        await until(lambda: any(expected in e.message for e in backend.events))
        assert {"important-0", "important-1", "small"} <= names(backend)
        assert not [e for e in backend.events if e.reason == "Preempted"]
        assert app.metrics.preemption_attempts._value.get() >= 1
    finally:
        stop.set()
        await task


# ---- ElasticQuota PostFilter ---------------------------------------------------------------------


def quota(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"min": {"cpu": cpu, "memory": "64Gi"}, "max": {"cpu": cpu, "memory": "64Gi"}},
    }


async def test_a_pod_over_its_quota_preempts_a_lower_priority_pod_of_its_own_quota(
    backend: MemoryBackend,
) -> None:
    """team-a's max (4 CPU) is used by two 2-CPU pods; the node has room. A higher-priority team-a
    pod evicts the less important one of them, never team-b's (lower still) nor a non-preemptible."""
    backend.apply(NODES, node("n0", cpu="16"))
    backend.apply(ELASTICQUOTAS, quota("team-a", "4"))
    backend.apply(ELASTICQUOTAS, quota("team-b", "4"))
    backend.apply(PODS, pod("a-low", cpu="2", priority=20, node_name="n0", labels={QUOTA: "team-a"}))
    backend.apply(PODS, pod("b-low", cpu="2", priority=1, node_name="n0", labels={QUOTA: "team-b"}))
    backend.apply(
        PODS,
        pod(
            "a-keep",
            cpu="2",
            priority=10,
            node_name="n0",
            labels={QUOTA: "team-a", "quota.scheduling.koordinator.sh/preemptible": "false"},
        ),
    )
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("a-high", cpu="2", priority=1000, labels={QUOTA: "team-a"}))
        await until(lambda: "a-high" in bound(backend))
        assert "a-low" not in names(backend)
        assert {"a-keep", "b-low"} <= names(backend)
        preempted = [e for e in backend.events if e.reason == "Preempted"]
        assert [e.regarding.name for e in preempted] == ["a-low"]
    finally:
        stop.set()
        await task


async def test_quota_preemption_never_evicts_a_higher_priority_pod_of_the_quota(
    backend: MemoryBackend,
) -> None:
    backend.apply(NODES, node("n0", cpu="16"))
    backend.apply(ELASTICQUOTAS, quota("team-a", "4"))
    for i in range(2):
        backend.apply(PODS, pod(f"a-{i}", cpu="2", priority=2000, node_name="n0", labels={QUOTA: "team-a"}))
    _app, stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("a-high", cpu="2", priority=1000, labels={QUOTA: "team-a"}))
        await until(lambda: any("Insufficient quotas" in e.message for e in backend.events))
        await asyncio.sleep(0.2)
        assert {"a-0", "a-1"} <= names(backend)
        assert "a-high" not in bound(backend)
        assert not [e for e in backend.events if e.reason == "Preempted"]
    finally:
        stop.set()
        await task
