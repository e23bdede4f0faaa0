"""Which cpuset a pod's containers get (algorithms 11.6, Koordinator's CPUSetAllocator hook).

The first rule that matches wins:

1. the pod's resource-status has a ``cpuset`` (LSE and LSR pods the scheduler bound): that cpuset;
2. a ``numaNodeResources`` entry asks for ``cpu`` or ``kubernetes.io/batch-cpu``: a BE pod joins the
   BE pools of those NUMA nodes when ``BECPUManager`` is on, any other pod the LS pools of those
   nodes (a BE pod without the gate goes on to the next rules);
3. a SYSTEM pod, when the node has a SYSTEM cpuset: that cpuset;
4. an LS pod: every LS pool;
5. a pod in the Kubernetes BestEffort cgroup: ``""``, the parent's CPUs (CPU suppression governs them);
6. under the kubelet's static policy: nothing (the kubelet manages the cpuset); otherwise every LS pool.

A host application (NodeSLO ``hostApplications``) of class LS gets every LS pool, as the v1.4 notes
say; no other class has a cpuset rule (Koordinator refuses them too).

Rule 6 is Koordinator v1.4's "CPUSetAllocator fix for LS/None pods": a pod without a QoS label no
longer keeps the CPUs the scheduler has since given to LSE/LSR pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from apis.core import Pod
from apis.cpulist import format_cpus, parse_cpus
from apis.extension.numa import (
    KUBELET_CPU_MANAGER_POLICY_STATIC,
    CPUSharedPool,
    get_kubelet_cpu_manager_policy,
    get_node_be_cpu_shared_pools,
    get_node_cpu_shared_pools,
    get_resource_status,
    get_system_qos_resource,
)
from apis.extension.qos import QOS_BE, QOS_LS, QOS_SYSTEM, qos_class_from_labels

__all__ = ["BATCH_CPU", "CPUSetRule", "host_app_cpuset", "pod_cpuset"]

BATCH_CPU = "kubernetes.io/batch-cpu"


@dataclass(frozen=True)
class CPUSetRule:
    """What the NodeResourceTopology says about the node's pools."""

    ls_pools: tuple[CPUSharedPool, ...] = ()
    be_pools: tuple[CPUSharedPool, ...] = ()
    kubelet_policy: str | None = None
    system_qos_cpuset: str = ""

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str] | None) -> CPUSetRule:
        """Raises InvalidAnnotation naming the key that does not parse."""
        system = get_system_qos_resource(annotations).cpuset or ""
        if system:
            parse_cpus(system)
        return cls(
            ls_pools=tuple(get_node_cpu_shared_pools(annotations)),
            be_pools=tuple(get_node_be_cpu_shared_pools(annotations)),
            kubelet_policy=get_kubelet_cpu_manager_policy(annotations).policy,
            system_qos_cpuset=system,
        )


def _join(pools: Iterable[CPUSharedPool], nodes: set[int] | None = None) -> str:
    cpus: set[int] = set()
    for pool in pools:
        if nodes is None or pool.node in nodes:
            cpus |= parse_cpus(pool.cpuset or "")
    return format_cpus(cpus)


def pod_cpuset(pod: Pod, rule: CPUSetRule, *, be_cpu_manager: bool = False) -> str | None:
    """The pod's cpuset as a CPU list; ``""`` to leave it to the parent cgroup, None to leave it
    alone. Raises InvalidAnnotation when the pod's resource-status does not parse."""
    status = get_resource_status(pod.metadata.annotations)
    if status.cpuset:
        return format_cpus(parse_cpus(status.cpuset))
    qos = qos_class_from_labels(pod.metadata.labels)
    numa_nodes = {
        entry.node
        for entry in status.numa_node_resources or ()
        if any(
            name in (entry.resources or {}) and (entry.resources or {})[name].sign() > 0
            for name in ("cpu", BATCH_CPU)
        )
    }
    if numa_nodes:
        if qos == QOS_BE and be_cpu_manager:
            return _join(rule.be_pools, numa_nodes)
        if qos != QOS_BE:
            return _join(rule.ls_pools, numa_nodes)
    if qos == QOS_SYSTEM and rule.system_qos_cpuset:
        return format_cpus(parse_cpus(rule.system_qos_cpuset))
    if qos == QOS_LS:
        return _join(rule.ls_pools)
    if pod.status.qos_class == "BestEffort":
        return ""
    if rule.kubelet_policy == KUBELET_CPU_MANAGER_POLICY_STATIC:
        return None
    return _join(rule.ls_pools)


def host_app_cpuset(name: str, qos: str, rule: CPUSetRule) -> str:
    """The cpuset of an LS host application: every LS pool. Raises ValueError for another class."""
    if qos != QOS_LS:
        raise ValueError(f"hostApplications[{name}]: cpuset is only managed for qos LS, not {qos}")
    return _join(rule.ls_pools)
