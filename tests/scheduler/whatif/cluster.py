"""A koord-scheduler on the in-memory API server for what-if tests: GPU nodes labelled with a
spine/block topology, job-level preemption and network-topology-aware gangs on, ElasticQuota in
the default profile; makers for gangs, fillers and quotas."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from apis.client.backend import ELASTICQUOTAS, NODES, PODGROUPS, PODS, TOPOLOGIES
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.whatif.answer import WhatIfAnswer
from scheduler.whatif.request import WhatIfRequest

HIGH, LOW = 1_000_000, 1000
SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
GPU = "nvidia.com/gpu"

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: Coscheduling
    args:
      enablePreemption: true
      awareNetworkTopology: true
"""

DEFAULT_PROFILE_CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
"""
"""The default profile as it ships: no job-level preemption, DefaultPreemption for plain pods."""

TOPOLOGY = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "ClusterNetworkTopology",
    "metadata": {"name": "default"},
    "spec": {
        "networkTopologySpec": [
            {"labelKey": [SPINE], "topologyLayer": "SpineLayer"},
            {"labelKey": [BLOCK], "parentTopologyLayer": "SpineLayer", "topologyLayer": "BlockLayer"},
            {"parentTopologyLayer": "BlockLayer", "topologyLayer": "NodeTopologyLayer"},
        ]
    },
}


def gpu_node(
    name: str, *, spine: str, block: str, gpus: int = 8, taints: Sequence[dict[str, str]] = ()
) -> dict[str, Any]:
    node: dict[str, Any] = {
        "metadata": {"name": name, "labels": {SPINE: spine, BLOCK: block, "kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", GPU: str(gpus)}},
    }
    if taints:
        node["spec"] = {"taints": list(taints)}
    return node


def pod(
    name: str,
    *,
    gpus: int = 8,
    cpu: str = "1",
    priority: int = 0,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": "1Gi"}
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "priority": priority,
        "containers": [
            {"name": "c", "resources": {"requests": requests, **({"limits": limits} if limits else {})}}
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


def pod_group(name: str, min_member: int, *, gather: tuple[str, str] | None = None) -> dict[str, Any]:
    annotations = {}
    if gather is not None:
        layer, strategy = gather
        annotations["gang.scheduling.koordinator.sh/network-topology-spec"] = json.dumps(
            {"gatherStrategy": [{"layer": layer, "strategy": strategy}]}
        )
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"minMember": min_member},
    }


def gang(
    name: str,
    size: int,
    *,
    min_member: int | None = None,
    gather: tuple[str, str] | None = None,
    priority: int = 0,
    gpus: int = 8,
    labels: dict[str, str] | None = None,
    node_names: Sequence[str] = (),
) -> list[dict[str, Any]]:
    members = [
        pod(
            f"{name}-{i}",
            gpus=gpus,
            priority=priority,
            node_name=node_names[i] if node_names else None,
            labels={"pod-group.scheduling.sigs.k8s.io": name, **(labels or {})},
            annotations={"gang.scheduling.koordinator.sh/network-topology-index": str(i)},
        )
        for i in range(size)
    ]
    return [pod_group(name, size if min_member is None else min_member, gather=gather), *members]


def elastic_quota(
    name: str, *, max_cpu: str, min_cpu: str = "0", max_gpu: str = "64", namespace: str = "default"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"min": {"cpu": min_cpu, GPU: "0"}, "max": {"cpu": max_cpu, GPU: max_gpu}},
    }


def apply(backend: MemoryBackend, objects: Sequence[dict[str, Any]]) -> None:
    for obj in objects:
        if obj.get("kind") == "PodGroup":
            backend.apply(PODGROUPS, obj)
        else:
            backend.apply(PODS, obj)


def bound(backend: MemoryBackend) -> dict[str, str]:
    return {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}


def names(backend: MemoryBackend) -> set[str]:
    return {p.metadata.name or "" for p in backend.list(PODS)}


async def until(check: Callable[[], bool], seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {seconds} s")


def topology_backend(blocks: dict[str, tuple[str, int]], *, gpus: int = 8) -> MemoryBackend:
    """``blocks``: block -> (its spine, node count); nodes are ``<block>-n<i>``."""
    backend = MemoryBackend()
    backend.apply(TOPOLOGIES, TOPOLOGIES.model.model_validate(TOPOLOGY))
    for block, (spine, count) in blocks.items():
        for i in range(count):
            backend.apply(NODES, gpu_node(f"{block}-n{i}", spine=spine, block=block, gpus=gpus))
    return backend


@asynccontextmanager
async def running(
    backend: MemoryBackend, *, advice_seconds: float = 0.0, config_text: str = CONFIG
) -> AsyncIterator[SchedulerApp]:
    config = load_config(config_text, DEFAULT_PLUGINS, DEFAULT_REGISTRY.implements)
    settings = AppSettings(
        profiles=tuple(config.profiles),
        pod_initial_backoff_seconds=0.01,
        pod_max_backoff_seconds=0.05,
        whatif_advice_seconds=advice_seconds,
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        await app.handlers.synced_nodes.wait()
        await app.handlers.synced_pods.wait()
        await asyncio.sleep(0.05)
        yield app
    finally:
        stop.set()
        await task


async def what_if(app: SchedulerApp, objects: Sequence[dict[str, Any]] = (), **fields: Any) -> WhatIfAnswer:
    request = WhatIfRequest.model_validate({"objects": list(objects), "timeLimitSeconds": 5.0, **fields})
    return await app.whatif.answer(request)


__all__ = [
    "BLOCK",
    "DEFAULT_PROFILE_CONFIG",
    "ELASTICQUOTAS",
    "GPU",
    "HIGH",
    "LOW",
    "SPINE",
    "apply",
    "bound",
    "elastic_quota",
    "gang",
    "gpu_node",
    "names",
    "pod",
    "pod_group",
    "running",
    "topology_backend",
    "until",
    "what_if",
]
