"""Pods and PodResources answers for the proxy's tests."""

from __future__ import annotations

from apis.core import Pod
from apis.extension.device import ANNOTATION_DEVICE_ALLOCATED
from koordlet.podresources.api import api_pb2

GPU_AND_RDMA_VF = (
    '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"23040Mi",'
    '"koordinator.sh/gpu-memory-ratio":"100"},"id":"0"}],"rdma":[{"minor":0,"resources":'
    '{"koordinator.sh/rdma":"1"},"id":"0000:01:00.0","extension":{"vfs":[{"minor":-1,"busID":"0000:01:00.2"}]}}]}'
)
"""The annotation of Koordinator's own test (``states_pod_resources_test.go``)."""


def pod(name: str, *, node: str = "n1", allocated: str | None = None, namespace: str = "ns") -> Pod:
    annotations = {} if allocated is None else {ANNOTATION_DEVICE_ALLOCATED: allocated}
    return Pod.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "main"}]},
        }
    )


def pod_resources(
    name: str,
    *containers: api_pb2.ContainerResources,
    namespace: str = "ns",
) -> api_pb2.PodResources:
    return api_pb2.PodResources(name=name, namespace=namespace, containers=containers)


def container(
    name: str = "main", *, devices: dict[str, list[str]] | None = None, cpus: tuple[int, ...] = ()
) -> api_pb2.ContainerResources:
    entries = [
        api_pb2.ContainerDevices(resource_name=resource, device_ids=ids)
        for resource, ids in (devices or {}).items()
    ]
    return api_pb2.ContainerResources(name=name, devices=entries, cpu_ids=cpus)


def listing(*pods: api_pb2.PodResources) -> api_pb2.ListPodResourcesResponse:
    return api_pb2.ListPodResourcesResponse(pod_resources=pods)


def devices_of(response: api_pb2.ListPodResourcesResponse) -> dict[str, list[list[tuple[str, list[str]]]]]:
    """``namespace/name`` -> per container, its (resource name, device ids) in order."""
    return {
        f"{p.namespace}/{p.name}": [
            [(d.resource_name, list(d.device_ids)) for d in c.devices] for c in p.containers
        ]
        for p in response.pod_resources
    }
