"""The subset of core/v1 Pod, Node and Namespace, policy/v1 PodDisruptionBudget and scheduling/v1
PriorityClass that we read.

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
    "AWSElasticBlockStoreVolumeSource",
    "Affinity",
    "ConfigMap",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "ContainerStatus",
    "EphemeralVolumeSource",
    "GCEPersistentDiskVolumeSource",
    "ISCSIVolumeSource",
    "Namespace",
    "Node",
    "NodeAffinity",
    "NodeCondition",
    "NodeSelector",
    "NodeSpec",
    "NodeStatus",
    "PersistentVolumeClaimVolumeSource",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodCondition",
    "PodResourceClaim",
    "PodSpec",
    "PodStatus",
    "PreferredSchedulingTerm",
    "PriorityClass",
    "RBDVolumeSource",
    "ResourceRequirements",
    "TopologySpreadConstraint",
    "Volume",
    "WeightedPodAffinityTerm",
]


class ResourceRequirements(KoordModel):
    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class ContainerPort(KoordModel):
    container_port: Int32 = 0
    host_port: Int32 | None = None
    """A port on the node's network; 0 or unset: none (the pod claims no node port)."""
    host_ip: str | None = Field(default=None, alias="hostIP")
    protocol: str | None = None
    """``TCP`` (the default), ``UDP`` or ``SCTP``."""
    name: str | None = None


class Container(KoordModel):
    name: str
    image: str | None = None
    ports: list[ContainerPort] | None = None
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


class PodAffinityTerm(KoordModel):
    """Pods matching ``label_selector`` in ``namespaces`` / ``namespace_selector`` (neither: the
    pod's own namespace), counted per value of the node label ``topology_key``."""

    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None
    """Keys of the incoming pod's labels whose values are ANDed into ``label_selector`` (In)."""
    mismatch_label_keys: list[str] | None = None
    """Keys of the incoming pod's labels whose values are ANDed into ``label_selector`` (NotIn)."""


class WeightedPodAffinityTerm(KoordModel):
    weight: Int32
    pod_affinity_term: PodAffinityTerm


class PodAffinity(KoordModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class Affinity(KoordModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None
    """Same shape as ``pod_affinity`` (core/v1 ``PodAntiAffinity``)."""


class TopologySpreadConstraint(KoordModel):
    max_skew: Int32
    topology_key: str
    when_unsatisfiable: str
    """``DoNotSchedule`` (a Filter) or ``ScheduleAnyway`` (a Score)."""
    label_selector: LabelSelector | None = None
    min_domains: Int32 | None = None
    node_affinity_policy: str | None = None
    """``Honor`` (the default) or ``Ignore``: whether the pod's node affinity limits the domains."""
    node_taints_policy: str | None = None
    """``Ignore`` (the default) or ``Honor``: whether nodes with untolerated taints count."""
    match_label_keys: list[str] | None = None


class PersistentVolumeClaimVolumeSource(KoordModel):
    claim_name: str
    read_only: bool | None = None


class GCEPersistentDiskVolumeSource(KoordModel):
    pd_name: str = Field(alias="pdName")
    read_only: bool | None = None


class AWSElasticBlockStoreVolumeSource(KoordModel):
    volume_id: str = Field(alias="volumeID")
    read_only: bool | None = None


class RBDVolumeSource(KoordModel):
    monitors: list[str] = Field(default_factory=list)
    image: str = ""
    pool: str | None = None
    read_only: bool | None = None


class ISCSIVolumeSource(KoordModel):
    target_portal: str = ""
    iqn: str = ""
    lun: Int32 = 0
    read_only: bool | None = None


class EphemeralVolumeSource(KoordModel):
    volume_claim_template: dict[str, Any] | None = None
    """The PVC created for the pod, named ``<pod>-<volume>``; its spec is read from the PVC."""


class Volume(KoordModel):
    """The volume sources scheduling looks at; any other source is accepted and ignored."""

    name: str
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None
    gce_persistent_disk: GCEPersistentDiskVolumeSource | None = None
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource | None = None
    rbd: RBDVolumeSource | None = None
    iscsi: ISCSIVolumeSource | None = None
    host_path: dict[str, Any] | None = None
    """Read by the descheduler only: local storage keeps a pod in place."""
    empty_dir: dict[str, Any] | None = None
    """Read by the descheduler only: local storage keeps a pod in place."""


class PodSchedulingGate(KoordModel):
    name: str


class PodResourceClaim(KoordModel):
    """A dynamic resource (DRA) claim of the pod: ``resource.k8s.io`` ResourceClaim by name or made
    from a ResourceClaimTemplate."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


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
    resource_claims: list[PodResourceClaim] | None = None
    termination_grace_period_seconds: Int64 | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    volumes: list[Volume] | None = None


class PodCondition(KoordModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: Time | None = None


class ContainerStatus(KoordModel):
    name: str
    container_id: str | None = Field(default=None, alias="containerID")
    """``<runtime>://<id>`` (``containerd://...``), unset before the runtime has created it."""


class PodStatus(KoordModel):
    phase: str | None = None
    conditions: list[PodCondition] | None = None
    nominated_node_name: str | None = None
    qos_class: str | None = None
    """Kubernetes QoS class kubelet computed: Guaranteed, Burstable or BestEffort."""
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None


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


class ContainerImage(KoordModel):
    names: list[str] | None = None
    size_bytes: Int64 | None = None


class NodeStatus(KoordModel):
    capacity: dict[str, Quantity] | None = None
    allocatable: dict[str, Quantity] | None = None
    conditions: list[NodeCondition] | None = None
    images: list[ContainerImage] | None = None


class Node(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="", version="v1", kind="Node", plural="nodes", singular="node", scope="Cluster"
    )

    api_version: str | None = "v1"
    kind: str | None = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)


class Namespace(KoordModel):
    """Only its labels are read: a pod affinity term's ``namespaceSelector`` selects by them."""

    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="", version="v1", kind="Namespace", plural="namespaces", singular="namespace", scope="Cluster"
    )

    api_version: str | None = "v1"
    kind: str | None = "Namespace"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)


class ConfigMap(KoordModel):
    """Read for its ``data`` (DeviceShare's shared-resource templates)."""

    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="",
        version="v1",
        kind="ConfigMap",
        plural="configmaps",
        singular="configmap",
        scope="Namespaced",
    )

    api_version: str | None = "v1"
    kind: str | None = "ConfigMap"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    data: dict[str, str] | None = None


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


class PriorityClass(KoordModel):
    """scheduling.k8s.io/v1 PriorityClass: what a ClusterColocationProfile's priorityClassName
    copies into the pod (its value and preemption policy)."""

    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="scheduling.k8s.io",
        version="v1",
        kind="PriorityClass",
        plural="priorityclasses",
        singular="priorityclass",
        scope="Cluster",
    )

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    value: Int32 = 0
    preemption_policy: str | None = None
    """``PreemptLowerPriority`` (the API server's default) or ``Never``."""
