"""NUMA and CPU orchestration labels and annotations (api-reference 2.7).

Pod annotations: numa-topology-spec, resource-spec, resource-status. Node labels: cpu-bind-policy,
numa-allocate-strategy, numa-topology-policy. NodeResourceTopology annotations: cpu-topology,
pod-cpu-allocs, (be-)cpu-shared-pools, kubelet cpu-manager-policy, cpu-basic-info. Node annotations:
reservation, system-qos-resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from apis.base import KoordModel
from apis.extension._annotation import EmptyAsNone, NonNegativeResourceList, lookup, parse_json
from apis.types import CPUID, CPUList, NonNegativeInt32

__all__ = [
    "ANNOTATION_CPU_BASIC_INFO",
    "ANNOTATION_KUBELET_CPU_MANAGER_POLICY",
    "ANNOTATION_NODE_BE_CPU_SHARED_POOLS",
    "ANNOTATION_NODE_CPU_ALLOCS",
    "ANNOTATION_NODE_CPU_SHARED_POOLS",
    "ANNOTATION_NODE_CPU_TOPOLOGY",
    "ANNOTATION_NODE_RESERVATION",
    "ANNOTATION_NODE_SYSTEM_QOS_RESOURCE",
    "ANNOTATION_NUMA_TOPOLOGY_SPEC",
    "ANNOTATION_RESOURCE_SPEC",
    "ANNOTATION_RESOURCE_STATUS",
    "KUBELET_CPU_MANAGER_POLICY_NONE",
    "KUBELET_CPU_MANAGER_POLICY_OPTION_DISTRIBUTE_CPUS_ACROSS_NUMA",
    "KUBELET_CPU_MANAGER_POLICY_OPTION_FULL_PCPUS_ONLY",
    "KUBELET_CPU_MANAGER_POLICY_STATIC",
    "LABEL_NODE_CPU_BIND_POLICY",
    "LABEL_NODE_ENABLE_NUMA_RESERVATION",
    "LABEL_NODE_NUMA_ALLOCATE_STRATEGY",
    "LABEL_NUMA_TOPOLOGY_POLICY",
    "CPUBasicInfo",
    "CPUBindPolicy",
    "CPUExclusivePolicy",
    "CPUInfo",
    "CPUSharedPool",
    "CPUTopology",
    "KubeletCPUManagerPolicy",
    "NUMAAllocateStrategy",
    "NUMANodeResource",
    "NUMATopologyExclusive",
    "NUMATopologyPolicy",
    "NUMATopologySpec",
    "NodeCPUBindPolicy",
    "NodeReservation",
    "NodeReservationApplyPolicy",
    "PodCPUAlloc",
    "ResourceSpec",
    "ResourceStatus",
    "SystemQOSResource",
    "get_cpu_basic_info",
    "get_cpu_topology",
    "get_kubelet_cpu_manager_policy",
    "get_node_be_cpu_shared_pools",
    "get_node_cpu_shared_pools",
    "get_node_reservation",
    "get_numa_topology_spec",
    "get_pod_cpu_allocs",
    "get_resource_spec",
    "get_resource_status",
    "get_system_qos_resource",
    "node_cpu_bind_policy",
    "node_numa_allocate_strategy",
    "node_numa_topology_policy",
    "parse_cpu_basic_info",
    "parse_cpu_shared_pools",
    "parse_cpu_topology",
    "parse_kubelet_cpu_manager_policy",
    "parse_node_reservation",
    "parse_numa_topology_spec",
    "parse_pod_cpu_allocs",
    "parse_resource_spec",
    "parse_resource_status",
    "parse_system_qos_resource",
]

_SCHED = "scheduling.koordinator.sh"
_NODE = "node.koordinator.sh"

ANNOTATION_NUMA_TOPOLOGY_SPEC = _SCHED + "/numa-topology-spec"
ANNOTATION_RESOURCE_SPEC = _SCHED + "/resource-spec"
ANNOTATION_RESOURCE_STATUS = _SCHED + "/resource-status"

ANNOTATION_NODE_CPU_TOPOLOGY = _NODE + "/cpu-topology"
ANNOTATION_NODE_CPU_ALLOCS = _NODE + "/pod-cpu-allocs"
ANNOTATION_NODE_CPU_SHARED_POOLS = _NODE + "/cpu-shared-pools"
ANNOTATION_NODE_BE_CPU_SHARED_POOLS = _NODE + "/be-cpu-shared-pools"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_NODE_RESERVATION = _NODE + "/reservation"
ANNOTATION_NODE_SYSTEM_QOS_RESOURCE = _NODE + "/system-qos-resource"
ANNOTATION_CPU_BASIC_INFO = _NODE + "/cpu-basic-info"
"""On the NodeResourceTopology (koordlet writes it): the node's CPU model, hyper-threading and turbo."""

