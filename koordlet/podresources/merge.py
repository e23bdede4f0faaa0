"""The devices koord-scheduler allocated, added to the kubelet's PodResources answer.

The kubelet knows only the devices its device plugins allocated; koord-scheduler records its own
allocation in each pod's ``scheduling.koordinator.sh/device-allocated`` annotation. As Koordinator's
``fillPodDevicesAllocatedByKoord`` (``pkg/koordlet/statesinformer/impl/states_pod_resources.go``),
each device type of a pod's annotation becomes one ``ContainerDevices`` entry on the pod's first
container: ``gpu`` as ``nvidia.com/gpu``, ``rdma`` as ``koordinator.sh/rdma`` (any other type keeps
Koordinator's empty resource name), with a device's VF bus ids when it has an extension (an RDMA
VF allocation) and its ``id`` otherwise. The container's devices are then ordered by resource name,
the kubelet's before koord's on a tie. A pod without the annotation, with an annotation that does
not parse, without containers or unknown to the API server is left as the kubelet answered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from apis.core import Pod
from apis.errors import InvalidAnnotation
from apis.extension.device import (
    RESOURCE_NVIDIA_GPU,
    RESOURCE_RDMA,
    DeviceAllocations,
    get_device_allocations,
)
from koordlet.podresources.api import api_pb2

__all__ = ["RESOURCE_NAMES", "annotations_by_pod", "fill_devices_allocated_by_koord", "koord_devices"]

RESOURCE_NAMES: Mapping[str, str] = {"gpu": RESOURCE_NVIDIA_GPU, "rdma": RESOURCE_RDMA}
"""Koordinator's device type -> the resource name the proxy reports it under."""


def annotations_by_pod(pods: Iterable[Pod]) -> dict[str, Mapping[str, str]]:
    """``namespace/name`` -> the pod's annotations."""
    return {f"{pod.metadata.namespace}/{pod.metadata.name}": pod.metadata.annotations or {} for pod in pods}


def koord_devices(allocations: DeviceAllocations) -> list[api_pb2.ContainerDevices]:
    """One entry per device type, in type order."""
    entries = []
    for device_type in sorted(allocations):
        ids: list[str] = []
        for device in allocations[device_type]:
            if device.extension is not None:
                ids.extend(vf.bus_id or "" for vf in device.extension.vfs or ())
            else:
                ids.append(device.id or "")
        entries.append(
            api_pb2.ContainerDevices(resource_name=RESOURCE_NAMES.get(device_type, ""), device_ids=ids)
        )
    return entries


def fill_devices_allocated_by_koord(
    response: api_pb2.ListPodResourcesResponse, annotations: Mapping[str, Mapping[str, str]]
) -> tuple[api_pb2.ListPodResourcesResponse, list[str]]:
    """A copy of ``response`` with each pod's koord-allocated devices on its first container, and
    the pods (``namespace/name``) whose annotation did not parse."""
    merged = api_pb2.ListPodResourcesResponse()
    merged.CopyFrom(response)
    unparsed = []
    for pod in merged.pod_resources:
        key = f"{pod.namespace}/{pod.name}"
        if not pod.containers or key not in annotations:
            continue
        try:
            allocations = get_device_allocations(annotations[key])
        except InvalidAnnotation:
            unparsed.append(key)
            continue
        if not allocations:
            continue
        first = pod.containers[0]
        first.devices.extend(koord_devices(allocations))
        ordered = sorted(first.devices, key=lambda entry: entry.resource_name)
        del first.devices[:]
        first.devices.extend(ordered)
    return merged, unparsed
