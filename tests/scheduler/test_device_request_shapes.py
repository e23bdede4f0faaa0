"""Every GPU request shape of the v0.7, v1.6 and v1.7 notes binds where Koordinator would (issue 14),
on the in-memory backend with the scheduler process's own loop.

The GPU node's allocatable is what koord-manager's Device sync writes (``device_resources``), so
NodeResourcesFit sees ``koordinator.sh/gpu`` and ``gpu.shared`` there as Koordinator's
GPUDeviceResource plugin puts them; a deprecated ``kubernetes.io/gpu*`` request is read under its
``koordinator.sh/`` name, as koord-scheduler's pod transformer renames it. A node without GPUs
never gets such a pod."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from apis.client.backend import DEVICES, NODES, PODS
from apis.core import Pod
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATE_HINT, ANNOTATION_DEVICE_ALLOCATED
from apis.scheduling.device import Device
from operators.logic.device_allocatable import device_resources
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.cache.pod_info import PodInfo
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from tests.scheduler.plugins.device_share_fixtures import eight_gpus

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
"""
BASE = {"cpu": "64", "memory": "512Gi", "pods": "110"}
CORE, RATIO = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory-ratio"


def hint(scope: str) -> dict[str, str]:
    return {ANNOTATION_DEVICE_ALLOCATE_HINT: json.dumps({"gpu": {"requiredTopologyScope": scope}})}


def node(name: str, device: Device | None) -> dict[str, Any]:
    """A node as koord-manager leaves it: its Device's sums added to what kubelet reports."""
    allocatable = {**BASE, **{k: str(v) for k, v in device_resources(device).items()}}
    return {"metadata": {"name": name}, "status": {"capacity": allocatable, "allocatable": allocatable}}


def pod(name: str, resources: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    wanted = {"cpu": "1", **resources}
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": wanted, "limits": wanted}}],
        },
    }


def cluster(with_gpus: bool = True) -> MemoryBackend:
    """``plain`` (no GPU, listed first) and, unless told otherwise, ``gpu`` with 8 cards: two NUMA
    nodes, two PCIe switches each, two cards a switch."""
    backend = MemoryBackend()
    backend.apply(NODES, node("plain", None))
    if with_gpus:
        cards = eight_gpus("gpu")
        backend.apply(NODES, node("gpu", cards))
        backend.apply(DEVICES, cards.model_dump(by_alias=True, exclude_none=True))
    return backend


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


def get(backend: MemoryBackend, name: str) -> Pod:
    return next(p for p in backend.list(PODS) if p.metadata.name == name)


async def until(check: Callable[[], bool]) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out after 10 s")


def entries(p: Pod) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = json.loads((p.metadata.annotations or {})[ANNOTATION_DEVICE_ALLOCATED])[
        "gpu"
    ]
    return sorted(gpus, key=lambda e: int(e["minor"]))


SHAPES = [
    # (id, resources, annotations, cards, gpu-core per card, gpu-memory-ratio per card)
    ("v1.6 koordinator.sh/gpu 100", {"koordinator.sh/gpu": "100"}, None, 1, "100", "100"),
    ("v1.6 koordinator.sh/gpu 200 PCIe", {"koordinator.sh/gpu": "200"}, hint("PCIe"), 2, "100", "100"),
    (
        "v1.6 koordinator.sh/gpu 400 NUMANode",
        {"koordinator.sh/gpu": "400"},
        hint("NUMANode"),
        4,
        "100",
        "100",
    ),
    ("koordinator.sh/gpu 50", {"koordinator.sh/gpu": "50"}, None, 1, "50", "50"),
    ("v1.6 gpu.shared 2 ratio 100", {"koordinator.sh/gpu.shared": "2", RATIO: "100"}, None, 2, "0", "50"),
    (
        "v1.6 HAMi gpu.shared 1 core 50 ratio 50",
        {"koordinator.sh/gpu.shared": "1", CORE: "50", RATIO: "50"},
        None,
        1,
        "50",
        "50",
    ),
    ("legacy kubernetes.io/gpu 100", {"kubernetes.io/gpu": "100"}, None, 1, "100", "100"),
    (
        "legacy kubernetes.io/gpu-core 50 ratio 50",
        {"kubernetes.io/gpu-core": "50", "kubernetes.io/gpu-memory-ratio": "50"},
        None,
        1,
        "50",
        "50",
    ),
    ("v0.7 gpu-core 50 ratio 50", {CORE: "50", RATIO: "50"}, None, 1, "50", "50"),
    ("v0.7 nvidia.com/gpu 2", {"nvidia.com/gpu": "2"}, None, 2, "100", "100"),
]


