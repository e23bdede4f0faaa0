"""VolumeRestrictions: volumes that cannot be shared, as kube-scheduler's VolumeRestrictions.

- A GCE persistent disk, AWS EBS volume, Ceph RBD image or iSCSI target that a pod on the node
  already mounts (GCE PD, RBD and iSCSI: unless both mount it read-only; EBS: always) rejects the
  node: "node(s) had no available disk".
- A claim with the ReadWriteOncePod access mode that any pod in the cluster already uses rejects
  every node: "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod
  access mode" (unschedulable, not unresolvable: evicting that pod would free the claim).
- PreFilter: a claim of a ``persistentVolumeClaim`` volume that does not exist is unresolvable
  (``persistentvolumeclaim "x" not found``).
"""

from __future__ import annotations

import numpy as np

from apis.client.rbac import PolicyRule
from apis.core import Pod, Volume
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState, StateKey
from scheduler.framework.extensions import SkipReads
from scheduler.framework.handle import Handle
from scheduler.framework.interfaces import (
    ClusterEvent,
    FilterPlugin,
    FilterResult,
    PreFilterPlugin,
    PreFilterResult,
)
from scheduler.framework.registry import PluginSpec
from scheduler.framework.status import Status
from scheduler.plugins.helper.storage import PVCS, claim_key, shared_store

__all__ = [
    "ERR_REASON_DISK_CONFLICT",
    "ERR_REASON_RWOP_CONFLICT",
    "NAME",
    "PLUGIN",
    "RBAC",
    "VolumeRestrictions",
    "new",
]

NAME = "VolumeRestrictions"

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

RBAC = (PolicyRule.watching(PVCS, why="The access modes of pods' claims."),)


def _needs_check(volume: Volume) -> bool:
    return (
        volume.gce_persistent_disk is not None
        or volume.aws_elastic_block_store is not None
        or volume.rbd is not None
        or volume.iscsi is not None
    )


def _same_disk(volume: Volume, other: Volume) -> bool:
    """Two volumes that name one disk that cannot be mounted by both (``isVolumeConflict``)."""
    disk, other_disk = volume.gce_persistent_disk, other.gce_persistent_disk
    if disk is not None and other_disk is not None:
        return disk.pd_name == other_disk.pd_name and not (disk.read_only and other_disk.read_only)
    ebs, other_ebs = volume.aws_elastic_block_store, other.aws_elastic_block_store
    if ebs is not None and other_ebs is not None:
        return ebs.volume_id == other_ebs.volume_id
    iscsi, other_iscsi = volume.iscsi, other.iscsi
    if iscsi is not None and other_iscsi is not None:
        return iscsi.iqn == other_iscsi.iqn and not (iscsi.read_only and other_iscsi.read_only)
    rbd, other_rbd = volume.rbd, other.rbd
    if rbd is not None and other_rbd is not None:
        return (
            bool(set(rbd.monitors) & set(other_rbd.monitors))
            and (rbd.pool or "rbd") == (other_rbd.pool or "rbd")
            and rbd.image == other_rbd.image
            and not (rbd.read_only and other_rbd.read_only)
        )
    return False


def _conflict(volumes: list[Volume], pod: Pod) -> bool:
    return any(_same_disk(v, other) for v in volumes for other in pod.spec.volumes or ())


STATE_KEY = StateKey[int]("PreFilter" + NAME)
"""How many of the pod's ReadWriteOncePod claims pods in the cluster already use."""


class VolumeRestrictions(PreFilterPlugin, FilterPlugin):
    def __init__(self, handle: Handle) -> None:
        self.claims = shared_store(handle, PVCS)

    @property
    def name(self) -> str:
        return NAME

    pre_filter_skip_reads = SkipReads.VOLUMES
    """``SkipByClass``: PreFilter's SKIP reads only the pod's volumes (none: SKIP)."""

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.POD_DELETE | ClusterEvent.NODE_ADD | ClusterEvent.CUSTOM_RESOURCE

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        volumes = pod.pod.spec.volumes or ()
        needs_check = any(_needs_check(v) for v in volumes)
        exclusive: set[str] = set()
        for volume in volumes:
            if volume.persistent_volume_claim is None:
                continue
            name = volume.persistent_volume_claim.claim_name
            claim = self.claims.get(claim_key(pod.namespace, name))
            if claim is None:
                return PreFilterResult(Status.unresolvable(f'persistentvolumeclaim "{name}" not found'))
            if READ_WRITE_ONCE_POD in (claim.spec.access_modes or ()):
                exclusive.add(name)
        in_use = 0
        if exclusive:
            used: set[str] = set()
            for other in snapshot.assigned_pods():
                if other.namespace != pod.namespace:
                    continue
                for volume in other.pod.spec.volumes or ():
                    if volume.persistent_volume_claim is not None:
                        used.add(volume.persistent_volume_claim.claim_name)
            in_use = len(exclusive & used)
        if not needs_check and in_use == 0:
            return PreFilterResult(Status.skip())
        state.write(STATE_KEY, in_use)
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        checked = [v for v in pod.pod.spec.volumes or () if _needs_check(v)]
        conflicting: set[str] = set()
        if checked:
            for other in snapshot.assigned_pods():
                node = snapshot.node_of(other.uid)
                if node is not None and node not in conflicting and _conflict(checked, other.pod):
                    conflicting.add(node)
        disk = np.zeros(rows.size, dtype=np.bool_)
        if conflicting:
            disk = snapshot.rows_named(rows, frozenset(conflicting))
        rejections = [(ERR_REASON_DISK_CONFLICT, disk)] if disk.any() else []
        in_use = state.get(STATE_KEY)
        if in_use is None:  # Filter without PreFilter (a plan or a test): prepare it now
            prepared = self.pre_filter(state, pod, snapshot)
            in_use = state.get(STATE_KEY) or 0
            if prepared.status.rejected:
                every = np.ones(rows.size, dtype=np.bool_)
                return FilterResult(~every, [(prepared.status.message(), every)], unresolvable=every)
        if in_use > 0:
            rejections.append((ERR_REASON_RWOP_CONFLICT, ~disk))
            return FilterResult(feasible=np.zeros(rows.size, dtype=np.bool_), rejections=rejections)
        if not rejections:
            return FilterResult.all_feasible(rows.size)
        return FilterResult(feasible=~disk, rejections=rejections)


def new(args: None, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle)


PLUGIN = PluginSpec(NAME, new, rbac=RBAC)
