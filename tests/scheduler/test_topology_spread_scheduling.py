"""Topology spread end to end on the in-memory backend: a gang whose members carry a DoNotSchedule
zone constraint (the placement keeps the spread between the members, and each member's own cycle,
whose Filter sees the rest of the plan, binds it where the plan put it), and default constraints
whose selector comes from a ReplicaSet the plugin watches."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from apis.client.backend import NODES, PODGROUPS, PODS, ResourceType
from apis.workloads import ReplicaSet
from scheduler.app import AppSettings, SchedulerApp
from scheduler.backend.memory import MemoryBackend
from scheduler.config import DEFAULT_CONFIG_YAML, load_config
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

ZONE = "topology.kubernetes.io/zone"
ZONE_OF = {"z1-a": "z1", "z1-b": "z1", "z1-c": "z1", "z2-a": "z2"}


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {ZONE: ZONE_OF[name]}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def member(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"pod-group.scheduling.sigs.k8s.io": "train", "app": "train"},
        },
        "spec": {
            "schedulerName": "koord-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "train"}},
                }
            ],
        },
    }


def pod_group(min_member: int) -> dict[str, Any]:
    return {"metadata": {"name": "train", "namespace": "default"}, "spec": {"minMember": min_member}}


async def run_until_bound(
    backend: MemoryBackend, count: int, config_yaml: str = DEFAULT_CONFIG_YAML
) -> dict[str, str]:
    config = load_config(config_yaml, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    settings = AppSettings(
        profiles=tuple(config.profiles), pod_initial_backoff_seconds=0.01, pod_max_backoff_seconds=0.05
    )
    app = SchedulerApp(settings, backend, DEFAULT_REGISTRY, SchedulerMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(app.run(stop))
    try:
        bound: dict[str, str] = {}
        for _ in range(250):
            bound = {p.metadata.name or "": p.spec.node_name for p in backend.list(PODS) if p.spec.node_name}
            if len(bound) >= count:
                break
            await asyncio.sleep(0.02)
        return bound
    finally:
        stop.set()
        await task


async def test_a_gang_with_zone_spread_is_placed_two_and_two() -> None:
    """Three nodes in z1 against one in z2: least-allocated scoring alone would put three members
    in z1; the spread constraint makes it 2 + 2."""
    backend = MemoryBackend()
    for name in ZONE_OF:
        backend.apply(NODES, node(name))
    backend.apply(PODGROUPS, pod_group(4))
    for i in range(4):
        backend.apply(PODS, member(f"w{i}"))
    bound = await run_until_bound(backend, 4)
    assert len(bound) == 4, bound
    assert Counter(ZONE_OF[n] for n in bound.values()) == {"z1": 2, "z2": 2}


async def test_the_gang_counts_the_pods_already_running() -> None:
    """Two matching pods already run in z1: 3 more members must make it 2/3 or 3/2 at worst, so at
    most one joins z1."""
    backend = MemoryBackend()
    for name in ZONE_OF:
        backend.apply(NODES, node(name))
    for i in range(2):
        running = member(f"old{i}")
        running["metadata"]["labels"] = {"app": "train"}
        running["spec"]["nodeName"] = "z1-a"
        running["status"] = {"phase": "Running"}
        backend.apply(PODS, running)
    backend.apply(PODGROUPS, pod_group(3))
    for i in range(3):
        backend.apply(PODS, member(f"w{i}"))
    bound = await run_until_bound(backend, 5)
    members = {name: node for name, node in bound.items() if name.startswith("w")}
    assert len(members) == 3, bound
    per_zone = Counter(ZONE_OF[n] for n in bound.values())
    assert abs(per_zone["z1"] - per_zone["z2"]) <= 1, per_zone


LIST_DEFAULTS = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
"""


async def test_default_constraints_take_their_selector_from_the_replicaset_on_the_memory_backend() -> None:
    """Pods without constraints of their own, owned by a ReplicaSet: the List default (zone,
    DoNotSchedule) applies with the ReplicaSet's selector, read through the plugin's informer."""
    backend = MemoryBackend()
    for name in ZONE_OF:
        backend.apply(NODES, node(name))
    backend.apply(
        ResourceType.of(ReplicaSet),
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        },
    )
    for i in range(4):
        pod = member(f"web-{i}")
        pod["metadata"]["labels"] = {"app": "web"}
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web",
                "uid": "rs-uid",
                "controller": True,
            }
        ]
        del pod["spec"]["topologySpreadConstraints"]
        backend.apply(PODS, pod)
    bound = await run_until_bound(backend, 4, LIST_DEFAULTS)
    assert len(bound) == 4, bound
    assert Counter(ZONE_OF[n] for n in bound.values()) == {"z1": 2, "z2": 2}
