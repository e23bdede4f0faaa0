"""VolumeBinding: a pod's PersistentVolumeClaims decide where it may run, and the scheduler binds
the WaitForFirstConsumer ones to the node it picks, as kube-scheduler's VolumeBinding does.

- PreFilter: every claim of the pod (``persistentVolumeClaim`` and generic ``ephemeral`` volumes)
  must exist (``persistentvolumeclaim "x" not found``), not be Lost nor being deleted; an unbound
  claim that is not WaitForFirstConsumer ("Immediate", also a claim whose class is unknown) is the
  PV controller's to bind: "pod has unbound immediate PersistentVolumeClaims". All unresolvable.
- Filter (unresolvable): a bound claim's volume must allow the node by its ``nodeAffinity``
  ("node(s) had volume node affinity conflict"; a volume that does not exist: "node(s) unavailable
  due to one or more pvc(s) bound to non-existent pv(s)"); each unbound WaitForFirstConsumer
  claim needs an Available static volume on the node (class, size, access modes, volume mode,
  selector, node affinity) or a class with a provisioner whose ``allowedTopologies`` admit the
  node ("node(s) didn't find available persistent volumes to bind").
- Reserve: the volumes chosen on the node are assumed (a claimRef in this plugin's view), so the
  next pod does not take them; Unreserve forgets them.
- PreBind: writes the bindings as kube-scheduler's binder does (a volume's ``spec.claimRef`` and
  ``pv.kubernetes.io/bound-by-controller``; for a claim to provision, the
  ``volume.kubernetes.io/selected-node`` annotation), each guarded by the resourceVersion it was
  chosen from, then waits, up to ``bindTimeoutSeconds``, for the PV controller to complete every
  binding (``volumeName`` set and ``pv.kubernetes.io/bind-completed``). A failure or timeout is an
  error: the pod is retried.

Not done (as with kube-scheduler's feature gates off): Score (StorageCapacityScoring, alpha),
CSIStorageCapacity checks, in-tree to CSI translation.

PreFilter also narrows the nodes to those bound local volumes name by ``kubernetes.io/hostname``
(upstream's ``GetEligibleNodes``, which takes that label's values for node names).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field, field_validator

from apis.base import KoordModel
from apis.client.backend import BackendError
from apis.client.rbac import PolicyRule
from apis.meta import ObjectReference
from apis.storage import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    claim_class,
    volume_class,
)
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
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from scheduler.framework.status import Status
from scheduler.plugins.helper.storage import (
    PVCS,
    PVS,
    STORAGECLASSES,
    claim_key,
    claim_not_found,
    ephemeral_owner_error,
    pod_claims,
    shared_store,
    volume_node_mask,
)
from scheduler.plugins.not_supported import only_default
from scheduler.plugins.volume_binding.matching import bound_to, match_claims

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_UNBOUND_IMMEDIATE",
    "NAME",
    "RBAC",
    "VolumeBinding",
    "VolumeBindingArgs",
    "new",
]

log = logging.getLogger(__name__)

NAME = "VolumeBinding"

ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
HOSTNAME_LABEL = "kubernetes.io/hostname"

RBAC = (
    PolicyRule.watching(PVCS, why="The claims of pods' volumes."),
    PolicyRule.watching(PVS, why="The volumes claims bind to, and their node affinity."),
    PolicyRule.watching(STORAGECLASSES, why="Binding mode, provisioner and topology."),
    PolicyRule.on(PVS, "patch", why="PreBind: a chosen volume's claimRef."),
    PolicyRule.on(PVCS, "patch", why="PreBind: the selected-node annotation to provision."),
)


class VolumeBindingArgs(KoordModel):
    """kube-scheduler's ``VolumeBindingArgs``."""

    model_config = ConfigDict(extra="forbid")

    bind_timeout_seconds: int = Field(default=600)
    """How long PreBind waits for the PV controller to complete the pod's bindings."""
    shape: list[dict[str, Any]] | None = None
    """StorageCapacityScoring's utilization shape: not supported (the feature is alpha upstream)."""

    @field_validator("bind_timeout_seconds")
    @classmethod
    def _non_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"invalid BindTimeoutSeconds, should not be a negative value (got {value})")
        return value

    @field_validator("shape")
    @classmethod
    def _no_shape(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        return only_default(value, None, "StorageCapacityScoring (volume scoring) is not implemented")


@dataclass(slots=True)
class _Binding:
    claim: PersistentVolumeClaim
    volume: PersistentVolume
    """The volume as chosen (its resourceVersion guards the write)."""
    assumed: PersistentVolume


@dataclass(slots=True)
class _Provision:
    claim: PersistentVolumeClaim
    assumed: PersistentVolumeClaim


@dataclass(slots=True)
class _State:
    bound: list[PersistentVolumeClaim]
    delayed: list[PersistentVolumeClaim]
    volumes_by_class: dict[str, list[PersistentVolume]]
    classes: dict[str, StorageClass]
    bindings: list[_Binding] = field(default_factory=list)
    provisions: list[_Provision] = field(default_factory=list)
    all_bound: bool = True


STATE_KEY = StateKey[_State](NAME)


def _fully_bound(claim: PersistentVolumeClaim) -> bool:
    return bool(claim.spec.volume_name) and ANN_BIND_COMPLETED in (claim.metadata.annotations or {})


def _key(claim: PersistentVolumeClaim) -> str:
    return claim_key(claim.metadata.namespace or "default", claim.metadata.name or "")


class _Assumed:
    """kube-scheduler's assume caches: objects this plugin decided on but not yet wrote, overlaid on
    the informed ones until the informer shows a newer version or the pod is unreserved."""

    def __init__(self) -> None:
        self.volumes: dict[str, PersistentVolume] = {}
        self.claims: dict[str, PersistentVolumeClaim] = {}

    def on_volume(self, old: PersistentVolume | None, new: PersistentVolume | None) -> None:
        obj = new or old
        if obj is not None:
            self._moved_on(self.volumes, obj.metadata.name or "", new)

    def on_claim(self, old: PersistentVolumeClaim | None, new: PersistentVolumeClaim | None) -> None:
        obj = new or old
        if obj is not None:
            self._moved_on(self.claims, _key(obj), new)

    @staticmethod
    def _moved_on(assumed: dict[str, Any], key: str, new: Any) -> None:
        mine = assumed.get(key)
        if mine is not None and (
            new is None or new.metadata.resource_version != mine.metadata.resource_version
        ):
            del assumed[key]


class VolumeBinding(PreFilterPlugin, FilterPlugin, ReservePlugin, PreBindPlugin):
    poll_seconds = 1.0
    """How often PreBind looks at the bindings (kube-scheduler polls every second)."""

    def __init__(self, args: VolumeBindingArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.assumed = _Assumed()
        self.claims = shared_store(handle, PVCS).listen(self.assumed.on_claim)
        self.volumes = shared_store(handle, PVS).listen(self.assumed.on_volume)
        self.classes = shared_store(handle, STORAGECLASSES)

    @property
    def name(self) -> str:
        return NAME

    pre_filter_skip_reads = SkipReads.VOLUMES
    """``SkipByClass``: PreFilter's SKIP reads only the pod's volumes (none: SKIP)."""

    def events_to_register(self) -> ClusterEvent:
        return ClusterEvent.NODE_ADD | ClusterEvent.NODE_UPDATE | ClusterEvent.CUSTOM_RESOURCE

    def _claim(self, key: str) -> PersistentVolumeClaim | None:
        return self.assumed.claims.get(key) or self.claims.get(key)

    def _volume(self, name: str) -> PersistentVolume | None:
        return self.assumed.volumes.get(name) or self.volumes.get(name)

    # ---- PreFilter / Filter ----

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> PreFilterResult:
        refs = pod_claims(pod.pod)
        if not refs:
            return PreFilterResult(Status.skip())
        claims: list[PersistentVolumeClaim] = []
        for ref in refs:
            claim = self._claim(claim_key(pod.namespace, ref.name))
            if claim is None:
                return PreFilterResult(Status.unresolvable(claim_not_found(ref)))
            if claim.status.phase == "Lost":
                return PreFilterResult(
                    Status.unresolvable(
                        f'persistentvolumeclaim "{ref.name}" bound to non-existent persistentvolume '
                        f'"{claim.spec.volume_name or ""}"'
                    )
                )
            if claim.metadata.deletion_timestamp is not None:
                return PreFilterResult(
                    Status.unresolvable(f'persistentvolumeclaim "{ref.name}" is being deleted')
                )
            if ref.ephemeral:
                problem = ephemeral_owner_error(pod.pod, claim)
                if problem is not None:
                    return PreFilterResult(Status.unresolvable(problem))
            claims.append(claim)
        bound: list[PersistentVolumeClaim] = []
        delayed: list[PersistentVolumeClaim] = []
        for claim in claims:
            if _fully_bound(claim):
                bound.append(claim)
            elif self._delayed(claim) and not claim.spec.volume_name:
                delayed.append(claim)
            else:
                return PreFilterResult(Status.unresolvable(ERR_UNBOUND_IMMEDIATE))
        wanted = {claim_class(c) for c in delayed}
        by_class: dict[str, list[PersistentVolume]] = {c: [] for c in wanted}
        if wanted:
            for name in self.volumes.objects:
                volume = self._volume(name)
                if volume is not None and volume_class(volume) in by_class:
                    by_class[volume_class(volume)].append(volume)
        classes = {c: sc for c in wanted if (sc := self.classes.get(c)) is not None}
        state.write(STATE_KEY, _State(bound, delayed, by_class, classes))
        return PreFilterResult(node_names=self._eligible_nodes(bound))

    def _eligible_nodes(self, bound: list[PersistentVolumeClaim]) -> frozenset[str] | None:
        """``GetEligibleNodes``: the nodes bound local volumes name (``kubernetes.io/hostname In``
        in every expression of a term), intersected over the volumes; None: any node."""
        eligible: frozenset[str] | None = None
        for claim in bound:
            volume = self._volume(claim.spec.volume_name or "")
            if volume is None:
                return None
            names = _local_node_names(volume)
            if names:
                eligible = names if eligible is None else eligible & names
        return eligible

    def _delayed(self, claim: PersistentVolumeClaim) -> bool:
        """``IsDelayBindingMode``: the claim's class exists and waits for the first consumer."""
        class_name = claim_class(claim)
        storage_class = self.classes.get(class_name) if class_name else None
        return storage_class is not None and storage_class.volume_binding_mode == "WaitForFirstConsumer"

    def filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: IntArray) -> FilterResult:
        st = state.get(STATE_KEY)
        if st is None:  # Filter without PreFilter (a plan or a test): prepare it now
            prepared = self.pre_filter(state, pod, snapshot)
            st = state.get(STATE_KEY)
            if prepared.status.rejected:
                every = np.ones(rows.size, dtype=np.bool_)
                return FilterResult(~every, [(prepared.status.message(), every)], unresolvable=every)
            if st is None:
                return FilterResult.all_feasible(rows.size)
        size = snapshot.table.row_count
        conflict = np.zeros(rows.size, dtype=np.bool_)
        missing = np.zeros(rows.size, dtype=np.bool_)
        undecided = np.ones(rows.size, dtype=np.bool_)
        for claim in st.bound:  # the first volume that is missing or refuses a node decides for it
            volume = self._volume(claim.spec.volume_name or "")
            if volume is None:
                missing |= undecided
                break
            allowed = volume_node_mask(volume, snapshot, size)[rows]
            conflict |= undecided & ~allowed
            undecided &= allowed
        unavailable = np.zeros(rows.size, dtype=np.bool_)
        if st.delayed:
            match = match_claims(st.delayed, st.volumes_by_class, st.classes, snapshot, rows)
            if match.error is not None:
                return FilterResult(feasible=np.zeros(rows.size, dtype=np.bool_), error=match.error)
            unavailable = ~match.satisfied
        rejections: list[tuple[str, BoolArray]] = [
            (reason, mask)
            for reason, mask in (
                (ERR_REASON_NODE_CONFLICT, conflict),
                (ERR_REASON_BIND_CONFLICT, unavailable),
                (ERR_REASON_PV_NOT_EXIST, missing),
            )
            if mask.any()
        ]
        if not rejections:
            return FilterResult.all_feasible(rows.size)
        feasible = ~(conflict | unavailable | missing)
        return FilterResult(feasible=feasible, rejections=rejections, unresolvable=~feasible)

    # ---- Reserve ----

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        st = state.get(STATE_KEY)
        if st is None or not st.delayed:
            return Status.success()
        snapshot = self.handle.snapshot()
        row = snapshot.table.row.get(node)
        if row is None:
            return Status.error(f"node {node!r} is gone")
        match = match_claims(st.delayed, st.volumes_by_class, st.classes, snapshot, np.array([row]))
        if match.error is not None or not match.satisfied[0]:
            return Status.error(match.error or f"the volumes of pod {pod.key} no longer fit node {node!r}")
        statically: set[str] = set()
        for claim, candidates, pick in match.chosen:
            if pick[0] < 0:
                continue
            volume = candidates[int(pick[0])]
            assumed = _bind_to(volume, claim)
            self.assumed.volumes[volume.metadata.name or ""] = assumed
            st.bindings.append(_Binding(claim, volume, assumed))
            statically.add(_key(claim))
        for claim in st.delayed:
            if _key(claim) in statically:
                continue
            annotations = {**(claim.metadata.annotations or {}), ANN_SELECTED_NODE: node}
            provisioned = claim.model_copy(
                update={"metadata": claim.metadata.model_copy(update={"annotations": annotations})}
            )
            self.assumed.claims[_key(claim)] = provisioned
            st.provisions.append(_Provision(claim, provisioned))
        st.all_bound = False
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        st = state.get(STATE_KEY)
        if st is None:
            return
        for binding in st.bindings:
            name = binding.volume.metadata.name or ""
            if self.assumed.volumes.get(name) is binding.assumed:
                del self.assumed.volumes[name]
        for provision in st.provisions:
            key = _key(provision.claim)
            if self.assumed.claims.get(key) is provision.assumed:
                del self.assumed.claims[key]

    # ---- PreBind ----

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        st = state.get(STATE_KEY)
        if st is None or st.all_bound:
            return Status.success()
        try:
            for binding in st.bindings:
                await self.handle.backend.patch_custom(
                    PVS, None, binding.volume.metadata.name or "", _claim_ref_patch(binding)
                )
            for provision in st.provisions:
                claim = provision.claim
                patch = {
                    "metadata": {
                        "resourceVersion": claim.metadata.resource_version,
                        "annotations": {ANN_SELECTED_NODE: node},
                    }
                }
                await self.handle.backend.patch_custom(
                    PVCS, claim.metadata.namespace, claim.metadata.name or "", patch
                )
        except BackendError as exc:
            return Status.error(f"binding volumes: {exc}")
        deadline = self.handle.clock() + self.args.bind_timeout_seconds
        while True:
            if self.handle.snapshot().pod(pod.uid) is None:  # deleted meanwhile: stop waiting for it
                return Status.error(
                    f'binding volumes: pod does not exist any more: pods "{pod.name}" not found'
                )
            done, problem = self._check(st, node)
            if problem is not None:
                return Status.error(f"binding volumes: {problem}")
            if done:
                return Status.success()
            if self.handle.clock() >= deadline:
                return Status.error("binding volumes: context deadline exceeded")
            await asyncio.sleep(self.poll_seconds)

    def _node_allows(self, volume: PersistentVolume, node: str) -> bool:
        snapshot = self.handle.snapshot()
        row = snapshot.table.row.get(node)
        return row is not None and bool(volume_node_mask(volume, snapshot, snapshot.table.row_count)[row])

    def _check(self, st: _State, node: str) -> tuple[bool, str | None]:
        """``checkBindings`` on the informed objects: (all bound, why binding must be retried)."""
        for binding in st.bindings:
            name = binding.volume.metadata.name or ""
            volume = self.volumes.get(name)
            claim = self.claims.get(_key(binding.claim))
            if volume is None or claim is None:
                return (
                    False,
                    f"failed to check binding: {name if volume is None else _key(binding.claim)} not found",
                )
            if volume.metadata.resource_version == binding.volume.metadata.resource_version:
                return False, None  # our write has not come back through the watch yet
            if not self._node_allows(volume, node):
                return False, f'pv "{name}" node affinity doesn\'t match node "{node}"'
            if volume.spec.claim_ref is None or not volume.spec.claim_ref.uid:
                return False, f'ClaimRef got reset for pv "{name}"'
            if not _fully_bound(claim):
                return False, None
        for provision in st.provisions:
            key = _key(provision.claim)
            claim = self.claims.get(key)
            if claim is None:
                return False, f"failed to check provisioning pvc: {key} not found"
            if claim.metadata.resource_version == provision.claim.metadata.resource_version:
                return False, None
            if (claim.metadata.annotations or {}).get(ANN_SELECTED_NODE) != node:
                return False, f'provisioning failed for PVC "{claim.metadata.name}"'
            if claim.spec.volume_name:
                volume = self.volumes.get(claim.spec.volume_name)
                if volume is None:
                    return False, None
                if not self._node_allows(volume, node):
                    return False, f'pv "{volume.metadata.name}" node affinity doesn\'t match node "{node}"'
            if not _fully_bound(claim):
                return False, None
        return True, None


def _local_node_names(volume: PersistentVolume) -> frozenset[str]:
    """``GetLocalPersistentVolumeNodeNames``: per term, the intersection of its
    ``kubernetes.io/hostname In`` values; the union over terms."""
    affinity = volume.spec.node_affinity
    if affinity is None or affinity.required is None:
        return frozenset()
    result: set[str] = set()
    for term in affinity.required.node_selector_terms:
        nodes: set[str] | None = None
        for req in term.match_expressions or ():
            if req.key == HOSTNAME_LABEL and req.operator == "In":
                values = set(req.values or ())
                nodes = values if nodes is None else nodes & values
        result |= nodes or set()
    return frozenset(result)


def _bind_to(volume: PersistentVolume, claim: PersistentVolumeClaim) -> PersistentVolume:
    """``GetBindVolumeToClaim``: the volume with a claimRef to the claim, marked bound by the
    controller unless the user had pre-bound it."""
    ref = ObjectReference(
        kind="PersistentVolumeClaim",
        api_version="v1",
        namespace=claim.metadata.namespace,
        name=claim.metadata.name,
        uid=claim.metadata.uid,
        resource_version=claim.metadata.resource_version,
    )
    annotations = dict(volume.metadata.annotations or {})
    if not bound_to(volume, claim):
        annotations.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
    return volume.model_copy(
        update={
            "metadata": volume.metadata.model_copy(update={"annotations": annotations}),
            "spec": volume.spec.model_copy(update={"claim_ref": ref}),
        }
    )


def _claim_ref_patch(binding: _Binding) -> dict[str, Any]:
    ref = binding.assumed.spec.claim_ref
    assert ref is not None
    metadata: dict[str, Any] = {"resourceVersion": binding.volume.metadata.resource_version}
    annotations = binding.assumed.metadata.annotations or {}
    if ANN_BOUND_BY_CONTROLLER in annotations:
        metadata["annotations"] = {ANN_BOUND_BY_CONTROLLER: annotations[ANN_BOUND_BY_CONTROLLER]}
    return {"metadata": metadata, "spec": {"claimRef": ref.to_wire()}}


def new(args: VolumeBindingArgs | None, handle: Handle) -> VolumeBinding:
    return VolumeBinding(args or VolumeBindingArgs(), handle)
