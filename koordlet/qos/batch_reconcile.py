"""The periodic reconcile of BE pods' batch-resource cgroups (Koordinator's ``BatchResource`` hook as
registered with ``runtimehooks/reconciler``: pod level and container level, each of ``cpu.shares``,
CFS quota and memory limit).

NRI sets these values when a pod and its containers are created; kubelet may reset them later (its
BestEffort values: shares 2, no quota, no memory limit), and a koordlet started after the pod or
running without NRI never saw the creation. So every round, for each running BE pod whose containers
name batch resources, the values of :mod:`koordlet.qos.batch_resource` are written to the pod's
cgroup and to the cgroup of each container in its status that names batch resources (found by
container ID, as Koordinator finds it). A pod naming no batch resource is left alone.

On cgroups v1 a child's CFS quota may not exceed its parent's: a value going up (or to unlimited)
is written to the pod before its containers, one going down to the containers first; the memory
limit follows the same order. ``cpu.idle`` stays where the CPU QoS puts it (the BE pods' cgroups
under ``coreSched``, as NRI sets it): the kernel owns an idle group's weight and refuses a
``cpu.shares`` write there, so shares are not written to a cgroup whose ``cpu.idle`` is 1 (when it
is switched off the kernel resets the weight and the next round writes the batch value).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.koordlet_features import KoordletFeatureGates
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qos.batch_resource import (
    BatchCgroups,
    batch_quota_rule,
    batch_spec,
    container_batch_cgroups,
    is_batch_pod,
    pod_batch_cgroups,
)
from koordlet.qos.layout import CgroupLayout, kube_qos_of
from koordlet.qos.resources import CgroupResource as R
from koordlet.qos.writer import CgroupWriter

__all__ = ["BatchCgroupTargets", "BatchResourceReconciler"]


@dataclass(frozen=True)
class BatchCgroupTargets:
    """A BE pod's cgroup and its containers' with the values each should hold."""

    pod_dir: str
    pod: BatchCgroups
    containers: tuple[tuple[str, BatchCgroups], ...]


def _limit(values: BatchCgroups, resource: R) -> int:
    return values.cfs_quota if resource is R.CPU_CFS_QUOTA else values.memory_limit


class BatchResourceReconciler:
    def __init__(self, writer: CgroupWriter, layout: CgroupLayout, gates: KoordletFeatureGates) -> None:
        self.writer = writer
        self.layout = layout
        self.gates = gates

    def targets(self, pod: Pod, ratio: float | None, spec: NodeSLOSpec) -> BatchCgroupTargets | None:
        """What the pod's cgroups should hold; None for a pod left alone (not BE, no batch
        resources, a malformed extended-resource-spec, no cgroup yet)."""
        if not self.gates.batch_resource or not is_batch_pod(pod) or not pod.metadata.uid:
            return None
        if pod.status.phase in ("Succeeded", "Failed"):
            return None
        try:
            batch = batch_spec(pod)
        except InvalidAnnotation:
            return None
        rule = batch_quota_rule(spec, self.gates, ratio)
        pod_values = pod_batch_cgroups(batch, rule)
        if pod_values is None:
            return None
        pod_dir = self.layout.pod_dir(kube_qos_of(pod.status.qos_class), pod.metadata.uid)
        if not self.writer.supported(pod_dir, R.CPU_SHARES):
            return None
        containers = []
        statuses = [*(pod.status.init_container_statuses or ()), *(pod.status.container_statuses or ())]
        for status in statuses:
            values = container_batch_cgroups(batch, status.name, rule)
            path = self.layout.container_dir(pod_dir, status.container_id or "")
            # a container not started yet, or gone, has no cgroup to keep
            if values is None or path is None or not self.writer.supported(path, R.CPU_SHARES):
                continue
            containers.append((path, values))
        return BatchCgroupTargets(pod_dir, pod_values, tuple(containers))

    def apply(self, pods: Sequence[Pod], ratio: float | None, spec: NodeSLOSpec) -> list[BatchCgroupTargets]:
        """Write every BE pod's values; the targets of the pods handled."""
        handled = []
        for pod in pods:
            targets = self.targets(pod, ratio, spec)
            if targets is None:
                continue
            self._write(targets)
            handled.append(targets)
        return handled

    def _write(self, targets: BatchCgroupTargets) -> None:
        every = [(targets.pod_dir, targets.pod), *targets.containers]
        for path, values in every:
            if self.writer.read_int(path, R.CPU_IDLE) != 1:
                self.writer.write(path, R.CPU_SHARES, values.cpu_shares)
        for resource in (R.CPU_CFS_QUOTA, R.MEMORY_LIMIT):
            wanted = _limit(targets.pod, resource)
            current = self.writer.read_int(targets.pod_dir, resource)
            widening = wanted < 0 or current is None or 0 < current < wanted
            ordered = every if widening else [*targets.containers, (targets.pod_dir, targets.pod)]
            for path, values in ordered:
                self.writer.write(path, resource, _limit(values, resource))
