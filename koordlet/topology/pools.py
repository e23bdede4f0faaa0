"""The CPU pools koordlet publishes on the NodeResourceTopology (algorithms 11.2).

- ``pod-cpu-allocs``: under the kubelet's static policy, the CPUs ``cpu_manager_state`` gave each
  pod, one entry per pod sorted by UID; pods labelled LS or BE and pods that carry a scheduler
  cpuset (resource-status) are Koordinator's, not the kubelet's, and are left out.
- LS shared pool, per NUMA node: every CPU less the kubelet's pod CPUs, every resource-status
  cpuset, the node reservation's ``reservedCPUs`` and an exclusive SYSTEM cpuset. The kubelet's own
  reserved CPUs stay in it, so that a pod without a request still has somewhere to run.
- BE shared pool: the same, except that of the resource-status cpusets only LSE ones are removed
  (LSR pods share their CPUs with BE pods).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from apis.core import Pod
from apis.cpulist import format_cpus, parse_cpus
from apis.errors import InvalidAnnotation
from apis.extension.numa import (
    ANNOTATION_RESOURCE_STATUS,
    CPUInfo,
    CPUSharedPool,
    NodeReservation,
    PodCPUAlloc,
    SystemQOSResource,
    get_resource_status,
)
from apis.extension.qos import QOS_BE, QOS_LS, QOS_LSE, qos_class_from_labels

__all__ = ["CPUPools", "PodCPUSet", "compute_pools", "pod_cpusets", "shared_pools"]


@dataclass(frozen=True)
class PodCPUSet:
    """A pod's scheduler-chosen cpuset (its resource-status), with its QoS label."""

    uid: str
    qos: str
    cpus: frozenset[int]


@dataclass(frozen=True)
class CPUPools:
    pod_allocs: list[PodCPUAlloc]
    ls: list[CPUSharedPool]
    be: list[CPUSharedPool]


def _terminated(pod: Pod) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")


def pod_cpusets(pods: Iterable[Pod], bad: list[tuple[Pod, str]] | None = None) -> list[PodCPUSet]:
    """The running pods' resource-status cpusets. A pod whose annotation does not parse is left out
    and added to ``bad`` with the problem (the caller logs it and posts an event)."""
    found = []
    for pod in pods:
        if _terminated(pod):
            continue
        try:
            status = get_resource_status(pod.metadata.annotations)
            cpus = parse_cpus(status.cpuset or "")
        except (InvalidAnnotation, ValueError) as exc:
            problem = (
                str(exc) if isinstance(exc, InvalidAnnotation) else f"{ANNOTATION_RESOURCE_STATUS}: {exc}"
            )
            if bad is not None:
                bad.append((pod, problem))
            continue
        if cpus:
            qos = qos_class_from_labels(pod.metadata.labels)
            found.append(PodCPUSet(uid=pod.metadata.uid or "", qos=qos, cpus=cpus))
    return found


def _kubelet_allocs(
    kubelet_state: Mapping[str, frozenset[int]], pods: Sequence[Pod], cpusets: Sequence[PodCPUSet]
) -> list[PodCPUAlloc]:
    by_uid = {pod.metadata.uid: pod for pod in pods}
    koordinator_managed = {c.uid for c in cpusets} | {
        pod.metadata.uid for pod in pods if qos_class_from_labels(pod.metadata.labels) in (QOS_LS, QOS_BE)
    }
    allocs = []
    for uid in sorted(kubelet_state):
        if uid in koordinator_managed:
            continue
        pod = by_uid.get(uid)
        allocs.append(
            PodCPUAlloc(
                namespace=pod.metadata.namespace if pod else None,
                name=pod.metadata.name if pod else None,
                uid=uid,
                cpuset=format_cpus(kubelet_state[uid]),
                managed_by_kubelet=True,
            )
        )
    return allocs


def shared_pools(
    cpus: Sequence[CPUInfo], free: Iterable[int], removed: frozenset[int]
) -> list[CPUSharedPool]:
    """One pool per NUMA node that has CPUs in ``free``, sorted by (socket, node); its socket is
    that of its lowest CPU. ``removed`` is taken out afterwards, which may leave a pool empty (its
    ``cpuset`` then left out, as Koordinator writes it)."""
    info = {cpu.id: cpu for cpu in cpus}
    by_node: dict[int, list[int]] = {}
    for cpu in sorted(set(free)):
        by_node.setdefault(info[cpu].node, []).append(cpu)
    pools = [
        CPUSharedPool(
            socket=info[members[0]].socket,
            node=node,
            cpuset=format_cpus(set(members) - removed) or None,
        )
        for node, members in by_node.items()
    ]
    return sorted(pools, key=lambda p: (p.socket, p.node))


def compute_pools(
    cpus: Sequence[CPUInfo],
    pods: Sequence[Pod],
    *,
    kubelet_state: Mapping[str, frozenset[int]] | None,
    reservation: NodeReservation | None,
    system_qos: SystemQOSResource | None,
    bad_pods: list[tuple[Pod, str]] | None = None,
) -> CPUPools:
    """``kubelet_state`` is given only under the kubelet's static policy (pod UID -> CPUs)."""
    cpusets = pod_cpusets(pods, bad_pods)
    allocs = _kubelet_allocs(kubelet_state, pods, cpusets) if kubelet_state is not None else []
    base = {cpu.id for cpu in cpus}
    for alloc in allocs:
        base -= parse_cpus(alloc.cpuset or "")
    ls, be = set(base), set(base)
    for pod_cpus in cpusets:
        ls -= pod_cpus.cpus
        if pod_cpus.qos == QOS_LSE:
            be -= pod_cpus.cpus
    removed: set[int] = set()
    if reservation is not None and reservation.reserved_cpus:
        removed |= parse_cpus(reservation.reserved_cpus)
    if system_qos is not None and system_qos.cpuset and system_qos.is_cpuset_exclusive:
        removed |= parse_cpus(system_qos.cpuset)
    frozen = frozenset(removed)
    return CPUPools(pod_allocs=allocs, ls=shared_pools(cpus, ls, frozen), be=shared_pools(cpus, be, frozen))
