"""Gangs see NUMA nodes, not only CPU totals, on the in-memory backend with the scheduler process's
own loop: Coscheduling plans each node's members, and job-level preemption counts what its victims
free, by the room NodeNUMAResource reports (``interfaces.MemberRoom``).

Every node is one socket of 2 NUMA nodes x 8 cores x 2 threads (``nrt_fixtures``, 16 CPUs per
NUMA node) labelled SingleNUMANode. A member of 10 CPUs fits a node 3 times by its 32 CPUs, but
twice by NUMA node.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from apis.client.backend import NODES, PODGROUPS, PODS
from apis.extension.numa import ANNOTATION_RESOURCE_STATUS
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.node_numa_resource.plugin import NRTS
from tests.scheduler.node_numa_resource.nrt_fixtures import node, nrt, pod

POLICY = "node.koordinator.sh/numa-topology-policy"
SHAPE = "pods of cpu 10 + memory 1Gi with FullPCPUs cpuset by NUMA node"

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
"""
HIGH, MID, LOW = 1_000_000, 2000, 1000


async def start(backend: MemoryBackend) -> tuple[asyncio.Event, asyncio.Task[None]]:
    config = load_config(CONFIG, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    await app.handlers.synced_nodes.wait()
    await app.handlers.synced_pods.wait()
    await asyncio.sleep(0.05)
    return stop, task


def add_node(backend: MemoryBackend, name: str) -> None:
    backend.apply(NODES, node(name, labels={POLICY: "SingleNUMANode"}, numa_nodes=2))
    backend.apply(NRTS, nrt(name, numa_nodes=2))


def gang(backend: MemoryBackend, members: int) -> list[str]:
    backend.apply(
        PODGROUPS, {"metadata": {"name": "train", "namespace": "default"}, "spec": {"minMember": members}}
    )
    names = [f"worker-{i}" for i in range(members)]
    for name in names:
        body = pod(name, "10")
        del body["metadata"]["uid"]
        body["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "train"
        backend.apply(PODS, body)
    return names


def bound(backend: MemoryBackend) -> dict[str, str]:
    return {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}


def numa_nodes_of(backend: MemoryBackend, name: str) -> list[int]:
    found = next(p for p in backend.list(PODS) if p.metadata.name == name)
    status = json.loads((found.metadata.annotations or {})[ANNOTATION_RESOURCE_STATUS])
    return [entry["node"] for entry in status["numaNodeResources"]]


def failed(backend: MemoryBackend) -> list[str]:
    return [e.message for e in backend.events if e.reason == "FailedScheduling"]


async def until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out after 10 s")


def assert_one_per_numa_node(backend: MemoryBackend, names: list[str]) -> None:
    placed = bound(backend)
    seen: dict[tuple[str, int], str] = {}
    for name in names:
        numa = numa_nodes_of(backend, name)
        assert len(numa) == 1, (name, numa)
        key = (placed[name], numa[0])
        assert key not in seen, f"{name} and {seen[key]} share NUMA node {key}"
        seen[key] = name


async def test_a_single_numa_gang_is_planned_two_members_a_node_and_binds_at_once() -> None:
    """Six members on three nodes: by CPU totals a node takes 3 and two nodes would do, but Filter
    refuses a third member on a node. Planned by NUMA room, two go to each node, one per NUMA node,
    and no member is ever refused."""
    backend = MemoryBackend()
    for name in ("n1", "n2", "n3"):
        add_node(backend, name)
    stop, task = await start(backend)
    try:
        names = gang(backend, 6)
        await until(lambda: set(names) <= set(bound(backend)))
        assert not failed(backend)
        assert sorted(bound(backend).values()) == ["n1", "n1", "n2", "n2", "n3", "n3"]
        assert_one_per_numa_node(backend, names)
    finally:
        stop.set()
        await task


async def test_a_single_numa_gang_waits_for_numa_room_saying_so_then_binds_whole() -> None:
    """Three members and one node: 32 CPUs hold them by count, its 2 NUMA nodes hold 2. The gang
    stays pending, naming the NUMA shape, and no member is bound. A second node arrives: the gang
    binds whole, each member in one NUMA node."""
    backend = MemoryBackend()
    add_node(backend, "n1")
    stop, task = await start(backend)
    try:
        names = gang(backend, 3)
        await until(lambda: any(SHAPE in m for m in failed(backend)))
        message = next(m for m in failed(backend) if SHAPE in m)
        assert "the feasible nodes hold 2" in message, message
        await asyncio.sleep(0.2)
        assert not bound(backend)

        add_node(backend, "n2")
        await until(lambda: set(names) <= set(bound(backend)))
        assert sorted(bound(backend).values()) in (["n1", "n1", "n2"], ["n1", "n2", "n2"])
        assert_one_per_numa_node(backend, names)
    finally:
        stop.set()
        await task


def running(name: str, node_name: str, cpuset: str, numa: int, priority: int) -> dict[str, Any]:
    """A bound 4-CPU pod holding ``cpuset`` on NUMA node ``numa``, as NodeNUMAResource wrote it."""
    body = pod(name, "4", node_name=node_name)
    del body["metadata"]["uid"]
    body["spec"]["priority"] = priority
    body["metadata"]["annotations"][ANNOTATION_RESOURCE_STATUS] = json.dumps(
        {"cpuset": cpuset, "numaNodeResources": [{"node": numa, "resources": {"cpu": "4", "memory": "1Gi"}}]}
    )
    return body


async def test_preemption_frees_a_whole_numa_node_for_a_single_numa_pod() -> None:
    """One node, ``low`` holding 4 CPUs of NUMA node 0 and ``mid`` 4 of NUMA node 1: 24 CPUs are
    free by the node's total, but no NUMA node has the 16 an urgent SingleNUMANode pod asks for.
    Preemption evicts ``low`` alone (``mid``, of higher priority, is spared), and the pod gets NUMA
    node 0."""
    backend = MemoryBackend()
    add_node(backend, "n1")
    backend.apply(PODS, running("low", "n1", "0-1,16-17", 0, LOW))
    backend.apply(PODS, running("mid", "n1", "8-9,24-25", 1, MID))
    stop, task = await start(backend)
    try:
        urgent = pod("urgent", "16")
        del urgent["metadata"]["uid"]
        urgent["spec"]["priority"] = HIGH
        backend.apply(PODS, urgent)
        await until(lambda: "urgent" in bound(backend))
        assert {p.metadata.name for p in backend.list(PODS)} == {"mid", "urgent"}
        assert [e.regarding.name for e in backend.events if e.reason == "Preempted"] == ["low"]
        assert numa_nodes_of(backend, "urgent") == [0]
    finally:
        stop.set()
        await task
