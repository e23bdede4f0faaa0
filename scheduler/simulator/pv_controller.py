"""What kube-controller-manager's PV controller and a provisioner do once the scheduler has chosen,
for ``koordctl simulate`` (its in-memory cluster runs no controller): without it VolumeBinding's
PreBind would wait for bindings nobody completes.

- A volume whose ``claimRef`` names an unbound claim (with its uid) is bound to it: the claim gets
  ``volumeName``, ``pv.kubernetes.io/bind-completed`` and phase Bound, the volume phase Bound.
- A claim with ``volume.kubernetes.io/selected-node`` whose class has a provisioner gets a new
  volume ``pvc-<uid>`` of its size on that node (by ``kubernetes.io/hostname``), bound to it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from apis.client.backend import EventType
from apis.storage import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    claim_class,
)
from scheduler.backend.memory import MemoryBackend
from scheduler.plugins.helper.storage import PVCS, PVS, STORAGECLASSES

__all__ = ["run_pv_controller"]

NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"


def _bind(backend: MemoryBackend, volume: PersistentVolume, claim: PersistentVolumeClaim) -> None:
    wire = claim.to_wire()
    wire["spec"]["volumeName"] = volume.metadata.name
    wire["metadata"].setdefault("annotations", {})[ANN_BIND_COMPLETED] = "yes"
    wire["status"] = {"phase": "Bound"}
    backend.apply(PVCS, wire)
    if volume.status.phase != "Bound":
        bound = volume.to_wire()
        bound["status"] = {"phase": "Bound"}
        backend.apply(PVS, bound)


def _on_volume(backend: MemoryBackend, volume: PersistentVolume) -> None:
    ref = volume.spec.claim_ref
    if ref is None or not ref.uid or not ref.name:
        return
    claim = backend.get(PVCS, ref.namespace, ref.name)
    if claim is not None and claim.metadata.uid == ref.uid and not claim.spec.volume_name:
        _bind(backend, volume, claim)


def _on_claim(backend: MemoryBackend, claim: PersistentVolumeClaim) -> None:
    node = (claim.metadata.annotations or {}).get(ANN_SELECTED_NODE)
    if node is None or claim.spec.volume_name:
        return
    storage_class = backend.get(STORAGECLASSES, None, claim_class(claim))
    if storage_class is None or storage_class.provisioner in ("", NOT_SUPPORTED_PROVISIONER):
        return
    requests = claim.spec.resources.requests if claim.spec.resources else None
    size = (requests or {}).get("storage")
    on_node = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    spec: dict[str, Any] = {
        "capacity": {"storage": str(size) if size is not None else "0"},
        "accessModes": claim.spec.access_modes or [],
        "storageClassName": claim_class(claim),
        "claimRef": {
            "kind": "PersistentVolumeClaim",
            "namespace": claim.metadata.namespace,
            "name": claim.metadata.name,
            "uid": claim.metadata.uid,
        },
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [on_node]}]}},
    }
    volume = backend.apply(
        PVS, {"metadata": {"name": f"pvc-{claim.metadata.uid}"}, "spec": spec, "status": {"phase": "Bound"}}
    )
    _bind(backend, volume, claim)


async def _follow(backend: MemoryBackend, resource: Any, handle: Any) -> None:
    async for event in backend.watch(resource):
        objects = event.objects if event.type is EventType.REPLACED else (event.obj,)
        if event.type is EventType.DELETED:
            continue
        for obj in objects:
            if obj is not None:
                handle(backend, obj)


async def run_pv_controller(backend: MemoryBackend) -> None:
    """Until cancelled (or the backend closes)."""
    await asyncio.gather(_follow(backend, PVS, _on_volume), _follow(backend, PVCS, _on_claim))
