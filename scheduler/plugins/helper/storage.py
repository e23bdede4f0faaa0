"""What the volume plugins share: the storage resources they watch, an informed store of each,
the claim a pod's volume refers to, and a PersistentVolume's node affinity as a row mask.

The plugins of one scheduler share one store per resource (``shared_store``), fed by the app's
watch of it, as kube-scheduler's volume plugins share its informers' listers: four plugins reading
claims keep one copy of them and handle each event once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from weakref import WeakKeyDictionary

import numpy as np
from pydantic import BaseModel

from apis.client.backend import ResourceType, WatchEvent
from apis.core import Pod, Volume
from apis.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from scheduler.cache.node_table import BoolArray
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.handle import Handle, Informers
from scheduler.plugins.helper.node_selector import NodeSelectorMatcher

__all__ = [
    "CSINODES",
    "PVCS",
    "PVS",
    "STORAGECLASSES",
    "ClaimRef",
    "Store",
    "claim_key",
    "claim_not_found",
    "ephemeral_owner_error",
    "pod_claims",
    "shared_store",
    "volume_node_mask",
]

PVCS = ResourceType.of(PersistentVolumeClaim)
PVS = ResourceType.of(PersistentVolume)
STORAGECLASSES = ResourceType.of(StorageClass)
CSINODES = ResourceType.of(CSINode)

T = TypeVar("T", bound=BaseModel)


def _meta_key(obj: BaseModel) -> str:
    meta = getattr(obj, "metadata")  # noqa: B009 - every stored kind has metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else str(meta.name)


@dataclass
class Store(Generic[T]):
    """The current objects of one resource, by ``namespace/name`` (or ``name`` when cluster-scoped)."""

    objects: dict[str, T] = field(default_factory=dict)
    listeners: list[Callable[[T | None, T | None], None]] = field(default_factory=list)
    """Called with (old, new) on every change (new None: deleted), for derived state."""

    def subscribe(self, handle: Handle, resource: ResourceType[T]) -> Store[T]:
        handle.subscribe(resource, self.on_event)
        return self

    def listen(self, listener: Callable[[T | None, T | None], None]) -> Store[T]:
        self.listeners.append(listener)
        return self

    def on_event(self, event: WatchEvent[T]) -> None:
        event.dispatch(self._replace, self._upsert, self._delete)

    def _changed(self, old: T | None, new: T | None) -> None:
        for listener in self.listeners:
            listener(old, new)

    def _replace(self, objects: Sequence[T]) -> None:
        old = self.objects
        self.objects = {_meta_key(o): o for o in objects}
        if self.listeners:
            for key, obj in old.items():
                if key not in self.objects:
                    self._changed(obj, None)
            for key, obj in self.objects.items():
                self._changed(old.get(key), obj)

    def _upsert(self, obj: T) -> None:
        key = _meta_key(obj)
        old = self.objects.get(key)
        self.objects[key] = obj
        self._changed(old, obj)

    def _delete(self, obj: T) -> None:
        old = self.objects.pop(_meta_key(obj), None)
        if old is not None:
            self._changed(old, None)

    def get(self, key: str) -> T | None:
        return self.objects.get(key)

    def __iter__(self) -> Iterator[T]:
        return iter(self.objects.values())


_SHARED: WeakKeyDictionary[Informers, dict[ResourceType[Any], Store[Any]]] = WeakKeyDictionary()


def shared_store(handle: Handle, resource: ResourceType[T]) -> Store[T]:
    """The one store of ``resource`` for every plugin subscribed through ``handle``'s informers."""
    stores = _SHARED.setdefault(handle.informers, {})
    store = stores.get(resource)
    if store is None:
        store = stores[resource] = Store[T]().subscribe(handle, resource)
    return store


def claim_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A pod volume's claim: ``<pod>-<volume>`` for a generic ephemeral volume."""

    volume: Volume
    name: str
    ephemeral: bool


def pod_claims(pod: Pod) -> list[ClaimRef]:
    """The claims the pod's volumes refer to, in volume order (``persistentVolumeClaim`` and
    generic ``ephemeral`` volumes; other sources have none)."""
    refs: list[ClaimRef] = []
    for volume in pod.spec.volumes or ():
        if volume.persistent_volume_claim is not None:
            refs.append(ClaimRef(volume, volume.persistent_volume_claim.claim_name, False))
        elif volume.ephemeral is not None:
            refs.append(ClaimRef(volume, f"{pod.metadata.name}-{volume.name}", True))
    return refs


def claim_not_found(ref: ClaimRef) -> str:
    """The lister's NotFound message, or kube-scheduler's kinder one for an ephemeral volume whose
    claim the ephemeral volume controller has not created yet."""
    if ref.ephemeral:
        return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{ref.name}"'
    return f'persistentvolumeclaim "{ref.name}" not found'


def ephemeral_owner_error(pod: Pod, claim: PersistentVolumeClaim) -> str | None:
    """``ephemeral.VolumeIsForPod``: a generic ephemeral volume's claim must be controlled by the pod."""
    owners = claim.metadata.owner_references or ()
    if any(o.controller and o.uid == pod.metadata.uid for o in owners):
        return None
    return (
        f"PVC {claim.metadata.namespace}/{claim.metadata.name} was not created for pod "
        f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
    )


def volume_node_mask(volume: PersistentVolume, snapshot: Snapshot, size: int) -> BoolArray:
    """Rows whose node satisfies the volume's ``nodeAffinity`` (every row when it has none), as
    ``volume.CheckNodeAffinity`` decides for one node."""
    affinity = volume.spec.node_affinity
    if affinity is None or affinity.required is None:
        return np.ones(size, dtype=np.bool_)
    return NodeSelectorMatcher.of(affinity.required.node_selector_terms).mask(snapshot, size)
