"""CFS quota of pods on a CPU-normalized node (Koordinator's ``CPUNormalization`` and ``BatchResource``
runtime hook, ``pkg/koordlet/runtimehooks/hooks/cpunormalization``).

koord-manager writes ``node.koordinator.sh/cpu-normalization-ratio`` on a node whose CPUs are faster
than the reference model and amplifies its allocatable by that ratio; so that one normalized core
still buys one reference core, koordlet divides the pod's CFS quota by the ratio (rounded up):

- LS and no-QoS pods (gate ``CPUNormalization``, off by default): the quota of the pod's ``cpu``
  limits (the sum over its containers; unlimited when one container has no limit). A pod bound to
  CPUs (a cpuset in ``scheduling.koordinator.sh/resource-status``) is left alone: its quota is
  unset (``-1``) by the cpuset writer.
- BE pods: not here. Their quota (of their batch-cpu limits, divided by the same ratio) is kept with
  their other batch-resource values by :mod:`koordlet.qos.batch_reconcile`.
- LSE, LSR and SYSTEM pods are never touched.

The ratio absent or not above 1 means the quota of the limit itself. The pod's cgroup holds the
normalized quota. The Pod object does not map containers to their cgroups, so the container of a
one-container pod (its only limited child) takes the pod's quota, and in a pod of several
containers a container above the pod's new quota is brought down to it. Writes are ordered for
cgroups v1, which keeps a child at or below its parent: a quota going up is written to the pod
first, one going down to the containers first.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.amplification import get_cpu_normalization_ratio
from apis.extension.numa import get_resource_status
from apis.extension.qos import QOS_LS, QOS_NONE, qos_class_from_labels
from apis.koordlet_features import KoordletFeatureGates
from koordlet.qos.cfs import CFS_PERIOD_US, normalize_quota, quota_of_milli
from koordlet.qos.layout import CgroupLayout, kube_qos_of
from koordlet.qos.resources import CgroupResource as R
from koordlet.qos.writer import CgroupWriter

__all__ = [
    "CFS_PERIOD_US",
    "AppliedQuota",
    "CPUNormalizer",
    "node_ratio",
    "normalize_quota",
    "pod_cfs_quota",
    "quota_of_milli",
]

log = logging.getLogger("koordlet.qos")


def node_ratio(annotations: dict[str, str] | None) -> float | None:
    """The node's ratio, None when absent; :class:`InvalidAnnotation` when malformed."""
    return get_cpu_normalization_ratio(annotations)


def _limits_milli(pod: Pod) -> int:
    """Sum of the containers' cpu limits in milli-cores; -1 once a container has none."""
    total = 0
    for container in pod.spec.containers:
        limits = (container.resources.limits if container.resources else None) or {}
        quantity = limits.get("cpu")
        if quantity is None or quantity.milli_value() <= 0:
            return -1
        total += quantity.milli_value()
    return total


def pod_cfs_quota(pod: Pod, ratio: float | None, gates: KoordletFeatureGates) -> int | None:
    """The pod-level quota koordlet writes (v1 units, -1 unlimited), None to leave the pod alone."""
    meta = pod.metadata
    if qos_class_from_labels(meta.labels) not in (QOS_LS, QOS_NONE) or not gates.cpu_normalization:
        return None
    try:
        if get_resource_status(meta.annotations).cpuset:
            return None
    except InvalidAnnotation:
        return None
    return normalize_quota(quota_of_milli(_limits_milli(pod)), ratio)


@dataclass(frozen=True)
class AppliedQuota:
    uid: str
    path: str
    quota: int


class CPUNormalizer:
    """Writes the pod-level CFS quota of every running pod, one round at a time."""

    def __init__(self, writer: CgroupWriter, layout: CgroupLayout, gates: KoordletFeatureGates) -> None:
        self.writer = writer
        self.layout = layout
        self.gates = gates

    def _children(self, pod_dir: str) -> list[str]:
        root = self.writer.subsystem_root("cpu")
        return [f"{pod_dir}/{name}" for name in self.writer.fs.subdirs(f"{root}/{pod_dir}")]

    def _child_quotas(self, pod: Pod, pod_dir: str, quota: int) -> list[tuple[str, int]]:
        """The child cgroups to change. The Pod object does not say which child is which container,
        so a limited child of a one-container pod (the sandbox is unlimited) is that container and
        takes the pod's quota; otherwise a child above the new pod quota is brought down to it."""
        if quota <= 0:
            return []
        changes = []
        single = len(pod.spec.containers) == 1
        for child in self._children(pod_dir):
            current = self.writer.read_int(child, R.CPU_CFS_QUOTA)
            if current is None or current <= 0:
                continue
            if current > quota or (single and current != quota):
                changes.append((child, quota))
        return changes

    def apply(self, pods: Sequence[Pod], ratio: float | None) -> list[AppliedQuota]:
        applied = []
        for pod in pods:
            if pod.status.phase in ("Succeeded", "Failed") or not pod.metadata.uid:
                continue
            quota = pod_cfs_quota(pod, ratio, self.gates)
            if quota is None:
                continue
            pod_dir = self.layout.pod_dir(kube_qos_of(pod.status.qos_class), pod.metadata.uid)
            if not self.writer.supported(pod_dir, R.CPU_CFS_QUOTA):
                continue
            children = self._child_quotas(pod, pod_dir, quota)
            current = self.writer.read_int(pod_dir, R.CPU_CFS_QUOTA)
            # cgroups v1 keeps a child at or below its parent: widen the parent first, narrow it last
            raising = quota < 0 or (current is not None and 0 < current < quota)
            if raising and self.writer.write(pod_dir, R.CPU_CFS_QUOTA, quota):
                applied.append(AppliedQuota(pod.metadata.uid, pod_dir, quota))
            for child, value in children:
                self.writer.write(child, R.CPU_CFS_QUOTA, value)
            if not raising and self.writer.write(pod_dir, R.CPU_CFS_QUOTA, quota):
                applied.append(AppliedQuota(pod.metadata.uid, pod_dir, quota))
        return applied
