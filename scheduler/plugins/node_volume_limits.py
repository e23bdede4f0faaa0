"""NodeVolumeLimits: a node attaches at most as many volumes of a CSI driver as its CSINode says
(``spec.drivers[].allocatable.count``), as kube-scheduler's NodeVolumeLimits (CSILimits) counts.

The pod's new CSI volumes (its claims' bound volumes by ``csi.driver`` / ``volumeHandle``; an
unbound claim counts for its storage class's provisioner), less those pods on the node already
use, plus those, must not exceed the driver's limit: "node(s) exceed max volume count"
(unschedulable). A node without a CSINode, or a driver without a count, has no limit. A claim of
the pod that does not exist is unresolvable. In-tree volumes migrated to CSI and VolumeAttachments
not owned by pods are not counted.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from apis.client.rbac import PolicyRule
from apis.core import Pod
from apis.storage import claim_class
from scheduler.cache.node_table import IntArray
from scheduler.cache.pod_info import PodInfo
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.cycle_state import CycleState
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
from scheduler.plugins.helper.storage import (
    CSINODES,
    PVCS,
    PVS,
    STORAGECLASSES,
    claim_key,
    claim_not_found,
    ephemeral_owner_error,
    pod_claims,
    shared_store,
)

__all__ = ["ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED", "NAME", "PLUGIN", "RBAC", "NodeVolumeLimits", "new"]

NAME = "NodeVolumeLimits"

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

RBAC = (
    PolicyRule.watching(CSINODES, why="Per-driver attach limits of nodes."),
    PolicyRule.watching(PVCS, why="The volumes pods' claims use."),
    PolicyRule.watching(PVS, why="The CSI driver and handle of volumes."),
    PolicyRule.watching(STORAGECLASSES, why="The driver of an unbound claim."),
)


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin):
    def __init__(self, handle: Handle) -> None:
        self.claims = shared_store(handle, PVCS)
        self.volumes = shared_store(handle, PVS)
        self.classes = shared_store(handle, STORAGECLASSES)
        self.csi_nodes = shared_store(handle, CSINODES)

    @property
    def name(self) -> str:
        return NAME

    pre_filter_skip_reads = SkipReads.VOLUMES
    """``SkipByClass``: PreFilter's SKIP reads only the pod's volumes (none: SKIP)."""

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.POD_DELETE | ClusterEvent.NODE_ADD | ClusterEvent.CUSTOM_RESOURCE

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        if not pod_claims(pod.pod):
            return PreFilterResult(Status.skip())
        return PreFilterResult()

    def _attachable(self, pod: Pod, new: bool) -> tuple[dict[str, str], str | None]:
        """``filterAttachableVolumes``: unique volume name -> driver, for the pod's CSI volumes; for
        the pod being scheduled, a missing claim is the reason it cannot fit anywhere."""
        found: dict[str, str] = {}
        namespace = pod.metadata.namespace or "default"
        for ref in pod_claims(pod):
            claim = self.claims.get(claim_key(namespace, ref.name))
            if claim is None:
                if new:
                    return found, claim_not_found(ref)
                continue
            if new and ref.ephemeral:
                problem = ephemeral_owner_error(pod, claim)
                if problem is not None:
                    return found, problem
            volume = self.volumes.get(claim.spec.volume_name) if claim.spec.volume_name else None
            if volume is None:  # not bound (yet): its class's provisioner will attach it
                storage_class = self.classes.get(claim_class(claim))
                if storage_class is not None and storage_class.provisioner:
                    driver = storage_class.provisioner
                    found[f"{driver}-{namespace}/{ref.name}"] = driver
                continue
            if volume.spec.csi is not None:
                csi = volume.spec.csi
                found[f"{csi.driver}/{csi.volume_handle}"] = csi.driver
        return found, None

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        new, problem = self._attachable(pod.pod, True)
        if problem is not None:
            every = np.ones(rows.size, dtype=np.bool_)
            return FilterResult(feasible=~every, rejections=[(problem, every)], unresolvable=every)
        exceeded = np.zeros(rows.size, dtype=np.bool_)
        if new:
            drivers = set(new.values())
            for i, row in enumerate(rows.tolist()):
                node = snapshot.table.names[row]
                csi_node = self.csi_nodes.get(node)
                if csi_node is None:
                    continue
                limits = {
                    d.name: d.allocatable.count
                    for d in csi_node.spec.drivers
                    if d.name in drivers and d.allocatable is not None and d.allocatable.count is not None
                }
                if limits:
                    exceeded[i] = self._exceeds(new, limits, snapshot, node)
        if not exceeded.any():
            return FilterResult.all_feasible(rows.size)
        return FilterResult(feasible=~exceeded, rejections=[(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, exceeded)])

    def _exceeds(self, new: dict[str, str], limits: dict[str, int], snapshot: Snapshot, node: str) -> bool:
        attached: dict[str, str] = {}
        for other in snapshot.pods_on(node):
            attached.update(self._attachable(other.pod, False)[0])
        fresh = Counter(driver for name, driver in new.items() if name not in attached)
        in_use = Counter(attached.values())
        return any(
            in_use[driver] + count > limits[driver] for driver, count in fresh.items() if driver in limits
        )


def new(args: None, handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits(handle)


PLUGIN = PluginSpec(NAME, new, rbac=RBAC)
