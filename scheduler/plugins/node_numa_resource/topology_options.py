"""What the scheduler takes from a node's NodeResourceTopology (algorithms 11.2, ``nnr/topology_options.go``).

Rebuilt on every NRT event: the CPU topology (``node.koordinator.sh/cpu-topology``), the CPUs no pod
may be given (kubelet-managed pods' cpusets from ``pod-cpu-allocs``, the kubelet's ``reservedCPUs``,
the node reservation's ``reservedCPUs``, an exclusive system-QoS cpuset), each NUMA zone's
allocatable (cpu less one CPU per reserved CPU on it), the kubelet's topology policy and CPU
manager policy. A malformed annotation is reported and the rest of the NRT is still used.

On a node with amplification ratios (CPU normalization, ``resource-amplification-config``) the
plugin works on ``amplified(ratios)``: each zone's resources amplified as the Node webhook
amplifies the node's allocatable, and cpuset CPUs counted amplified against the zone's cpu
(Koordinator's ``amplifyNUMANodeResources``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from apis.errors import InvalidAnnotation
from apis.extension.numa import (
    KubeletCPUManagerPolicy,
    get_cpu_topology,
    get_kubelet_cpu_manager_policy,
    get_node_reservation,
    get_pod_cpu_allocs,
    get_system_qos_resource,
)
from apis.resources import to_int_units
from apis.topology import NodeResourceTopology
from scheduler.plugins.node_numa_resource.amplification import amplify
from scheduler.plugins.node_numa_resource.cpu_topology import CPUSet, CPUTopology
from scheduler.plugins.node_numa_resource.policy import kubelet_numa_policy

__all__ = ["TopologyOptions", "topology_options"]


@dataclass(frozen=True)
class TopologyOptions:
    cpu_topology: CPUTopology
    reserved_cpus: frozenset[int]
    numa_allocatable: Mapping[int, Mapping[str, int]]
    """NUMA id -> resource -> allocatable (milli for cpu), reserved CPUs taken off."""
    kubelet_policy: str
    """The kubelet's NUMA policy ("" for None)."""
    cpu_manager_policy: KubeletCPUManagerPolicy = field(default_factory=KubeletCPUManagerPolicy)
    problems: tuple[str, ...] = ()
    """Annotations that could not be read (their part is left out)."""
    cpu_ratio: float = 1.0
    """The node's cpu amplification ratio these options were amplified by (1: none)."""

    @property
    def numa_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self.numa_allocatable))

    def amplified(self, ratios: Mapping[str, float]) -> TopologyOptions:
        """These options on a node whose resources are amplified by ``ratios`` (a ratio <= 1
        amplifies nothing; itself when none does)."""
        if not any(ratio > 1 for ratio in ratios.values()):
            return self
        numa = {
            numa_id: {name: amplify(amount, ratios.get(name, 1.0)) for name, amount in zone.items()}
            for numa_id, zone in self.numa_allocatable.items()
        }
        return replace(self, numa_allocatable=numa, cpu_ratio=max(ratios.get("cpu", 1.0), 1.0))


def _cpuset(text: str | None, what: str, problems: list[str]) -> frozenset[int]:
    if not text:
        return frozenset()
    try:
        return CPUSet.parse(text)
    except ValueError as exc:
        problems.append(f"{what}: {exc}")
        return frozenset()


def topology_options(nrt: NodeResourceTopology) -> TopologyOptions:
    annotations = nrt.metadata.annotations or {}
    problems: list[str] = []
    try:
        cpu_topology = CPUTopology.from_annotation(get_cpu_topology(annotations))
    except (InvalidAnnotation, ValueError) as exc:
        problems.append(str(exc))
        cpu_topology = CPUTopology.build(())
    try:
        manager = get_kubelet_cpu_manager_policy(annotations)
    except InvalidAnnotation as exc:
        problems.append(str(exc))
        manager = KubeletCPUManagerPolicy()
    reserved: set[int] = set(_cpuset(manager.reserved_cpus, "kubelet reservedCPUs", problems))
    try:
        for alloc in get_pod_cpu_allocs(annotations):
            if alloc.managed_by_kubelet and alloc.uid and alloc.cpuset:
                reserved |= _cpuset(alloc.cpuset, f"pod-cpu-allocs {alloc.name}", problems)
    except InvalidAnnotation as exc:
        problems.append(str(exc))
    try:
        reserved |= _cpuset(get_node_reservation(annotations).reserved_cpus, "reservation", problems)
    except InvalidAnnotation as exc:
        problems.append(str(exc))
    try:
        system = get_system_qos_resource(annotations)
        if system.is_cpuset_exclusive:
            reserved |= _cpuset(system.cpuset, "system-qos-resource", problems)
    except InvalidAnnotation as exc:
        problems.append(str(exc))
    numa: dict[int, dict[str, int]] = {}
    for numa_id, zone in sorted(nrt.numa_zones().items()):
        numa[numa_id] = {r.name: to_int_units(r.name, r.allocatable) for r in zone.resources or ()}
    for cpu in reserved:
        detail = cpu_topology.details.get(cpu)
        if detail is not None and detail.node_id in numa and "cpu" in numa[detail.node_id]:
            numa[detail.node_id]["cpu"] = max(0, numa[detail.node_id]["cpu"] - 1000)
    return TopologyOptions(
        cpu_topology=cpu_topology,
        reserved_cpus=frozenset(reserved),
        numa_allocatable=numa,
        kubelet_policy=kubelet_numa_policy(nrt.topology_policies),
        cpu_manager_policy=manager,
        problems=tuple(problems),
    )
