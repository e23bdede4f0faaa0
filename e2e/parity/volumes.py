"""The few fields of core/v1 PersistentVolume and PersistentVolumeClaim the parity checker reads
(``apis`` has no models for them yet; the volume plugins may add them there)."""

from __future__ import annotations

from pydantic import Field

from apis.base import KoordModel
from apis.core import NodeSelector
from apis.meta import ObjectMeta

__all__ = ["PersistentVolume", "PersistentVolumeClaim"]


class VolumeNodeAffinity(KoordModel):
    required: NodeSelector | None = None


class PersistentVolumeSpec(KoordModel):
    node_affinity: VolumeNodeAffinity | None = None
    storage_class_name: str | None = None


class PersistentVolume(KoordModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)


class PersistentVolumeClaimSpec(KoordModel):
    volume_name: str | None = None
    storage_class_name: str | None = None


class PersistentVolumeClaim(KoordModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
