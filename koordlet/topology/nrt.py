"""The node's NodeResourceTopology as koordlet writes it (algorithms 11.2, api-reference 1.11).

:func:`desired_topology` computes koordlet's part from what it read (the host's layout, the kubelet's
policy, the Node and its pods); :func:`merge_topology` lays that part over the object in the
cluster, keeping what others wrote (zone resources such as ``kubernetes.io/batch-cpu``, other
annotations), and says whether anything changed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apis.core import Node, Pod
from apis.cpulist import format_cpus, parse_cpus
from apis.extension.numa import (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_BE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_ALLOCS,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
    LABEL_NODE_ENABLE_NUMA_RESERVATION,
    CPUTopology,
    KubeletCPUManagerPolicy,
    NodeReservation,
    SystemQOSResource,
    get_node_reservation,
    get_system_qos_resource,
)
from apis.meta import ObjectMeta, OwnerReference
from apis.quantity import Format, Quantity
from apis.topology import (
    LABEL_MANAGED_BY,
    MANAGED_BY_KOORDINATOR,
    ZONE_TYPE_NODE,
    NodeResourceTopology,
    ResourceInfo,
    Zone,
    numa_zone_name,
)
from koordlet.topology.host import HUGEPAGE_SIZES, HostTopology
from koordlet.topology.kubelet import take_by_topology
from koordlet.topology.pools import compute_pools

__all__ = ["MANAGED_ANNOTATIONS", "TopologyStatus", "desired_topology", "merge_topology", "new_topology"]

MANAGED_ANNOTATIONS = (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_BE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_NODE_CPU_ALLOCS,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
)
"""The annotations koordlet owns on the NRT: written, or removed when it has nothing to say."""


@dataclass(frozen=True)
class TopologyStatus:
    annotations: dict[str, str]
    labels: dict[str, str]
    topology_policy: str
    zones: list[Zone]


def _json(value: Any) -> str:
    """As Go's json.Marshal writes it: compact, in field order."""
    return json.dumps(value, separators=(",", ":"))


def _omit_empty(fields: dict[str, Any]) -> dict[str, Any]:
    """Go's ``omitempty``: false, empty and zero fields left out (cpu-basic-info is written so)."""
    return {key: value for key, value in fields.items() if value not in ("", False, None, 0)}


def _wire(models: Sequence[Any]) -> list[Any]:
    return [m.to_wire() for m in models]


def _node_reservation(node: Node, host: HostTopology) -> NodeReservation | None:
    """The node's reservation with concrete ``reservedCPUs``: the given list (normalised), else
    ceil(resources.cpu) CPUs taken by topology as the kubelet takes them. None without one."""
    annotations = node.metadata.annotations or {}
    if not annotations.get(ANNOTATION_NODE_RESERVATION):
        return None
    reservation = get_node_reservation(annotations)
    if reservation.reserved_cpus:
        cpus = format_cpus(parse_cpus(reservation.reserved_cpus))
    else:
        cpu = (reservation.resources or {}).get("cpu")
        count = math.ceil(cpu.milli_value() / 1000) if cpu is not None and cpu.sign() > 0 else 0
        cpus = format_cpus(take_by_topology(host.cpus, count))
    return reservation.model_copy(update={"reserved_cpus": cpus or None})


def _zone_resources(host: HostTopology, numa: int) -> dict[str, Quantity]:
    memory = host.memory.get(numa)
    resources = {
        "cpu": Quantity.from_int(len(host.cpus_of(numa))),
        "memory": Quantity.from_int(memory.memory_bytes if memory else 0, Format.BINARY_SI),
    }
    for size in HUGEPAGE_SIZES:
        held = memory.hugepages_bytes.get(size, 0) if memory else 0
        resources[f"hugepages-{size}"] = Quantity.from_int(held, Format.BINARY_SI)
    return resources


