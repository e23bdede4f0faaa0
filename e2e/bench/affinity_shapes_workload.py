"""The affinity benchmark's shapes: kube-scheduler's scheduler_perf cases for inter-pod affinity and
topology spreading, with their pod templates and their ratios of pods to nodes.

Every shape has *init* pods, created already bound (``spec.nodeName``) in a namespace both
schedulers share, and *measured* pods, created pending in each scheduler's own namespace; the
measured pods' terms name their own namespace and the init namespace (scheduler_perf's
``namespaces: [sched-1, sched-0]``), so neither scheduler's pods affect the other's terms. Counts are
scheduler_perf's at 5,000 nodes scaled to ``--nodes``. Nodes are scheduler_perf's
``node-default.yaml`` (4 CPU, 32Gi, 110 pods) in three zones ``moon-1..3``; the SchedulingPodAffinity
shape relabels them all ``zone1`` first, as its ``labelNodePrepareStrategy`` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apis.quantity import Quantity
from scheduler.simulator.description import ClusterDescription, NodePool

__all__ = [
    "INIT_NAMESPACE",
    "MEMORY",
    "SHAPES",
    "ZONE",
    "ZONES",
    "Shape",
    "description",
    "init_pods",
    "measured_pods",
]

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ZONES = ("moon-1", "moon-2", "moon-3")
SINGLE_ZONE = "zone1"
INIT_NAMESPACE = "aff-init"
NODE_CPU, NODE_MEMORY, NODE_PODS = "4", "32Gi", 110
IMAGE = "registry.k8s.io/pause:3.10"

Template = Callable[[str, list[str], int], dict[str, Any]]
"""(name, the namespaces its terms name, index) -> a pod's metadata.labels and spec."""


def _container() -> dict[str, Any]:
    requests = {"cpu": "100m", "memory": "500Mi"}
    return {
        "name": "pause",
        "image": IMAGE,
        "ports": [{"containerPort": 80}],
        "resources": {"requests": requests, "limits": requests},
    }


def _term(color: str, topology_key: str, namespaces: list[str]) -> dict[str, Any]:
    return {
        "labelSelector": {"matchLabels": {"color": color}},
        "topologyKey": topology_key,
        "namespaces": namespaces,
    }


def _pod(labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"labels": labels, "spec": {"containers": [_container()], **spec}}


def default_pod(name: str, namespaces: list[str], index: int) -> dict[str, Any]:
    """pod-default.yaml: no constraint."""
    return _pod({})


def anti_affinity_pod(name: str, namespaces: list[str], index: int) -> dict[str, Any]:
    """pod-with-pod-anti-affinity.yaml: required anti-affinity to ``color: green`` on hostname."""
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [_term("green", HOSTNAME, namespaces)]}
    return _pod({"color": "green"}, affinity={"podAntiAffinity": anti})


def affinity_pod(name: str, namespaces: list[str], index: int) -> dict[str, Any]:
    """pod-with-pod-affinity.yaml: required affinity to ``color: blue`` on zone."""
    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": [_term("blue", ZONE, namespaces)]}
    return _pod({"color": "blue"}, affinity={"podAffinity": affinity})


def _preferred(color: str, namespaces: list[str]) -> dict[str, Any]:
    weighted = {"weight": 1, "podAffinityTerm": _term(color, HOSTNAME, namespaces)}
    return {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}


def preferred_affinity_pod(name: str, namespaces: list[str], index: int) -> dict[str, Any]:
    """pod-with-preferred-pod-affinity.yaml: preferred affinity (weight 1) to ``color: red``."""
    return _pod({"color": "red"}, affinity={"podAffinity": _preferred("red", namespaces)})


def preferred_anti_affinity_pod(name: str, namespaces: list[str], index: int) -> dict[str, Any]:
    """pod-with-preferred-pod-anti-affinity.yaml: preferred anti-affinity (weight 1) to ``color: yellow``."""
    return _pod({"color": "yellow"}, affinity={"podAntiAffinity": _preferred("yellow", namespaces)})


def _spreading(when: str) -> Template:
    def template(name: str, namespaces: list[str], index: int) -> dict[str, Any]:
        constraint = {
            "maxSkew": 5,
            "topologyKey": ZONE,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"color": "blue"}},
        }
        return _pod({"color": "blue"}, topologySpreadConstraints=[constraint])

    template.__doc__ = f"pod-with-{'preferred-' if when == 'ScheduleAnyway' else ''}topology-spreading.yaml"
    return template


