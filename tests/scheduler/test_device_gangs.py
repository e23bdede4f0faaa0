"""Gangs and job-level preemption see GPU cards, not only counts (issue 14 item 3), on the
in-memory backend with the scheduler process's own loop: Coscheduling plans each node's members by
the room DeviceShare reports (``interfaces.MemberRoom``), and preemption evicts the pods whose
cards the preemptor needs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from apis.client.backend import DEVICES, NODES, PODGROUPS, PODS
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATE_HINT, ANNOTATION_DEVICE_ALLOCATED
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from tests.scheduler.plugins.device_share_fixtures import device, gpu

HIGH, MID, LOW = 1_000_000, 2000, 1000
PCIE_HINT = {ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps({"gpu": {"requiredTopologyScope": "PCIe"}})}

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


def gpu_node(name: str, gpus: int) -> dict[str, Any]:
    allocatable = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def cards(node: str, switches: dict[str, range]) -> dict[str, Any]:
    """The node's Device: ``switches`` maps each PCIe switch to the minors under it."""
    gpus = [gpu(m, numa=0, pcie=pcie) for pcie, minors in switches.items() for m in minors]
    return device(node, *gpus).model_dump(by_alias=True, exclude_none=True)


def gpu_pod(
    name: str,
    gpus: int,
    *,
    priority: int = 0,
    group: str | None = None,
    node_name: str | None = None,
    minors: list[int] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    all_annotations = dict(annotations or {})
    if minors is not None:  # a running pod holding these cards, as DeviceShare wrote them
        entries = [
            {
                "minor": m,
                "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"},
            }
            for m in minors
        ]
        all_annotations[ANNOTATION_DEVICE_ALLOCATED] = json.dumps({"gpu": entries})
    wanted = {"cpu": "1", "nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": wanted, "limits": wanted}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    labels = {"pod-group.scheduling.sigs.k8s.io": group} if group else {}
    metadata = {"name": name, "namespace": "default", "labels": labels, "annotations": all_annotations}
    return {"metadata": metadata, "spec": spec}