def _numa_reserved(node: Node, count: int) -> dict[str, Quantity]:
    """ceil((capacity - allocatable) / count) of the node's cpu and memory, per NUMA node."""
    capacity = node.status.capacity or {}
    allocatable = node.status.allocatable or {}
    reserved: dict[str, Quantity] = {}
    for name in ("cpu", "memory"):
        if name in capacity and name in allocatable:
            milli = (capacity[name] - allocatable[name]).milli_value()
            if milli > 0:
                fmt = capacity[name].format
                reserved[name] = Quantity.from_milli(-(-milli // count), fmt)
    return reserved


def _zones(host: HostTopology, node: Node) -> list[Zone]:
    numa_ids = host.numa_nodes
    enabled = (node.metadata.labels or {}).get(LABEL_NODE_ENABLE_NUMA_RESERVATION) == "true"
    reserved = _numa_reserved(node, len(numa_ids)) if enabled else {}
    zones = []
    for numa in numa_ids:
        resources = []
        for name, capacity in sorted(_zone_resources(host, numa).items()):
            allocatable = capacity
            if name in reserved:
                allocatable = capacity - reserved[name]
                if allocatable.sign() < 0:
                    allocatable = Quantity.from_int(0, capacity.format)
            resources.append(
                ResourceInfo(name=name, capacity=capacity, allocatable=allocatable, available=allocatable)
            )
        zones.append(Zone(name=numa_zone_name(numa), type=ZONE_TYPE_NODE, resources=resources))
    return zones


def desired_topology(
    host: HostTopology,
    node: Node,
    pods: Sequence[Pod],
    *,
    cpu_manager: KubeletCPUManagerPolicy | None,
    topology_policy: str,
    kubelet_state: Mapping[str, frozenset[int]] | None = None,
    bad_pods: list[tuple[Pod, str]] | None = None,
) -> TopologyStatus:
    """koordlet's part of the NRT. ``cpu_manager`` is None when the kubelet's configuration could
    not be read (written as ``{}``); ``kubelet_state`` is the ``cpu_manager_state`` under the static
    policy; pods whose resource-status does not parse are left out and added to ``bad_pods``.
    Raises InvalidAnnotation when the node's reservation or system-qos annotation is malformed."""
    annotations_in = node.metadata.annotations or {}
    reservation = _node_reservation(node, host)
    system_qos: SystemQOSResource | None = None
    if annotations_in.get(ANNOTATION_NODE_SYSTEM_QOS_RESOURCE):
        system_qos = get_system_qos_resource(annotations_in)
    pools = compute_pools(
        host.cpus,
        pods,
        kubelet_state=kubelet_state,
        reservation=reservation,
        system_qos=system_qos,
        bad_pods=bad_pods,
    )
    annotations = {
        ANNOTATION_CPU_BASIC_INFO: _json(_omit_empty(host.basic_info.to_wire())),
        ANNOTATION_NODE_CPU_TOPOLOGY: _json(CPUTopology(detail=list(host.cpus)).to_wire()),
        ANNOTATION_NODE_CPU_SHARED_POOLS: _json(_wire(pools.ls)),
        ANNOTATION_KUBELET_CPU_MANAGER_POLICY: _json((cpu_manager or KubeletCPUManagerPolicy()).to_wire()),
        ANNOTATION_NODE_BE_CPU_SHARED_POOLS: _json(_wire(pools.be)),
        ANNOTATION_NODE_CPU_ALLOCS: _json(_wire(pools.pod_allocs) or None),
    }
    if reservation is not None:
        annotations[ANNOTATION_NODE_RESERVATION] = _json(reservation.to_wire())
    if system_qos is not None:
        annotations[ANNOTATION_NODE_SYSTEM_QOS_RESOURCE] = _json(system_qos.to_wire())
    labels = {}
    mirrored = (node.metadata.labels or {}).get(LABEL_NODE_ENABLE_NUMA_RESERVATION)
    if mirrored:
        labels[LABEL_NODE_ENABLE_NUMA_RESERVATION] = mirrored
    return TopologyStatus(
        annotations=annotations, labels=labels, topology_policy=topology_policy, zones=_zones(host, node)
    )


def new_topology(node: Node) -> NodeResourceTopology:
    """The empty NRT koordlet creates for a node: named after it, labelled managed-by Koordinator,
    owned by it (controller reference, so that it goes with the node)."""
    name = node.metadata.name or ""
    return NodeResourceTopology(
        api_version=NodeResourceTopology.crd.api_version,
        kind=NodeResourceTopology.crd.kind,
        metadata=ObjectMeta(
            name=name,
            labels={LABEL_MANAGED_BY: MANAGED_BY_KOORDINATOR},
            owner_references=[
                OwnerReference(
                    api_version="v1",
                    kind="Node",
                    name=name,
                    uid=node.metadata.uid or "",
                    controller=True,
                    block_owner_deletion=True,
                )
            ],
        ),
        topology_policies=["None"],
        zones=[],
    )


def _merged_zones(existing: Sequence[Zone], desired: Sequence[Zone]) -> list[Zone]:
    """Zones koordlet no longer reports are dropped; in the others koordlet's resources replace
    theirs and resources others wrote stay. Zones and resources sorted by name, as Koordinator
    sorts them."""
    old = {zone.name: zone for zone in existing}
    merged = []
    for zone in desired:
        resources = {r.name: r for r in (old[zone.name].resources or ())} if zone.name in old else {}
        resources.update({r.name: r for r in zone.resources or ()})
        base = old.get(zone.name, zone)
        merged.append(
            base.model_copy(
                update={"type": zone.type, "resources": [resources[k] for k in sorted(resources)] or None}
            )
        )
    return sorted(merged, key=lambda z: z.name)


def merge_topology(existing: NodeResourceTopology, status: TopologyStatus) -> NodeResourceTopology | None:
    """``existing`` with koordlet's part replaced by ``status``; None when nothing changes."""
    annotations = {
        k: v for k, v in (existing.metadata.annotations or {}).items() if k not in MANAGED_ANNOTATIONS
    }
    annotations.update(status.annotations)
    labels = dict(existing.metadata.labels or {})
    labels.pop(LABEL_NODE_ENABLE_NUMA_RESERVATION, None)
    labels.update(status.labels)
    metadata = existing.metadata.model_copy(update={"annotations": annotations, "labels": labels or None})
    updated = existing.model_copy(
        update={
            "metadata": metadata,
            "topology_policies": [status.topology_policy],
            "zones": _merged_zones(existing.zones, status.zones),
        }
    )
    return None if updated.to_wire() == existing.to_wire() else updated