def mixed_affinity_pod(name: str, namespaces: list[str], index: int) -> dict[str, Any]:
    """For the memory figure: bound pods carrying affinity terms, cycling through required affinity,
    preferred affinity, preferred anti-affinity and required anti-affinity (to a label of its own,
    so that any placement keeps it)."""
    kind = index % 4
    if kind == 0:
        return affinity_pod(name, namespaces, index)
    if kind == 1:
        return preferred_affinity_pod(name, namespaces, index)
    if kind == 2:
        return preferred_anti_affinity_pod(name, namespaces, index)
    own = f"green-{index}"
    anti = {"requiredDuringSchedulingIgnoredDuringExecution": [_term(own, HOSTNAME, namespaces)]}
    return _pod({"color": own}, affinity={"podAntiAffinity": anti})


@dataclass(frozen=True)
class Shape:
    name: str
    init_template: Template
    measured_template: Template
    init_per_node: float
    measured_per_node: float
    single_zone: bool = False
    """Every node labelled ``zone: zone1`` (the other shapes: three zones)."""
    memory: bool = False
    """Not a throughput shape: run only with ``--memory``."""

    def counts(self, nodes: int) -> tuple[int, int]:
        return max(1, math.floor(self.init_per_node * nodes)), max(
            1, math.floor(self.measured_per_node * nodes)
        )


MEMORY = "AffinityMemory"

# scheduler_perf at 5,000 nodes: SchedulingPodAntiAffinity/5000Nodes_2000Pods (1,000 init, 2,000
# measured), SchedulingPodAffinity, SchedulingPreferredPodAffinity and
# SchedulingPreferredPodAntiAffinity /5000Nodes_5000Pods (5,000 + 5,000), TopologySpreading and
# PreferredTopologySpreading /5000Nodes_10000Pods (5,000 default pods + 10,000).
SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("SchedulingPodAntiAffinity", anti_affinity_pod, anti_affinity_pod, 0.2, 0.4),
        Shape("SchedulingPreferredPodAffinity", preferred_affinity_pod, preferred_affinity_pod, 1, 1),
        Shape(
            "SchedulingPreferredPodAntiAffinity",
            preferred_anti_affinity_pod,
            preferred_anti_affinity_pod,
            1,
            1,
        ),
        Shape("TopologySpreading", default_pod, _spreading("DoNotSchedule"), 1, 2),
        Shape("PreferredTopologySpreading", default_pod, _spreading("ScheduleAnyway"), 1, 2),
        Shape("SchedulingPodAffinity", affinity_pod, affinity_pod, 1, 1, single_zone=True),
        Shape(MEMORY, mixed_affinity_pod, preferred_anti_affinity_pod, 10, 0.02, memory=True),
    )
}
"""In the order they run: the single-zone shape last, so the nodes are relabelled once."""


def description(nodes: int, cluster_name: str) -> ClusterDescription:
    """``nodes`` node-default nodes, split over the three zones (pools ``moon-1`` ...)."""
    pools = []
    for i, zone in enumerate(ZONES):
        count = nodes // len(ZONES) + (1 if i < nodes % len(ZONES) else 0)
        if count:
            pools.append(
                NodePool(
                    name=zone,
                    count=count,
                    cpu=Quantity.parse(NODE_CPU),
                    memory=Quantity.parse(NODE_MEMORY),
                    pods=NODE_PODS,
                    labels={ZONE: zone},
                )
            )
    return ClusterDescription(name=cluster_name, node_pools=pools)


def _manifest(name: str, namespace: str, body: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": body["labels"]},
        "spec": {**body["spec"], **spec},
    }


def init_pods(shape: Shape, node_names: list[str], measured_namespaces: list[str]) -> list[dict[str, Any]]:
    """The shape's init pods, bound round-robin over ``node_names`` (at most one per node for the
    anti-affinity shape, whose init pods are fewer than the nodes). Their terms name their own
    namespace and every scheduler's, so that each scheduler meets them as existing pods' terms."""
    count, _ = shape.counts(len(node_names))
    namespaces = [INIT_NAMESPACE, *measured_namespaces]
    return [
        _manifest(
            f"init-{i:06d}",
            INIT_NAMESPACE,
            shape.init_template(f"init-{i:06d}", namespaces, i),
            nodeName=node_names[i % len(node_names)],
        )
        for i in range(count)
    ]


def measured_pods(shape: Shape, nodes: int, namespace: str, scheduler_name: str) -> list[dict[str, Any]]:
    """The shape's measured pods, pending, for ``scheduler_name``."""
    _, count = shape.counts(nodes)
    namespaces = [namespace, INIT_NAMESPACE]
    return [
        _manifest(
            f"pod-{i:06d}",
            namespace,
            shape.measured_template(f"pod-{i:06d}", namespaces, i),
            schedulerName=scheduler_name,
        )
        for i in range(count)
    ]