LABEL_NODE_CPU_BIND_POLICY = _NODE + "/cpu-bind-policy"
LABEL_NODE_NUMA_ALLOCATE_STRATEGY = _NODE + "/numa-allocate-strategy"
LABEL_NUMA_TOPOLOGY_POLICY = _NODE + "/numa-topology-policy"
LABEL_NODE_ENABLE_NUMA_RESERVATION = _NODE + "/enable-numa-reservation"

KUBELET_CPU_MANAGER_POLICY_STATIC = "static"
KUBELET_CPU_MANAGER_POLICY_NONE = "none"
KUBELET_CPU_MANAGER_POLICY_OPTION_FULL_PCPUS_ONLY = "full-pcpus-only"
KUBELET_CPU_MANAGER_POLICY_OPTION_DISTRIBUTE_CPUS_ACROSS_NUMA = "distribute-cpus-across-numa"

NUMATopologyPolicy = Literal["", "BestEffort", "Restricted", "SingleNUMANode"]
"""``""`` means no policy."""
NUMATopologyExclusive = Literal["Required", "Preferred"]
CPUBindPolicy = Literal["Default", "FullPCPUs", "SpreadByPCPUs", "ConstrainedBurst"]
CPUExclusivePolicy = Literal["None", "PCPULevel", "NUMANodeLevel"]
NodeCPUBindPolicy = Literal["None", "FullPCPUsOnly", "SpreadByPCPUs"]
NUMAAllocateStrategy = Literal["MostAllocated", "LeastAllocated", "DistributeEvenly"]
NodeReservationApplyPolicy = Literal["Default", "ReservedCPUsOnly"]

# --- pod annotations -------------------------------------------------------------------------------


class NUMATopologySpec(KoordModel):
    numa_topology_policy: NUMATopologyPolicy = Field(default="", alias="numaTopologyPolicy")
    single_numa_node_exclusive: Annotated[NUMATopologyExclusive | None, EmptyAsNone] = Field(
        default=None, alias="singleNUMANodeExclusive"
    )


class ResourceSpec(KoordModel):
    required_cpu_bind_policy: Annotated[CPUBindPolicy | None, EmptyAsNone] = Field(
        default=None, alias="requiredCPUBindPolicy"
    )
    """The CPUs must be bound this way, otherwise scheduling fails."""
    preferred_cpu_bind_policy: Annotated[CPUBindPolicy | None, EmptyAsNone] = Field(
        default=None, alias="preferredCPUBindPolicy"
    )
    preferred_cpu_exclusive_policy: Annotated[CPUExclusivePolicy | None, EmptyAsNone] = Field(
        default=None, alias="preferredCPUExclusivePolicy"
    )


class NUMANodeResource(KoordModel):
    node: NonNegativeInt32
    resources: NonNegativeResourceList | None = None


class ResourceStatus(KoordModel):
    cpuset: CPUList | None = None
    """Linux CPU list, e.g. ``"0-3,8"``."""
    numa_node_resources: list[NUMANodeResource] | None = None


def parse_numa_topology_spec(raw: str) -> NUMATopologySpec:
    return parse_json(ANNOTATION_NUMA_TOPOLOGY_SPEC, raw, NUMATopologySpec)


def get_numa_topology_spec(annotations: Mapping[str, str] | None) -> NUMATopologySpec:
    """An empty spec (no policy) when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_NUMA_TOPOLOGY_SPEC)
    return NUMATopologySpec() if raw is None else parse_numa_topology_spec(raw)


def parse_resource_spec(raw: str) -> ResourceSpec:
    return parse_json(ANNOTATION_RESOURCE_SPEC, raw, ResourceSpec)


def get_resource_spec(annotations: Mapping[str, str] | None) -> ResourceSpec:
    """An empty spec when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_RESOURCE_SPEC)
    return ResourceSpec() if raw is None else parse_resource_spec(raw)


