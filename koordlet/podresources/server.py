"""The PodResources proxy's gRPC service: the kubelet's answers, with koord's devices in ``List``.

As Koordinator's ``podResourcesServer``: ``List`` asks the kubelet and adds the devices of each
pod's ``device-allocated`` annotation (:mod:`koordlet.podresources.merge`);
``GetAllocatableResources`` and ``Get`` are the kubelet's answers unchanged. A failed kubelet call
fails the caller's with the kubelet's status code and message. Koordinator reads the pods from the
kubelet's ``/pods``; here they are koordlet's own watch of its node's pods (the API server's view).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from grpc import aio

from apis.core import Pod
from koordlet.podresources.api import api_pb2, api_pb2_grpc
from koordlet.podresources.client import PodResourcesClient
from koordlet.podresources.merge import annotations_by_pod, fill_devices_allocated_by_koord

__all__ = ["PodResourcesProxyServicer", "start_server"]

log = logging.getLogger("koordlet.podresources")

_T = TypeVar("_T")
Context = aio.ServicerContext[Any, Any]


class PodResourcesProxyServicer(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, kubelet: PodResourcesClient, pods: Callable[[], Iterable[Pod]]) -> None:
        self.kubelet = kubelet
        self.pods = pods
        self._reported: set[str] = set()

    async def List(
        self, request: api_pb2.ListPodResourcesRequest, context: Context
    ) -> api_pb2.ListPodResourcesResponse:
        response = await _forward(context, self.kubelet.list())
        merged, unparsed = fill_devices_allocated_by_koord(response, annotations_by_pod(self.pods()))
        for key in sorted(set(unparsed) - self._reported):
            log.warning("pod %s: its device-allocated annotation does not parse, its devices left out", key)
        self._reported.update(unparsed)
        return merged

    async def GetAllocatableResources(
        self, request: api_pb2.AllocatableResourcesRequest, context: Context
    ) -> api_pb2.AllocatableResourcesResponse:
        return await _forward(context, self.kubelet.get_allocatable_resources())

    async def Get(
        self, request: api_pb2.GetPodResourcesRequest, context: Context
    ) -> api_pb2.GetPodResourcesResponse:
        return await _forward(context, self.kubelet.get(request.pod_namespace, request.pod_name))


async def _forward(context: Context, call: Awaitable[_T]) -> _T:
    try:
        return await call
    except aio.AioRpcError as error:
        await context.abort(error.code(), error.details() or "")
        raise  # abort raises; this line only tells mypy so


async def start_server(servicer: api_pb2_grpc.PodResourcesListerServicer, socket: Path) -> aio.Server:
    """Serve ``servicer`` on the unix socket ``socket`` (a stale socket file is replaced)."""
    address = _replace_socket(socket)
    server = aio.server()
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(servicer, server)
    server.add_insecure_port(address)
    await server.start()
    return server


def _replace_socket(socket: Path) -> str:
    socket.parent.mkdir(parents=True, exist_ok=True)
    socket.unlink(missing_ok=True)
    return f"unix://{socket.absolute()}"