@pytest.mark.parametrize(
    ("resources", "annotations", "cards", "core", "ratio"),
    [shape[1:] for shape in SHAPES],
    ids=[shape[0] for shape in SHAPES],
)
async def test_each_shape_binds_on_the_gpu_node_with_its_cards(
    resources: dict[str, str], annotations: dict[str, str] | None, cards: int, core: str, ratio: str
) -> None:
    backend = cluster()
    if "nvidia.com/gpu" in resources:  # the NVIDIA device plugin's count, through kubelet
        gpu_node = node("gpu", eight_gpus("gpu"))
        gpu_node["status"]["allocatable"]["nvidia.com/gpu"] = "8"
        backend.apply(NODES, gpu_node)
    stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("p", resources, annotations))
        await until(lambda: bool(get(backend, "p").spec.node_name))
        placed = get(backend, "p")
        assert placed.spec.node_name == "gpu"
        got = entries(placed)
        assert len(got) == cards
        assert {(e["resources"][CORE], e["resources"][RATIO]) for e in got} == {(core, ratio)}
        minors = [int(e["minor"]) for e in got]
        if annotations == hint("PCIe"):
            assert len({m // 2 for m in minors}) == 1, minors
        if annotations == hint("NUMANode"):
            assert len({m // 4 for m in minors}) == 1, minors
    finally:
        stop.set()
        await task


async def test_koordinator_gpu_is_counted_by_node_resources_fit() -> None:
    """Two pods of ``koordinator.sh/gpu: 400`` take the node's 800; a third pod asking for 100 is
    refused by NodeResourcesFit as kube-scheduler words it, and the plain node never gets it."""
    backend = cluster()
    stop, task = await start(backend)
    try:
        for name in ("a", "b"):
            backend.apply(PODS, pod(name, {"koordinator.sh/gpu": "400"}))
        await until(lambda: all(get(backend, n).spec.node_name for n in ("a", "b")))
        backend.apply(PODS, pod("c", {"koordinator.sh/gpu": "100"}))

        def failed() -> list[str]:
            return [e.message for e in backend.events if e.reason == "FailedScheduling"]

        await until(lambda: any("Insufficient koordinator.sh/gpu" in m for m in failed()))
        assert not get(backend, "c").spec.node_name
        assert sorted(int(e["minor"]) for n in ("a", "b") for e in entries(get(backend, n))) == list(range(8))
    finally:
        stop.set()
        await task


@pytest.mark.parametrize(
    "resources",
    [
        {"koordinator.sh/gpu": "100"},
        {"koordinator.sh/gpu.shared": "1", CORE: "50", RATIO: "50"},
        {"kubernetes.io/gpu": "100"},
    ],
    ids=["gpu", "gpu.shared", "kubernetes.io/gpu"],
)
async def test_a_node_without_gpus_never_gets_a_gpu_pod(resources: dict[str, str]) -> None:
    backend = cluster(with_gpus=False)
    stop, task = await start(backend)
    try:
        backend.apply(PODS, pod("p", resources))
        await until(lambda: any(e.reason == "FailedScheduling" for e in backend.events))
        message = next(e.message for e in backend.events if e.reason == "FailedScheduling")
        assert "Insufficient koordinator.sh/" in message, message
        await asyncio.sleep(0.2)
        assert not get(backend, "p").spec.node_name
    finally:
        stop.set()
        await task


def test_deprecated_device_names_are_requested_and_charged_under_koordinators_names() -> None:
    """What NodeResourcesFit fits and ElasticQuota charges (``PodInfo.requests``): the pod's
    ``kubernetes.io/gpu*`` and ``rdma`` under their ``koordinator.sh/`` names; a container that
    names both keeps both, as Koordinator's transformer leaves it."""
    renamed = PodInfo.of(
        Pod.model_validate(pod("p", {"kubernetes.io/gpu": "100", "kubernetes.io/rdma": "1"}))
    )
    assert renamed.requests == {"cpu": 1000, "koordinator.sh/gpu": 100, "koordinator.sh/rdma": 1, "pods": 1}
    both = PodInfo.of(Pod.model_validate(pod("q", {"kubernetes.io/gpu": "50", "koordinator.sh/gpu": "50"})))
    assert both.requests["koordinator.sh/gpu"] == 50
    assert both.requests["kubernetes.io/gpu"] == 50