async def start(backend: MemoryBackend) -> tuple[asyncio.Event, asyncio.Task[None]]:
    config = load_config(CONFIG, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
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


def bound(backend: MemoryBackend) -> dict[str, str]:
    return {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}


def cards_of(backend: MemoryBackend, name: str) -> list[int]:
    pod = next(p for p in backend.list(PODS) if p.metadata.name == name)
    allocated = json.loads((pod.metadata.annotations or {})[ANNOTATION_DEVICE_ALLOCATED])
    return sorted(entry["minor"] for entry in allocated["gpu"])


async def until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out after 10 s")


async def test_a_gang_of_pcie_sets_waits_for_nodes_that_have_the_sets_then_gets_them() -> None:
    """Two members each wanting 8 GPUs on one PCIe switch. ``split`` has 16 free GPUs, enough for
    both by count, but only one switch with 8: the gang stays pending, saying so, and no member is
    bound. A node with 8 GPUs on one switch arrives: one member goes to each node, on those cards."""
    backend = MemoryBackend()
    backend.apply(NODES, gpu_node("split", 16))
    backend.apply(DEVICES, cards("split", {"p0": range(8), "p1": range(8, 12), "p2": range(12, 16)}))
    stop, task = await start(backend)
    try:
        backend.apply(
            PODGROUPS, {"metadata": {"name": "train", "namespace": "default"}, "spec": {"minMember": 2}}
        )
        for i in range(2):
            backend.apply(PODS, gpu_pod(f"worker-{i}", 8, group="train", annotations=PCIE_HINT))

        def failed() -> list[str]:
            return [e.message for e in backend.events if e.reason == "FailedScheduling"]

        await until(lambda: any("sets of 8 whole GPUs in one PCIe" in m for m in failed()))
        message = next(m for m in failed() if "sets of 8 whole GPUs in one PCIe" in m)
        assert "the feasible nodes hold 1" in message, message
        await asyncio.sleep(0.2)
        assert not bound(backend)

        backend.apply(NODES, gpu_node("whole", 8))
        backend.apply(DEVICES, cards("whole", {"p0": range(8)}))
        await until(lambda: {"worker-0", "worker-1"} <= set(bound(backend)))
        placed = bound(backend)
        assert {placed["worker-0"], placed["worker-1"]} == {"split", "whole"}
        on_split = "worker-0" if placed["worker-0"] == "split" else "worker-1"
        on_whole = "worker-1" if on_split == "worker-0" else "worker-0"
        assert cards_of(backend, on_split) == list(range(8))
        assert cards_of(backend, on_whole) == list(range(8))
    finally:
        stop.set()
        await task


async def test_preemption_evicts_the_pod_holding_the_needed_switch_not_just_enough_gpus() -> None:
    """A node of 8 GPUs, 4 per PCIe switch. ``low`` holds card 0 (switch p0), ``mid`` cards 4-6
    (switch p1): 4 GPUs are free by count, but no switch has 4. A pod wanting 4 on one switch
    preempts: evicting ``low`` alone frees p0, so only ``low`` goes (``mid``, of higher priority,
    is spared) and the pod gets cards 0-3."""
    backend = MemoryBackend()
    backend.apply(NODES, gpu_node("g0", 8))
    backend.apply(DEVICES, cards("g0", {"p0": range(4), "p1": range(4, 8)}))
    backend.apply(PODS, gpu_pod("low", 1, priority=LOW, node_name="g0", minors=[0]))
    backend.apply(PODS, gpu_pod("mid", 3, priority=MID, node_name="g0", minors=[4, 5, 6]))
    stop, task = await start(backend)
    try:
        backend.apply(PODS, gpu_pod("urgent", 4, priority=HIGH, annotations=PCIE_HINT))
        await until(lambda: "urgent" in bound(backend))
        names = {p.metadata.name for p in backend.list(PODS)}
        assert "low" not in names
        assert "mid" in names
        assert [e.regarding.name for e in backend.events if e.reason == "Preempted"] == ["low"]
        assert cards_of(backend, "urgent") == [0, 1, 2, 3]
    finally:
        stop.set()
        await task


async def test_a_victim_that_frees_enough_gpus_on_the_wrong_switch_is_not_chosen() -> None:
    """Cards 0-3 on switch p0, 4-7 on p1; ``mid`` holds card 0, ``low`` card 4, ``kept`` (not
    preemptible) cards 5-7. Evicting ``low``, the lowest priority, would leave 4 GPUs free by count
    but 3 on p0 and 1 on p1: useless to a pod wanting 4 on one switch. ``mid`` goes instead, and
    ``low`` stays."""
    backend = MemoryBackend()
    backend.apply(NODES, gpu_node("g0", 8))
    backend.apply(DEVICES, cards("g0", {"p0": range(4), "p1": range(4, 8)}))
    backend.apply(PODS, gpu_pod("mid", 1, priority=MID, node_name="g0", minors=[0]))
    backend.apply(PODS, gpu_pod("low", 1, priority=LOW, node_name="g0", minors=[4]))
    kept = gpu_pod("kept", 3, priority=LOW, node_name="g0", minors=[5, 6, 7])
    kept["metadata"]["labels"]["scheduling.koordinator.sh/disable-preemptible"] = "true"
    backend.apply(PODS, kept)
    stop, task = await start(backend)
    try:
        backend.apply(PODS, gpu_pod("urgent", 4, priority=HIGH, annotations=PCIE_HINT))
        await until(lambda: "urgent" in bound(backend))
        assert {p.metadata.name for p in backend.list(PODS)} == {"low", "kept", "urgent"}
        assert [e.regarding.name for e in backend.events if e.reason == "Preempted"] == ["mid"]
        assert cards_of(backend, "urgent") == [0, 1, 2, 3]
    finally:
        stop.set()
        await task
