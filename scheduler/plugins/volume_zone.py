"""VolumeZone: a pod's bound volumes' zone and region labels must match the node's, as
kube-scheduler's VolumeZone checks them.

A volume's ``topology.kubernetes.io/zone`` / ``region`` (or the beta
``failure-domain.beta.kubernetes.io/`` ones) hold a value or several joined by ``__``; a node that
carries any of those four labels must carry each of the volume's keys (a beta key may be matched
by the node's GA label) with one of its values, else "node(s) had no available volume zone"
(unresolvable). A node with none of the labels accepts any volume. Unbound WaitForFirstConsumer
claims are skipped (VolumeBinding places them); PreFilter rejects, unresolvable, a claim, volume
or storage class that does not exist and an unbound claim that is not WaitForFirstConsumer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from apis.client.rbac import PolicyRule
from apis.storage import claim_class
from scheduler.cache.node_table import BoolArray, IntArray
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
from scheduler.plugins.helper.node_selector import fit_mask
from scheduler.plugins.helper.storage import PVCS, PVS, STORAGECLASSES, claim_key, shared_store

__all__ = ["ERR_REASON_CONFLICT", "NAME", "PLUGIN", "RBAC", "VolumeZone", "new"]

NAME = "VolumeZone"

ERR_REASON_CONFLICT = "node(s) had no available volume zone"
ERR_NO_PV_NO_CLASS = "PersistentVolumeClaim had no pv name and storageClass name"

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}

RBAC = (
    PolicyRule.watching(PVCS, why="The volumes pods' claims are bound to."),
    PolicyRule.watching(PVS, why="The zone and region labels of volumes."),
    PolicyRule.watching(STORAGECLASSES, why="Which unbound claims wait for their pod."),
)


@dataclass(frozen=True, slots=True)
class _Topology:
    key: str
    values: frozenset[str]


STATE_KEY = StateKey[tuple[_Topology, ...]]("PreFilter" + NAME)


def _zones(value: str) -> frozenset[str] | None:
    """``LabelZonesToSet``: values joined by ``__`` (or ``,``); None when one is empty (malformed)."""
    parts = [p.strip() for p in value.replace("__", ",").split(",")]
    return None if any(not p for p in parts) else frozenset(parts)


class VolumeZone(PreFilterPlugin, FilterPlugin):
    def __init__(self, handle: Handle) -> None:
        self.claims = shared_store(handle, PVCS)
        self.volumes = shared_store(handle, PVS)
        self.classes = shared_store(handle, STORAGECLASSES)

    @property
    def name(self) -> str:
        return NAME

    pre_filter_skip_reads = SkipReads.VOLUMES
    """``SkipByClass``: PreFilter's SKIP reads only the pod's volumes (none: SKIP)."""

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.NODE_ADD | ClusterEvent.NODE_UPDATE | ClusterEvent.CUSTOM_RESOURCE

    def _topologies(self, pod: PodInfo) -> tuple[tuple[_Topology, ...], Status]:
        found: list[_Topology] = []
        for volume in pod.pod.spec.volumes or ():
            if volume.persistent_volume_claim is None:
                continue
            name = volume.persistent_volume_claim.claim_name
            if not name:
                return (), Status.unresolvable("PersistentVolumeClaim had no name")
            claim = self.claims.get(claim_key(pod.namespace, name))
            if claim is None:
                return (), Status.unresolvable(f'persistentvolumeclaim "{name}" not found')
            pv_name = claim.spec.volume_name
            if not pv_name:
                class_name = claim_class(claim)
                if not class_name:
                    return (), Status.unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name"
                    )
                storage_class = self.classes.get(class_name)
                if storage_class is None:
                    return (), Status.unresolvable(f'storageclass.storage.k8s.io "{class_name}" not found')
                if storage_class.volume_binding_mode == "WaitForFirstConsumer":
                    continue
                return (), Status.unresolvable("PersistentVolume had no name")
            pv = self.volumes.get(pv_name)
            if pv is None:
                return (), Status.unresolvable(f'persistentvolume "{pv_name}" not found')
            labels = pv.metadata.labels or {}
            for key in TOPOLOGY_LABELS:
                if key in labels and (values := _zones(labels[key])) is not None:
                    found.append(_Topology(key, values))
        return tuple(found), Status.success()

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        topologies, status = self._topologies(pod)
        if not status.ok:
            return PreFilterResult(status)
        if not topologies:
            return PreFilterResult(Status.skip())
        state.write(STATE_KEY, topologies)
        return PreFilterResult()

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        topologies = state.get(STATE_KEY)
        if topologies is None:  # Filter without PreFilter (a plan or a test): prepare it now
            topologies, status = self._topologies(pod)
            if not status.ok:
                every = np.ones(rows.size, dtype=np.bool_)
                return FilterResult(~every, [(status.message(), every)], unresolvable=every)
        size = snapshot.table.row_count
        constrained = np.zeros(size, dtype=np.bool_)
        for key in TOPOLOGY_LABELS:
            constrained |= fit_mask(snapshot.label_mask(key), size)
        matches = np.ones(size, dtype=np.bool_)
        for topology in topologies:
            has_key = fit_mask(snapshot.label_mask(topology.key), size)
            ok: BoolArray = has_key & fit_mask(snapshot.label_mask(topology.key, topology.values), size)
            ga = _GA.get(topology.key)
            if ga is not None:  # a beta label the node lacks may be matched by its GA label
                ok |= ~has_key & fit_mask(snapshot.label_mask(ga, topology.values), size)
            matches &= ok
        rejected = (constrained & ~matches)[rows]
        if not rejected.any():
            return FilterResult.all_feasible(rows.size)
        return FilterResult(
            feasible=~rejected, rejections=[(ERR_REASON_CONFLICT, rejected)], unresolvable=rejected
        )


def new(args: None, handle: Handle) -> VolumeZone:
    return VolumeZone(handle)


PLUGIN = PluginSpec(NAME, new, rbac=RBAC)
