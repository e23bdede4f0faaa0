"""From workload manifests to the pods they make, as their controllers would (for ``koordctl
simulate`` and the what-if)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apis.client.backend import DEVICES, PODGROUPS, TOPOLOGIES, ResourceType
from apis.core import Pod
from apis.errors import InvalidValue
from scheduler.plugins.helper.storage import CSINODES, PVCS, PVS, STORAGECLASSES

__all__ = ["CUSTOM_KINDS", "MAX_PODS", "expand_document"]

MAX_PODS = 1_000_000
"""The most pods a workload may expand to: ``replicas: 1e12`` is an error, not a machine out of memory."""

_REPLICATED = {"Deployment", "ReplicaSet", "StatefulSet"}

CUSTOM_KINDS: dict[str, ResourceType[Any]] = {
    "PodGroup": PODGROUPS,
    "Device": DEVICES,
    "ClusterNetworkTopology": TOPOLOGIES,
    "PersistentVolumeClaim": PVCS,
    "PersistentVolume": PVS,
    "StorageClass": STORAGECLASSES,
    "CSINode": CSINODES,
}


def expand_document(doc: dict[str, Any]) -> Iterable[Pod]:
    """The pods of one manifest: a Pod, a List, or the pod template of a Deployment, ReplicaSet,
    StatefulSet (``replicas``) or Job (``parallelism``) expanded to ``<name>-<index>``. The
    custom resources (``CUSTOM_KINDS``: PodGroups, topologies, storage) yield none."""
    kind = doc.get("kind")
    if kind in CUSTOM_KINDS:
        return  # see load_custom_resources
    if kind == "List":
        items = doc.get("items") or []
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise InvalidValue("a List's items must be a list of objects")
        for item in items:
            yield from expand_document(item)
        return
    if kind == "Pod":
        yield Pod.model_validate(doc)
        return
    if kind in _REPLICATED or kind == "Job":
        spec = _object(doc, "spec")
        field_name = "replicas" if kind in _REPLICATED else "parallelism"
        count = spec.get(field_name, 1)
        if type(count) is not int or not 0 <= count <= MAX_PODS:
            raise InvalidValue(
                f"{kind} spec.{field_name}: {count!r} is not a whole number from 0 to {MAX_PODS}"
            )
        template = _object(spec, "template")
        meta = _object(doc, "metadata")
        if not isinstance(meta.get("name"), str):
            raise InvalidValue(f"{kind} metadata.name: a name is required")
        for index in range(count):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    **_object(template, "metadata"),
                    "name": f"{meta['name']}-{index}",
                    "namespace": meta.get("namespace", "default"),
                },
                "spec": _object(template, "spec"),
            }
            yield Pod.model_validate(pod)
        return
    raise ValueError(
        f"unsupported kind {kind!r} in the workload: "
        f"use Pod, List, Deployment, ReplicaSet, StatefulSet, Job or {', '.join(CUSTOM_KINDS)}"
    )


def _object(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key) or {}
    if not isinstance(value, dict):
        raise InvalidValue(f"{key}: a {type(value).__name__}, not an object")
    return value