def parse_resource_status(raw: str) -> ResourceStatus:
    return parse_json(ANNOTATION_RESOURCE_STATUS, raw, ResourceStatus)


def get_resource_status(annotations: Mapping[str, str] | None) -> ResourceStatus:
    """An empty status when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_RESOURCE_STATUS)
    return ResourceStatus() if raw is None else parse_resource_status(raw)


# --- node labels -----------------------------------------------------------------------------------


class KubeletCPUManagerPolicy(KoordModel):
    policy: str | None = None
    """``static`` or ``none``."""
    options: dict[str, str] | None = None
    reserved_cpus: CPUList | None = Field(default=None, alias="reservedCPUs")


def node_cpu_bind_policy(
    labels: Mapping[str, str] | None, kubelet_policy: KubeletCPUManagerPolicy | None = None
) -> NodeCPUBindPolicy:
    """The node-enforced bind policy; a static kubelet policy with ``full-pcpus-only=true`` also means
    FullPCPUsOnly, and an unknown label value means None."""
    value = lookup(labels, LABEL_NODE_CPU_BIND_POLICY)
    if value == "FullPCPUsOnly" or (
        kubelet_policy is not None
        and kubelet_policy.policy == KUBELET_CPU_MANAGER_POLICY_STATIC
        and (kubelet_policy.options or {}).get(KUBELET_CPU_MANAGER_POLICY_OPTION_FULL_PCPUS_ONLY) == "true"
    ):
        return "FullPCPUsOnly"
    if value == "SpreadByPCPUs":
        return "SpreadByPCPUs"
    return "None"


def node_numa_allocate_strategy(
    labels: Mapping[str, str] | None, default: NUMAAllocateStrategy
) -> NUMAAllocateStrategy:
    """The label value when it is one of the three strategies, else ``default`` (derived by the caller
    from ``numaScoringStrategy.type``: MostAllocated -> MostAllocated, anything else -> LeastAllocated)."""
    value = lookup(labels, LABEL_NODE_NUMA_ALLOCATE_STRATEGY)
    if value in ("MostAllocated", "LeastAllocated", "DistributeEvenly"):
        return value  # type: ignore[return-value]
    return default


def node_numa_topology_policy(labels: Mapping[str, str] | None) -> str:
    """The raw node NUMA policy label (``""`` when absent; the caller falls back to the kubelet policy)."""
    return lookup(labels, LABEL_NUMA_TOPOLOGY_POLICY) or ""


# --- NodeResourceTopology annotations --------------------------------------------------------------


class CPUInfo(KoordModel):
    id: CPUID
    core: NonNegativeInt32
    socket: NonNegativeInt32
    node: NonNegativeInt32


class CPUTopology(KoordModel):
    detail: list[CPUInfo] | None = None


class PodCPUAlloc(KoordModel):
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    cpuset: CPUList | None = None
    managed_by_kubelet: bool | None = None


class CPUSharedPool(KoordModel):
    socket: NonNegativeInt32 = 0
    """Omitted on the wire when 0."""
    node: NonNegativeInt32 = 0
    """Omitted on the wire when 0."""
    cpuset: CPUList | None = None


def parse_cpu_topology(raw: str) -> CPUTopology:
    return parse_json(ANNOTATION_NODE_CPU_TOPOLOGY, raw, CPUTopology)


def get_cpu_topology(annotations: Mapping[str, str] | None) -> CPUTopology:
    raw = lookup(annotations, ANNOTATION_NODE_CPU_TOPOLOGY)
    return CPUTopology() if raw is None else parse_cpu_topology(raw)


_ALLOCS: TypeAdapter[list[PodCPUAlloc]] = TypeAdapter(list[PodCPUAlloc])
_POOLS: TypeAdapter[list[CPUSharedPool]] = TypeAdapter(list[CPUSharedPool])


def parse_pod_cpu_allocs(raw: str) -> list[PodCPUAlloc]:
    return parse_json(ANNOTATION_NODE_CPU_ALLOCS, raw, _ALLOCS)


def get_pod_cpu_allocs(annotations: Mapping[str, str] | None) -> list[PodCPUAlloc]:
    raw = lookup(annotations, ANNOTATION_NODE_CPU_ALLOCS)
    return [] if raw is None else parse_pod_cpu_allocs(raw)


def parse_cpu_shared_pools(raw: str, key: str = ANNOTATION_NODE_CPU_SHARED_POOLS) -> list[CPUSharedPool]:
    """The LS (``cpu-shared-pools``) or BE (``be-cpu-shared-pools``) shared pools."""
    return parse_json(key, raw, _POOLS)


def get_node_cpu_shared_pools(annotations: Mapping[str, str] | None) -> list[CPUSharedPool]:
    raw = lookup(annotations, ANNOTATION_NODE_CPU_SHARED_POOLS)
    return [] if raw is None else parse_cpu_shared_pools(raw)


def get_node_be_cpu_shared_pools(annotations: Mapping[str, str] | None) -> list[CPUSharedPool]:
    raw = lookup(annotations, ANNOTATION_NODE_BE_CPU_SHARED_POOLS)
    return [] if raw is None else parse_cpu_shared_pools(raw, ANNOTATION_NODE_BE_CPU_SHARED_POOLS)


def parse_kubelet_cpu_manager_policy(raw: str) -> KubeletCPUManagerPolicy:
    return parse_json(ANNOTATION_KUBELET_CPU_MANAGER_POLICY, raw, KubeletCPUManagerPolicy)


def get_kubelet_cpu_manager_policy(annotations: Mapping[str, str] | None) -> KubeletCPUManagerPolicy:
    raw = lookup(annotations, ANNOTATION_KUBELET_CPU_MANAGER_POLICY)
    return KubeletCPUManagerPolicy() if raw is None else parse_kubelet_cpu_manager_policy(raw)


# --- node annotations ------------------------------------------------------------------------------


class NodeReservation(KoordModel):
    resources: NonNegativeResourceList | None = None
    reserved_cpus: CPUList | None = Field(default=None, alias="reservedCPUs")
    """A Linux CPU list; when set it wins over the cpu amount in ``resources``."""
    apply_policy: Annotated[NodeReservationApplyPolicy | None, EmptyAsNone] = None


class SystemQOSResource(KoordModel):
    cpuset: CPUList | None = None
    cpuset_exclusive: bool | None = None
    """Whether the SYSTEM cpuset is exclusive; unset means true."""

    @property
    def is_cpuset_exclusive(self) -> bool:
        return self.cpuset_exclusive is None or self.cpuset_exclusive


def parse_node_reservation(raw: str) -> NodeReservation:
    return parse_json(ANNOTATION_NODE_RESERVATION, raw, NodeReservation)


def get_node_reservation(annotations: Mapping[str, str] | None) -> NodeReservation:
    """An empty reservation when absent or empty."""
    raw = lookup(annotations, ANNOTATION_NODE_RESERVATION)
    return parse_node_reservation(raw) if raw else NodeReservation()


def parse_system_qos_resource(raw: str) -> SystemQOSResource:
    return parse_json(ANNOTATION_NODE_SYSTEM_QOS_RESOURCE, raw, SystemQOSResource)


def get_system_qos_resource(annotations: Mapping[str, str] | None) -> SystemQOSResource:
    raw = lookup(annotations, ANNOTATION_NODE_SYSTEM_QOS_RESOURCE)
    return SystemQOSResource() if raw is None else parse_system_qos_resource(raw)


# --- CPU basic info (NodeResourceTopology annotation) ----------------------------------------------


class CPUBasicInfo(KoordModel):
    """What CPU normalization looks the ratio up by (``apis/extension/cpu_normalization.go``)."""

    cpu_model: str = Field(default="", alias="cpuModel")
    """The model name as ``/proc/cpuinfo`` gives it, e.g. ``Intel Xeon Platinum 8369B CPU @ 2.90GHz``."""
    hyper_thread_enabled: bool = False
    turbo_enabled: bool = False
    cat_l3_cbm_mask: str | None = Field(default=None, alias="catL3CbmMask")
    vendor_id: str | None = Field(default=None, alias="vendorID")


def parse_cpu_basic_info(raw: str) -> CPUBasicInfo:
    return parse_json(ANNOTATION_CPU_BASIC_INFO, raw, CPUBasicInfo)


def get_cpu_basic_info(annotations: Mapping[str, str] | None) -> CPUBasicInfo | None:
    """None when the annotation is absent."""
    raw = lookup(annotations, ANNOTATION_CPU_BASIC_INFO)
    return None if raw is None else parse_cpu_basic_info(raw)
