"""Which NUMA policy a node has, how a pod's spec merges with it, and who gets a cpuset (algorithms 11.1).

Node policy: the kubelet's topology manager policy that koordlet reports in the NodeResourceTopology
takes precedence over the node label ``node.koordinator.sh/numa-topology-policy``, as the v1.4
notes and the issue say (Koordinator's code does the opposite, 11.1). Every level koordlet emits
maps to its policy (``SingleNUMANode{Pod,Container}Level`` -> SingleNUMANode, ``Restricted*`` ->
Restricted, ``BestEffort*`` -> BestEffort); Koordinator maps only ``SingleNUMANodePodLevel`` and
treats the others as None (11.7 item 2).

Cpuset: a pod labelled LSE or LSR of the koord-prod class gets one when its effective bind policy
(required, else preferred, else the ``defaultCPUBindPolicy`` argument) is FullPCPUs or
SpreadByPCPUs; any other pod asking for cpu gets one on a node whose bind policy (label, or the
kubelet's static policy with ``full-pcpus-only``) is not None. Its cpu must then be whole CPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apis.extension.numa import NodeCPUBindPolicy, NUMATopologySpec, ResourceSpec
from apis.extension.priority import PRIORITY_PROD, priority_class_of
from apis.extension.qos import LABEL_POD_QOS, QOS_LSE, QOS_LSR, qos_class_by_name

__all__ = [
    "ERR_POLICY_NOT_MATCH",
    "NUMA_POLICIES",
    "CPURequest",
    "NodeCPUBind",
    "cpu_request",
    "kubelet_numa_policy",
    "merge_policy",
    "node_cpu_bind",
    "node_numa_policy",
]

ERR_POLICY_NOT_MATCH = "node(s) NUMA Topology policy not match"
ERR_NON_INTEGER_CPUS = "the requested CPUs must be integer"
ERR_BIND_POLICY_CONFLICT = "node(s) cpu bind policy conflicts with pod's"

NUMA_POLICIES = ("", "BestEffort", "Restricted", "SingleNUMANode")

_KUBELET_LEVELS = {
    "SingleNUMANodePodLevel": "SingleNUMANode",
    "SingleNUMANodeContainerLevel": "SingleNUMANode",
    "RestrictedPodLevel": "Restricted",
    "RestrictedContainerLevel": "Restricted",
    "BestEffortPodLevel": "BestEffort",
    "BestEffortContainerLevel": "BestEffort",
    "SingleNUMANode": "SingleNUMANode",
    "Restricted": "Restricted",
    "BestEffort": "BestEffort",
}


def kubelet_numa_policy(topology_policies: Sequence[str] | None) -> str:
    """The policy of the first recognised entry of an NRT's ``topologyPolicies`` ("" for None)."""
    for value in topology_policies or ():
        if value in _KUBELET_LEVELS:
            return _KUBELET_LEVELS[value]
    return ""


def node_numa_policy(label: str, kubelet: str) -> str:
    """The kubelet's policy when it has one, else the label's ("" for None or an unknown value)."""
    if kubelet:
        return kubelet
    return label if label in NUMA_POLICIES else ""


def merge_policy(pod: str, node: str) -> str | None:
    """The policy the pod gets on the node; None when both are set and differ."""
    if pod and node and pod != node:
        return None
    return pod or node


@dataclass(frozen=True, slots=True)
class CPURequest:
    """What PreFilter learns of a pod's CPUs (the node's own bind policy is applied per node)."""

    milli_cpu: int
    num_cpus: int
    """floor(cpu / 1000)."""
    integer: bool
    """Whether cpu is whole CPUs."""
    qos_allows: bool
    """LSE or LSR and koord-prod: may ask for a cpuset itself."""
    bind: bool
    """The pod asks for a cpuset by itself (its effective policy binds)."""
    bind_policy: str
    """The effective policy: FullPCPUs, SpreadByPCPUs or ""."""
    required_policy: str
    """The required policy ("" when only preferred)."""
    exclusive_policy: str
    numa_policy: str
    """The pod's ``numaTopologyPolicy`` ("" for none)."""
    exclusive: str | None
    """``singleNUMANodeExclusive``; Required when the pod set a policy and no exclusivity."""
    implicit_spec: bool
    """The pod's bind policy came from a default (written back into resource-spec at PreBind)."""


def cpu_request(
    *,
    milli_cpu: int,
    labels: dict[str, str],
    priority: int | None,
    spec: ResourceSpec,
    numa_spec: NUMATopologySpec,
    default_bind_policy: str,
) -> CPURequest | str:
    """The pod's CPU request and policies, or why no node can run it."""
    qos = qos_class_by_name(labels.get(LABEL_POD_QOS))
    klass = priority_class_of(priority, labels.get("koordinator.sh/priority-class"), qos)
    qos_allows = qos in (QOS_LSE, QOS_LSR) and klass == PRIORITY_PROD
    preferred: str = spec.preferred_cpu_bind_policy or ""
    implicit = preferred in ("", "Default")
    effective = default_bind_policy if implicit else preferred
    required: str = spec.required_cpu_bind_policy or ""
    if required == "Default":
        required = default_bind_policy
    if required:
        effective = required
        implicit = False
    binds = effective in ("FullPCPUs", "SpreadByPCPUs")
    integer = milli_cpu % 1000 == 0
    bind = qos_allows and binds and milli_cpu > 0
    if qos_allows and binds and not integer:
        return ERR_NON_INTEGER_CPUS
    exclusive = numa_spec.single_numa_node_exclusive
    if exclusive is None and numa_spec.numa_topology_policy:
        exclusive = "Required"
    return CPURequest(
        milli_cpu=milli_cpu,
        num_cpus=milli_cpu // 1000,
        integer=integer,
        qos_allows=qos_allows,
        bind=bind,
        bind_policy=effective if binds and qos_allows else "",
        required_policy=required if required in ("FullPCPUs", "SpreadByPCPUs") else "",
        exclusive_policy=spec.preferred_cpu_exclusive_policy or "None",
        numa_policy=numa_spec.numa_topology_policy,
        exclusive=exclusive,
        implicit_spec=implicit and bind,
    )


@dataclass(frozen=True, slots=True)
class NodeCPUBind:
    """A pod's cpuset on one node: whether it gets one, the policy, whether it is required."""

    bind: bool
    policy: str
    required: bool
    node_forced: bool = False


def node_cpu_bind(request: CPURequest, node_policy: NodeCPUBindPolicy) -> NodeCPUBind | str:
    """The pod's cpuset on a node with ``node_policy``, or why the node cannot run it."""
    if node_policy == "None" or request.milli_cpu <= 0:
        return NodeCPUBind(request.bind, request.bind_policy, bool(request.required_policy))
    forced = "FullPCPUs" if node_policy == "FullPCPUsOnly" else "SpreadByPCPUs"
    if not request.integer:
        return ERR_NON_INTEGER_CPUS
    if request.required_policy and request.required_policy != forced:
        return ERR_BIND_POLICY_CONFLICT
    return NodeCPUBind(True, forced, True, node_forced=not request.required_policy)
