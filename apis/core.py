"""The subset of core/v1 Pod and Node, and policy/v1 PodDisruptionBudget, that koordinator-py reads.

Unknown fields are ignored (as Go's decoder does); these models are for reading what the API
server sends, never for writing whole objects back (the scheduler patches and binds).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from apis.base import KoordModel, ResourceInfo
from apis.meta import LabelSelector, NodeSelectorTerm, ObjectMeta, Taint, Toleration
from apis.quantity import Quantity
from apis.types import Int32, Int64, Time

__all__ = [
    "Affinity",
    "Container",
    "Node",
    "NodeAffinity",
    "NodeCondition",
    "NodeSelector",
    "NodeSpec",
    "NodeStatus",
    "Pod",
    "PodCondition",
    "PodSpec",
    "PodStatus",
    "PreferredSchedulingTerm",
    "ResourceRequirements",
]


class ResourceRequirements(KoordModel):
    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class Container(KoordModel):
    name: str
    image: str | None = None
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None
    """``Always`` on an init container makes it a sidecar that keeps running."""


class NodeSelector(KoordModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class PreferredSchedulingTerm(KoordModel):
    weight: Int32
    preference: NodeSelectorTerm


class NodeAffinity(KoordModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = None


class Affinity(KoordModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: dict[str, Any] | None = None
    """Read only to say it is not supported yet."""
    pod_anti_affinity: dict[str, Any] | None = None
    """Read only to say it is not supported yet."""


class PodSchedulingGate(KoordModel):
    name: str


class PodSpec(KoordModel):
    scheduler_name: str | None = None
    node_name: str | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    priority: Int32 | None = None
    priority_class_name: str | None = None
    preemption_policy: str | None = None
    """``PreemptLowerPriority`` (the default) or ``Never``."""
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] | None = None
    overhead: dict[str, Quantity] | None = None
    scheduling_gates: list[PodSchedulingGate] | None = None
    termination_grace_period_seconds: Int64 | None = None


class PodCondition(KoordModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: Time | None = None


class PodStatus(KoordModel):
    phase: str | None = None
    conditions: list[PodCondition] | None = None
    nominated_node_name: str | None = None


class Pod(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="", version="v1", kind="Pod", plural="pods", singular="pod", scope="Namespaced"
    )

    api_version: str | None = "v1"
    kind: str | None = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)


class NodeSpec(KoordModel):
    unschedulable: bool | None = None
    taints: list[Taint] | None = None


class NodeCondition(KoordModel):
    type: str
    status: str
    reason: str | None = None


class NodeStatus(KoordModel):
    capacity: dict[str, Quantity] | None = None
    allocatable: dict[str, Quantity] | None = None
    conditions: list[NodeCondition] | None = None


class Node(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="", version="v1", kind="Node", plural="nodes", singular="node", scope="Cluster"
    )

    api_version: str | None = "v1"
    kind: str | None = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)


class PodDisruptionBudgetSpec(KoordModel):
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class PodDisruptionBudgetStatus(KoordModel):
    disruptions_allowed: Int32 = 0
    current_healthy: Int32 = 0
    desired_healthy: Int32 = 0
    expected_pods: Int32 = 0


class PodDisruptionBudget(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="policy",
        version="v1",
        kind="PodDisruptionBudget",
        plural="poddisruptionbudgets",
        singular="poddisruptionbudget",
        scope="Namespaced",
    )

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = Field(default_factory=PodDisruptionBudgetStatus)
