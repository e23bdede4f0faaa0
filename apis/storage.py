"""The subset of core/v1 PersistentVolumeClaim and PersistentVolume, and storage.k8s.io/v1
StorageClass and CSINode, that the volume plugins read (kube-scheduler's VolumeBinding,
VolumeRestrictions, VolumeZone and NodeVolumeLimits).

Reading models, as ``apis.core``: unknown fields are ignored, and the scheduler changes these
objects only through merge patches (a PV's ``claimRef``, a claim's ``selected-node`` annotation).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from apis.base import KoordModel, ResourceInfo
from apis.core import NodeSelector
from apis.meta import LabelSelector, ObjectMeta, ObjectReference
from apis.quantity import Quantity
from apis.types import Int32

__all__ = [
    "ANN_BIND_COMPLETED",
    "ANN_SELECTED_NODE",
    "ANN_STORAGE_CLASS",
    "CSINode",
    "CSINodeDriver",
    "CSINodeSpec",
    "CSIPersistentVolumeSource",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "PersistentVolumeClaimSpec",
    "PersistentVolumeClaimStatus",
    "PersistentVolumeSpec",
    "PersistentVolumeStatus",
    "StorageClass",
    "TopologySelectorTerm",
    "VolumeNodeAffinity",
    "VolumeNodeResources",
    "VolumeResourceRequirements",
    "claim_class",
    "volume_class",
]

ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
"""Set on a claim by the scheduler: the node a WaitForFirstConsumer volume is provisioned for."""
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
"""Set on a claim by the PV controller once the claim/volume binding is complete."""
ANN_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
"""The deprecated storage class annotation; it wins over ``storageClassName`` when present."""


# ---- PersistentVolumeClaim ---------------------------------------------------------------------


class VolumeResourceRequirements(KoordModel):
    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class PersistentVolumeClaimSpec(KoordModel):
    access_modes: list[str] | None = None
    """ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod."""
    selector: LabelSelector | None = None
    resources: VolumeResourceRequirements | None = None
    volume_name: str | None = None
    storage_class_name: str | None = None
    volume_mode: str | None = None
    """Filesystem (the default) or Block."""


class PersistentVolumeClaimStatus(KoordModel):
    phase: str | None = None
    """Pending, Bound or Lost."""


class PersistentVolumeClaim(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="",
        version="v1",
        kind="PersistentVolumeClaim",
        plural="persistentvolumeclaims",
        singular="persistentvolumeclaim",
        scope="Namespaced",
    )

    api_version: str | None = "v1"
    kind: str | None = "PersistentVolumeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = Field(default_factory=PersistentVolumeClaimStatus)


def claim_class(claim: PersistentVolumeClaim) -> str:
    """The claim's storage class: the beta annotation, else ``storageClassName``, else ""."""
    annotations = claim.metadata.annotations or {}
    if ANN_STORAGE_CLASS in annotations:
        return annotations[ANN_STORAGE_CLASS]
    return claim.spec.storage_class_name or ""


# ---- PersistentVolume -----------------------------------------------------------------------------


class VolumeNodeAffinity(KoordModel):
    required: NodeSelector | None = None


class CSIPersistentVolumeSource(KoordModel):
    driver: str
    volume_handle: str = ""
    read_only: bool | None = None


class PersistentVolumeSpec(KoordModel):
    capacity: dict[str, Quantity] | None = None
    access_modes: list[str] | None = None
    claim_ref: ObjectReference | None = None
    storage_class_name: str | None = None
    volume_mode: str | None = None
    node_affinity: VolumeNodeAffinity | None = None
    csi: CSIPersistentVolumeSource | None = None
    persistent_volume_reclaim_policy: str | None = None


class PersistentVolumeStatus(KoordModel):
    phase: str | None = None
    """Pending, Available, Bound, Released or Failed."""


class PersistentVolume(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="",
        version="v1",
        kind="PersistentVolume",
        plural="persistentvolumes",
        singular="persistentvolume",
        scope="Cluster",
    )

    api_version: str | None = "v1"
    kind: str | None = "PersistentVolume"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = Field(default_factory=PersistentVolumeStatus)


def volume_class(volume: PersistentVolume) -> str:
    """The volume's storage class: the beta annotation, else ``storageClassName``, else ""."""
    annotations = volume.metadata.annotations or {}
    if ANN_STORAGE_CLASS in annotations:
        return annotations[ANN_STORAGE_CLASS]
    return volume.spec.storage_class_name or ""


# ---- StorageClass -----------------------------------------------------------------------------------


class TopologySelectorLabelRequirement(KoordModel):
    key: str
    values: list[str] = Field(default_factory=list)


class TopologySelectorTerm(KoordModel):
    match_label_expressions: list[TopologySelectorLabelRequirement] | None = None


class StorageClass(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="storage.k8s.io",
        version="v1",
        kind="StorageClass",
        plural="storageclasses",
        singular="storageclass",
        scope="Cluster",
    )

    api_version: str | None = "storage.k8s.io/v1"
    kind: str | None = "StorageClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    provisioner: str = ""
    volume_binding_mode: str | None = None
    """Immediate (the API server's default) or WaitForFirstConsumer."""
    allowed_topologies: list[TopologySelectorTerm] | None = None


# ---- CSINode ------------------------------------------------------------------------------------------


class VolumeNodeResources(KoordModel):
    count: Int32 | None = None
    """The most volumes of the driver the node can attach; unset: no limit."""


class CSINodeDriver(KoordModel):
    name: str
    node_id: str = Field(default="", alias="nodeID")
    topology_keys: list[str] | None = None
    allocatable: VolumeNodeResources | None = None


class CSINodeSpec(KoordModel):
    drivers: list[CSINodeDriver] = Field(default_factory=list)


class CSINode(KoordModel):
    api: ClassVar[ResourceInfo] = ResourceInfo(
        group="storage.k8s.io",
        version="v1",
        kind="CSINode",
        plural="csinodes",
        singular="csinode",
        scope="Cluster",
    )

    api_version: str | None = "storage.k8s.io/v1"
    kind: str | None = "CSINode"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: CSINodeSpec = Field(default_factory=CSINodeSpec)
