"""In-memory stand-ins for the descheduler framework (``operators.descheduler.framework``) and
small makers for nodes, pods and NodeMetrics in the units LowNodeLoad reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from apis.core import Node, Pod
from apis.slo.nodemetric import NodeMetric
from operators.descheduler.framework import ClusterObjects, EvictOptions

__all__ = [
    "NOW",
    "FakeEvictor",
    "FakeHandle",
    "make_metric",
    "make_node",
    "make_pod",
]

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@dataclass
class FakeEvictor:
    """Records every evict; refuses pods named in ``refuse`` and stops after ``limit`` evictions
    (the MigrationController's per-round caps, as the plugin sees them)."""

    refuse: set[str] = field(default_factory=set)
    unmovable: set[str] = field(default_factory=set)
    limit: int | None = None
    evicted: list[tuple[Pod, EvictOptions]] = field(default_factory=list)

    def filter(self, pod: Pod) -> bool:
        return (pod.metadata.name or "") not in self.unmovable

    def pre_eviction_filter(self, pod: Pod) -> bool:
        return True

    async def evict(self, pod: Pod, options: EvictOptions) -> bool:
        if (pod.metadata.name or "") in self.refuse:
            return False
        if self.limit is not None and len(self.evicted) >= self.limit:
            return False
        self.evicted.append((pod, options))
        return True

    @property
    def names(self) -> list[str]:
        return [pod.metadata.name or "" for pod, _ in self.evicted]


@dataclass
class FakeHandle:
    node_list: list[Node]
    pods: list[Pod]
    metrics: dict[str, NodeMetric]
    fake_evictor: FakeEvictor = field(default_factory=FakeEvictor)
    events: list[tuple[str, str, str, str]] = field(default_factory=list)
    fake_objects: ClusterObjects | None = None

    @property
    def evictor(self) -> FakeEvictor:
        return self.fake_evictor

    @property
    def objects(self) -> ClusterObjects:
        assert self.fake_objects is not None, "this test gave the handle no ClusterObjects"
        return self.fake_objects

    def nodes(self) -> Sequence[Node]:
        return self.node_list

    def pods_on_node(self, node_name: str) -> Sequence[Pod]:
        return [p for p in self.pods if p.spec.node_name == node_name]

    def node_metric(self, node_name: str) -> NodeMetric | None:
        return self.metrics.get(node_name)

    async def record_event(
        self, regarding: Pod | Node, reason: str, message: str, type_: str = "Normal"
    ) -> None:
        self.events.append((regarding.metadata.name or "", reason, message, type_))


def make_node(
    name: str,
    cpu: str = "10",
    memory: str = "100Gi",
    labels: Mapping[str, str] | None = None,
    taints: Iterable[dict[str, str]] = (),
    unschedulable: bool = False,
    pods: int | None = None,
) -> Node:
    allocatable: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if pods is not None:
        allocatable["pods"] = str(pods)
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"taints": list(taints), "unschedulable": unschedulable},
            "status": {"allocatable": allocatable},
        }
    )


def make_pod(
    name: str,
    node: str,
    cpu: str = "1",
    memory: str = "1Gi",
    namespace: str = "default",
    priority: int | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: float = 0.0,
    qos: str = "Burstable",
    phase: str = "Running",
    node_selector: Mapping[str, str] | None = None,
    tolerations: Iterable[dict[str, str]] = (),
) -> Pod:
    """A pod requesting ``cpu``/``memory``; ``qos`` is its Kubernetes QoS class (Burstable pods
    count as Prod unless labelled otherwise)."""
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        "tolerations": list(tolerations),
    }
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": name,
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
                "creationTimestamp": (NOW - timedelta(hours=1) + timedelta(seconds=created)).isoformat(),
            },
            "spec": spec,
            "status": {"phase": phase, "qosClass": qos},
        }
    )


def make_metric(
    node: str,
    pods: Mapping[str, tuple[str, str]],
    system: tuple[str, str] = ("0", "0"),
    updated: datetime = NOW,
    namespace: str = "default",
) -> NodeMetric:
    """``pods``: pod name -> (cpu, memory) usage; ``system``: the node's system usage."""
    return NodeMetric.model_validate(
        {
            "metadata": {"name": node},
            "status": {
                "updateTime": updated.isoformat(),
                "nodeMetric": {"systemUsage": {"resources": {"cpu": system[0], "memory": system[1]}}},
                "podsMetric": [
                    {
                        "name": name,
                        "namespace": namespace,
                        "podUsage": {"resources": {"cpu": cpu, "memory": memory}},
                    }
                    for name, (cpu, memory) in pods.items()
                ],
            },
        }
    )
