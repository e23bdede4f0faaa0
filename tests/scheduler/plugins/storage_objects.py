"""Storage objects for the volume plugins' tests, and feeding them to a plugin's informers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apis.client.backend import EventType, ResourceType, WatchEvent
from apis.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from scheduler.framework.handle import Handle
from scheduler.plugins.helper.storage import CSINODES, PVCS, PVS, STORAGECLASSES

__all__ = ["csi_node", "feed", "hostname_affinity", "pv", "pvc", "storage_class"]


def pvc(
    name: str,
    *,
    size: str = "1Gi",
    storage_class: str | None = "local",
    volume_name: str | None = None,
    bound: bool = False,
    modes: Sequence[str] = ("ReadWriteOnce",),
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    **more: Any,
) -> PersistentVolumeClaim:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "resourceVersion": "1",
    }
    meta["annotations"] = dict(annotations or {})
    if bound:
        meta["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume_name is not None:
        spec["volumeName"] = volume_name
    spec.update(more)
    status = {"phase": "Bound" if bound else "Pending"}
    return PersistentVolumeClaim.model_validate({"metadata": meta, "spec": spec, "status": status})


def hostname_affinity(*nodes: str) -> dict[str, Any]:
    return {
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}
                    ]
                }
            ]
        }
    }


def pv(
    name: str,
    *,
    size: str = "1Gi",
    storage_class: str = "local",
    nodes: Sequence[str] = (),
    claim: PersistentVolumeClaim | None = None,
    phase: str = "Available",
    modes: Sequence[str] = ("ReadWriteOnce",),
    labels: dict[str, str] | None = None,
    csi: dict[str, str] | None = None,
) -> PersistentVolume:
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": storage_class,
    }
    if nodes:
        spec["nodeAffinity"] = hostname_affinity(*nodes)
    if claim is not None:
        spec["claimRef"] = {
            "kind": "PersistentVolumeClaim",
            "namespace": claim.metadata.namespace,
            "name": claim.metadata.name,
            "uid": claim.metadata.uid,
        }
    if csi is not None:
        spec["csi"] = csi
    meta = {"name": name, "resourceVersion": "1", "labels": labels or {}}
    return PersistentVolume.model_validate({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def storage_class(
    name: str = "local",
    *,
    mode: str = "WaitForFirstConsumer",
    provisioner: str = "kubernetes.io/no-provisioner",
    allowed_topologies: list[dict[str, Any]] | None = None,
) -> StorageClass:
    wire: dict[str, Any] = {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}
    if allowed_topologies is not None:
        wire["allowedTopologies"] = allowed_topologies
    return StorageClass.model_validate(wire)


def csi_node(node: str, **limits: int) -> CSINode:
    """A CSINode with a count per driver (driver names with dots go through ``**{"a.b": 1}``)."""
    drivers = [{"name": d, "nodeID": node, "allocatable": {"count": c}} for d, c in limits.items()]
    return CSINode.model_validate({"metadata": {"name": node}, "spec": {"drivers": drivers}})


def feed(
    handle: Handle,
    *,
    claims: Sequence[PersistentVolumeClaim] = (),
    volumes: Sequence[PersistentVolume] = (),
    classes: Sequence[StorageClass] = (),
    csi_nodes: Sequence[CSINode] = (),
) -> None:
    """Hand every subscribed plugin the complete lists, as the first REPLACED of each watch."""
    lists: list[tuple[ResourceType[Any], Sequence[Any]]] = [
        (PVCS, claims),
        (PVS, volumes),
        (STORAGECLASSES, classes),
        (CSINODES, csi_nodes),
    ]
    for resource, objects in lists:
        for listener in handle.informers.listeners(resource):
            listener(WatchEvent(EventType.REPLACED, objects=tuple(objects)))
