"""A tiny kubelet PodResources server on a unix socket: fixed answers, and NOT_FOUND from ``Get`` for a
pod it does not list."""

from __future__ import annotations

from typing import Any

import grpc
from grpc import aio

from koordlet.podresources.api import api_pb2, api_pb2_grpc
from koordlet.podresources.server import start_server


class FakeKubelet(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(
        self,
        listing: api_pb2.ListPodResourcesResponse,
        allocatable: api_pb2.AllocatableResourcesResponse | None = None,
    ) -> None:
        self.listing = listing
        self.allocatable = allocatable or api_pb2.AllocatableResourcesResponse()
        self.calls: list[str] = []

    async def List(
        self, request: api_pb2.ListPodResourcesRequest, context: aio.ServicerContext[Any, Any]
    ) -> api_pb2.ListPodResourcesResponse:
        self.calls.append("List")
        return self.listing

    async def GetAllocatableResources(
        self, request: api_pb2.AllocatableResourcesRequest, context: aio.ServicerContext[Any, Any]
    ) -> api_pb2.AllocatableResourcesResponse:
        self.calls.append("GetAllocatableResources")
        return self.allocatable

    async def Get(
        self, request: api_pb2.GetPodResourcesRequest, context: aio.ServicerContext[Any, Any]
    ) -> api_pb2.GetPodResourcesResponse:
        self.calls.append(f"Get {request.pod_namespace}/{request.pod_name}")
        for pod in self.listing.pod_resources:
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                return api_pb2.GetPodResourcesResponse(pod_resources=pod)
        # the kubelet's own message for a pod it does not have
        await context.abort(
            grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} not found in {request.pod_namespace}"
        )
        raise AssertionError("abort raises")

    async def serve(self, socket: Any) -> aio.Server:
        return await start_server(self, socket)
